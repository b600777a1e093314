"""PostgreSQL store for many workers (``asyncpg``; install ``lovia[postgres]``).

URL: ``postgresql://user:password@host:5432/db`` plus lovia's own query options,
removed before the rest goes to asyncpg:

- ``schema=NAME`` — keep the tables in this schema (created if missing; default
  ``public``), e.g. one schema per test session or per tenant
- ``pool_min=N`` / ``pool_max=N`` — connection pool bounds per process (default 1 / 4)
- ``statement_cache_size=N`` — asyncpg's prepared statements per connection (default
  100; ``0`` behind PgBouncer in transaction mode before 1.21)
- ``command_timeout=S``, ``connect_timeout=S`` (default 10),
  ``max_inactive_connection_lifetime=S`` (default 60; idle connections close),
  ``application_name=NAME`` (default ``lovia``; shown in ``pg_stat_activity``)
- ``listen=on|off`` — wait for run ends with ``LISTEN``/``NOTIFY`` (default on; off
  polls with backoff; through PgBouncer in transaction mode notifications cannot
  arrive, which the store notices and polls then)

Any other option is a ``UserError`` unless it is a connection option asyncpg reads
(``sslmode``, ``sslrootcert``, ``target_session_attrs``, …).

Tables are created on first use (``lovia_meta``, ``lovia_runs``, ``lovia_records``,
``lovia_leases``, ``lovia_sessions``, ``lovia_session_labels``, …) under an advisory
lock, so many workers may start at once (``read_only=True`` creates nothing: it checks
the tables exist and runs every transaction read-only). Payloads use the ``json`` type
rather than ``jsonb``: ``jsonb`` cannot hold ``\\u0000`` (transcripts may) and re-orders
keys, while ``json`` keeps the exact text that was written and still works with
``->``/``->>`` in SQL.

Every call is one round trip and atomic on its own (a connection goes back to the pool
without asyncpg's reset query: the store keeps no session state on it — no session
advisory locks, no ``LISTEN``, no ``SET``). An append locks its run row to take the
next sequence numbers and inserts the records in the same statement.
A fenced write (``fence=token``) also share-locks the run's lease row and writes only
if its token matches, in that same statement. Granting a lease is a function in the
schema (``lovia_acquire_v1``) whose statements each take a new snapshot: it locks the
lease row first, so a concurrent fenced ``finish`` has committed before the run's status
is read (a completed run is never leased again). ``finish`` sends a ``NOTIFY`` (channel
``lovia_<schema>``, payload the run id) in its statement, delivered on commit.
Lease expiry is judged by the server's clock, so workers on hosts with skewed clocks
still agree on it.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from ..errors import RunNotFound, StoreError, UserError
from ..transcript import TranscriptEntry
from ._codec import (
    RUN_COLUMNS,
    decode_record,
    dump_json,
    encode_entries,
    encode_records,
    info_from_row,
    info_row,
    join_segments,
    load_result,
    run_filter,
)
from ._pg_notify import Notifier, Watch
from ._pg_options import PgOptions, parse_url
from .base import (
    PRUNED_KEY,
    RESUMABLE_SQL,
    SCHEMA_VERSION,
    CheckpointRecord,
    RunInfo,
    RunSnapshot,
    Tombstone,
    check_version,
    lease_lost,
    prune_statuses,
)
from .session_labels import PG_SESSION_LABELS_DDL as _LABELS_DDL
from .session_labels import decode_labels, encode_labels, pg_session_labels
from .spend import PG_SPEND_DDL, pg_reserve, pg_settle, pg_spent

__all__ = ["PostgresStore"]


async def _no_reset(conn: Any) -> None:
    """Hand a connection back to the pool as it is: no reset query, no round trip.

    asyncpg rolls back an open transaction before calling this; the store leaves no
    other session state behind (no session locks, ``LISTEN`` or ``SET`` on pooled
    connections), so its default reset (``pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL``) would cost a round trip per call for nothing.
    """


_COLS = ", ".join(RUN_COLUMNS)
_LOCK_KEY = 0x6C6F766961  # "lovia": serializes schema creation across workers
_NOW = "extract(epoch FROM clock_timestamp())::float8"
_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.lovia_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.lovia_runs (
    run_id text PRIMARY KEY, agent text NOT NULL, session_id text,
    status text NOT NULL, finish_reason text, error_type text,
    turns integer NOT NULL DEFAULT 0, input_tokens bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0, cost_usd float8 NOT NULL DEFAULT 0,
    started_at float8 NOT NULL, ended_at float8, trace_id text, span_id text,
    history_len integer NOT NULL DEFAULT 0, version integer NOT NULL,
    extra json NOT NULL DEFAULT '{{}}', result json,
    n_records bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS lovia_runs_started ON {s}.lovia_runs (started_at);
CREATE INDEX IF NOT EXISTS lovia_runs_session ON {s}.lovia_runs (session_id, started_at);
CREATE INDEX IF NOT EXISTS lovia_runs_trace ON {s}.lovia_runs (trace_id);
CREATE INDEX IF NOT EXISTS lovia_runs_ended ON {s}.lovia_runs (ended_at);
CREATE TABLE IF NOT EXISTS {s}.lovia_records (
    run_id text NOT NULL, seq bigint NOT NULL, version integer NOT NULL,
    kind text NOT NULL, data json NOT NULL, PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS {s}.lovia_leases (
    run_id text PRIMARY KEY, owner text NOT NULL, expires_at float8 NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.lovia_sessions (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id text NOT NULL, run_id text NOT NULL, version integer NOT NULL,
    entries json NOT NULL, created_at float8 NOT NULL, UNIQUE (session_id, run_id)
);
CREATE TABLE IF NOT EXISTS {s}.lovia_pruned (
    run_id text PRIMARY KEY, status text NOT NULL, ended_at float8, pruned_at float8 NOT NULL
);
"""
_MIGRATE = (
    """
ALTER TABLE {s}.lovia_leases ADD COLUMN IF NOT EXISTS token bigint NOT NULL DEFAULT 0;
ALTER TABLE {s}.lovia_runs ADD COLUMN IF NOT EXISTS parent_run_id text;
ALTER TABLE {s}.lovia_runs ADD COLUMN IF NOT EXISTS parent_call_id text;
CREATE INDEX IF NOT EXISTS lovia_runs_parent ON {s}.lovia_runs (parent_run_id);
CREATE OR REPLACE FUNCTION {s}.lovia_acquire_v1(p_run text, p_owner text, p_ttl float8)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $lovia$
DECLARE
    holder text;
    live boolean;
    next_token bigint;
BEGIN
    INSERT INTO {s}.lovia_leases (run_id, owner, expires_at) VALUES (p_run, '', 0)
        ON CONFLICT DO NOTHING;
    SELECT l.owner, l.expires_at > {now}, l.token + 1 INTO holder, live, next_token
        FROM {s}.lovia_leases AS l WHERE l.run_id = p_run FOR UPDATE;
    IF live AND holder <> p_owner THEN
        RETURN NULL;
    END IF;
    -- a new statement, a new snapshot: sees a finish that held the lease row
    IF EXISTS (SELECT 1 FROM {s}.lovia_runs AS r WHERE r.run_id = p_run
               AND r.status = 'completed') THEN
        RETURN NULL;
    END IF;
    UPDATE {s}.lovia_leases AS l SET owner = p_owner, expires_at = {now} + p_ttl,
        token = next_token WHERE l.run_id = p_run;
    RETURN next_token;
END
$lovia$;
"""
    + PG_SPEND_DDL
    + _LABELS_DDL
)
"""In-place migrations, run after ``_DDL`` under the same lock (each is idempotent).
Fencing: each lease row keeps its run's last fencing token. Agents as tools: the
parent → child run link, on schemas made without it. ``lovia_acquire_v1``: a lease
grant in one round trip (a changed body gets a new name)."""
_CURRENT = """
SELECT (SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND (
        (table_name = 'lovia_leases' AND column_name = 'token')
        OR (table_name = 'lovia_runs' AND column_name IN ('parent_run_id', 'parent_call_id'))))
    + (SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'lovia_runs_parent')
    + (SELECT count(*) FROM information_schema.tables WHERE table_schema = $1
       AND table_name IN ('lovia_records', 'lovia_sessions', 'lovia_pruned', 'lovia_spend',
                          'lovia_session_labels'))
    + (CASE WHEN to_regclass($2) IS NULL THEN 0 ELSE 1 END)
    + (SELECT count(*) FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
       WHERE n.nspname = $1 AND p.proname = 'lovia_acquire_v1')
"""
"""How many of the newest schema's parts exist (``_CURRENT_PARTS`` when nothing is missing)."""
_CURRENT_PARTS = 11
_PROBE = "SELECT 1 FROM (SELECT pg_notify($1, $2)) AS n"
"""A notification sent through the pool (its ``void`` column unread: no type look-up)."""


def _hint(exc: BaseException) -> str:
    if "unsupported startup parameter" in str(exc):  # PgBouncer's answer
        return (
            "A connection pooler (PgBouncer) refused a connection setting: open read-only "
            "stores (lovia runs, lovia web) with a URL that points at PostgreSQL directly."
        )
    return (
        "The server refused the statement; check the data and that the URL's user may "
        "use this database and schema."
    )


class _Conn(Protocol):
    """The part of ``asyncpg.Connection`` (and ``Pool``) this module uses."""

    async def execute(self, query: str, *args: Any) -> str: ...
    async def fetch(self, query: str, *args: Any) -> list[Any]: ...
    async def fetchrow(self, query: str, *args: Any) -> Any: ...
    async def fetchval(self, query: str, *args: Any) -> Any: ...


class _Tx(_Conn, Protocol):
    def transaction(self) -> AbstractAsyncContextManager[Any]: ...


class _Pool(_Conn, Protocol):
    def acquire(self) -> AbstractAsyncContextManager[_Tx]: ...
    async def close(self) -> None: ...
    def terminate(self) -> None: ...


def _import_asyncpg() -> Any:
    try:
        return importlib.import_module("asyncpg")
    except ImportError as exc:
        raise UserError(
            "the PostgreSQL store needs asyncpg", hint="pip install 'lovia[postgres]'"
        ) from exc


def _fence(leases: str, n: int, run: str = "$1") -> str:
    """A fenced write's CTE: ``fence`` rows exist only while ``$n`` is the lease token of
    run ``run`` (and share-lock it until commit)."""
    return f"fence AS (SELECT 1 FROM {leases} WHERE run_id = {run} AND token = ${n} FOR SHARE)"


def _fenced(n: int) -> str:
    """True when no fence was given (``$n`` is NULL) or it held (see :func:`_fence`)."""
    return f"(${n}::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))"


class _Sql:
    """Statements with this store's schema-qualified table names."""

    def __init__(self, schema: str) -> None:
        s = f'"{schema}"'
        self.ddl = _DDL.format(s=s) + _MIGRATE.format(s=s, now=_NOW)
        self.channel = f"lovia_{schema}"[:63]
        self.meta = f"{s}.lovia_meta"
        self.runs = f"{s}.lovia_runs"
        self.spend = f"{s}.lovia_spend"
        self.session_labels = f"{s}.lovia_session_labels"
        records, leases, sessions = f"{s}.lovia_records", f"{s}.lovia_leases", f"{s}.lovia_sessions"
        self._run_writes(records, leases)
        self._reads(records, sessions)
        self._leases(leases)
        self._retention(records, leases)
        self.append_segment = (
            f"WITH {_fence(leases, 6, run='$2')}, "
            f"ins AS (INSERT INTO {sessions} (session_id, run_id, version, entries, created_at) "
            f"SELECT $1, $2, $3, $4::json, $5 WHERE {_fenced(6)} "
            "ON CONFLICT (session_id, run_id) DO NOTHING RETURNING 1) "
            f"SELECT EXISTS (SELECT 1 FROM ins), {_fenced(6)}"
        )

    def _run_writes(self, records: str, leases: str) -> None:
        runs = self.runs
        marks = ", ".join(f"${i}" for i in range(1, len(RUN_COLUMNS) + 1))
        marks = marks.replace("$17", "$17::json")
        self.begin = f"INSERT INTO {runs} ({_COLS}) VALUES ({marks}) ON CONFLICT DO NOTHING"
        updates = ", ".join(f"{c} = excluded.{c}" for c in (*RUN_COLUMNS[1:], "result"))
        n_result, n_fence = len(RUN_COLUMNS) + 1, len(RUN_COLUMNS) + 2
        self.finish = (
            f"WITH {_fence(leases, n_fence)}, up AS (INSERT INTO {runs} ({_COLS}, result) "
            f"SELECT {marks}, ${n_result}::json WHERE {_fenced(n_fence)} "
            f"ON CONFLICT (run_id) DO UPDATE SET {updates} RETURNING run_id) "
            f"SELECT 1 FROM up, LATERAL (SELECT pg_notify('{self.channel}', up.run_id)) AS n"
        )
        self.append = (
            f"WITH {_fence(leases, 5)}, "
            f"run AS (UPDATE {runs} SET n_records = n_records + cardinality($2::text[]) "
            f"WHERE run_id = $1 AND {_fenced(5)} "
            "RETURNING n_records - cardinality($2::text[]) AS start), "
            f"ins AS (INSERT INTO {records} (run_id, seq, kind, version, data) "
            "SELECT $1, run.start + r.ord, r.kind, r.version::int, r.data::json FROM run, "
            "unnest($2::text[], $3::text[], $4::text[]) "
            "WITH ORDINALITY AS r(kind, version, data, ord)) "
            f"SELECT EXISTS (SELECT 1 FROM run), {_fenced(5)}"
        )

    def _reads(self, records: str, sessions: str) -> None:
        runs = self.runs
        cols = ", ".join(f"r.{c}" for c in RUN_COLUMNS)
        self.load_run = (
            f"SELECT {cols}, r.result, a.seqs, a.versions, a.kinds, a.datas FROM {runs} AS r "
            "LEFT JOIN LATERAL (SELECT array_agg(seq::text ORDER BY seq) AS seqs, "
            "array_agg(version::text ORDER BY seq) AS versions, "
            "array_agg(kind ORDER BY seq) AS kinds, "
            f"array_agg(data::text ORDER BY seq) AS datas FROM {records} AS c "
            "WHERE c.run_id = r.run_id AND c.seq <= r.n_records) AS a ON true "
            "WHERE r.run_id = $1"
        )
        self.by_trace = (
            f"SELECT {_COLS} FROM {runs} WHERE trace_id = $1 ORDER BY started_at DESC LIMIT 1"
        )
        self.load_session = (
            f"SELECT version, entries FROM {sessions} WHERE session_id = $1 ORDER BY seq"
        )

    def _leases(self, leases: str) -> None:
        self.acquire = f"SELECT {self.runs.rsplit('.', 1)[0]}.lovia_acquire_v1($1, $2, $3)"
        self.renew = (
            f"UPDATE {leases} SET expires_at = {_NOW} + $4::float8 "
            "WHERE run_id = $1 AND owner = $2 AND token = $3"
        )
        self.renew_many = (
            f"UPDATE {leases} AS l SET expires_at = {_NOW} + $4::float8 "
            "FROM unnest($1::text[], $2::text[], $3::text[]) AS r(run_id, owner, token) "
            "WHERE l.run_id = r.run_id AND l.owner = r.owner AND l.token = r.token::bigint "
            "RETURNING l.run_id"
        )
        self.release = (
            f"UPDATE {leases} SET owner = '', expires_at = 0 WHERE run_id = $1 AND owner = $2"
        )
        self.lease_holder = f"SELECT owner FROM {leases} WHERE run_id = $1 AND expires_at > {_NOW}"

    def _retention(self, records: str, leases: str) -> None:
        """``delete`` / ``drop_records``: prune statements; ``{where}`` picks the runs."""
        runs = self.runs
        cascade = (
            f"r AS (DELETE FROM {records} WHERE run_id IN (SELECT run_id FROM gone)), "
            f"l AS (DELETE FROM {leases} WHERE run_id IN (SELECT run_id FROM gone)) "
            "SELECT count(*) FROM gone"
        )
        self.delete = (
            f"WITH gone AS (DELETE FROM {runs} WHERE {{where}} RETURNING run_id), {cascade}"
        )
        pruned = self.runs.replace("lovia_runs", "lovia_pruned")
        self.prune_delete = (
            f"WITH gone AS (DELETE FROM {runs} WHERE {{where}} "
            "RETURNING run_id, status, ended_at), "
            f"t AS (INSERT INTO {pruned} (run_id, status, ended_at, pruned_at) "
            f"SELECT run_id, status, ended_at, {_NOW} FROM gone ON CONFLICT (run_id) DO UPDATE "
            "SET status = excluded.status, ended_at = excluded.ended_at, "
            f"pruned_at = excluded.pruned_at), {cascade}"
        )
        self.tombstone = (
            f"SELECT run_id, status, ended_at, pruned_at FROM {pruned} WHERE run_id = $1"
        )
        self.resumable = RESUMABLE_SQL.format(records=records, runs=runs)
        self.drop_records = (
            f"WITH gone AS (UPDATE {runs} SET extra = (extra::jsonb || "
            f"jsonb_build_object('{PRUNED_KEY}', {_NOW}))::json "
            f"WHERE {{where}} AND extra::jsonb->'{PRUNED_KEY}' IS NULL RETURNING run_id), "
            f"{cascade}"
        )


class PostgresStore:
    """Session and checkpoint store in PostgreSQL (see the module docs)."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self._asyncpg = _import_asyncpg()
        self.url = url
        self.read_only = read_only
        self.options: PgOptions = parse_url(url)
        self.schema = self.options.schema
        self._sql = _Sql(self.schema)
        self._errors: tuple[type[BaseException], ...] = (
            OSError,
            self._asyncpg.PostgresError,
            self._asyncpg.InterfaceError,
        )
        self._pool: _Pool | None = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None
        self._notifier: Notifier | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    # -- plumbing -----------------------------------------------------------------

    @asynccontextmanager
    async def _db(self) -> AsyncGenerator[_Pool]:
        """The pool (created on first use in this event loop), errors as StoreError."""
        try:
            yield await self._get_pool()
        except self._asyncpg.PostgresError as exc:  # the server answered: not a network issue
            raise StoreError(
                f"PostgreSQL store failed: {type(exc).__name__}: {exc}", hint=_hint(exc)
            ) from exc
        except self._errors as exc:
            raise StoreError(
                f"PostgreSQL store failed: {exc}",
                hint="Check that the server is reachable and the URL is right.",
            ) from exc

    async def _get_pool(self) -> _Pool:
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._pool_loop is loop:
            return self._pool
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        async with self._lock:
            if self._pool is not None and self._pool_loop is loop:
                return self._pool
            self._drop_pool()
            pool: _Pool = await self._asyncpg.create_pool(
                self.options.dsn,
                server_settings=self._server_settings(),
                reset=_no_reset,
                **self.options.pool_kwargs(),
            )
            try:
                await (self._check_schema(pool) if self.read_only else self._create_schema(pool))
            except BaseException:
                pool.terminate()
                raise
            self._pool, self._pool_loop = pool, loop
            return pool

    def _server_settings(self) -> dict[str, str]:
        settings = {"application_name": self.options.application_name}
        if self.read_only:
            settings["default_transaction_read_only"] = "on"
        return settings

    def _drop_pool(self) -> None:
        """Forget a pool made in another (finished) event loop."""
        if self._notifier is not None:
            self._notifier.terminate()
            self._notifier = None
        if self._pool is not None:
            try:
                self._pool.terminate()
            except Exception:  # its loop is gone; the connections die with it
                pass
        self._pool = self._pool_loop = None

    async def _create_schema(self, pool: _Pool) -> None:
        async with pool.acquire() as conn, conn.transaction():
            if not await self._schema_current(conn):
                # DDL takes ACCESS EXCLUSIVE locks: run it only when something is missing,
                # never beside live writers of an up-to-date schema (a deadlock with them)
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
                await conn.execute(self._sql.ddl)
            found = await conn.fetchval(
                f"SELECT value FROM {self._sql.meta} WHERE key = 'schema_version'"
            )
            if found is None:
                await conn.execute(
                    f"INSERT INTO {self._sql.meta} (key, value) VALUES ('schema_version', $1)",
                    str(SCHEMA_VERSION),
                )
            else:
                check_version(int(found), f"PostgreSQL schema {self.schema!r}")

    async def _schema_current(self, conn: _Conn) -> bool:
        """True when every table, migrated column and index of this lovia is there."""
        count = await conn.fetchval(_CURRENT, self.schema, f'"{self.schema}".lovia_meta')
        return count == _CURRENT_PARTS

    async def _check_schema(self, pool: _Pool) -> None:
        """Read-only: lovia's tables must already be there (nothing is created)."""
        found = None
        if await pool.fetchval("SELECT to_regclass($1) IS NOT NULL", self._sql.meta):
            found = await pool.fetchval(
                f"SELECT value FROM {self._sql.meta} WHERE key = 'schema_version'"
            )
        if found is None:
            raise StoreError(
                f"PostgreSQL schema {self.schema!r} is not a lovia store (no lovia tables)",
                hint="Check the store URL and its ?schema= option; nothing was created.",
            )
        check_version(int(found), f"PostgreSQL schema {self.schema!r}")

    # -- checkpointer -------------------------------------------------------------

    async def begin(self, info: RunInfo) -> None:
        """Create the run; a no-op when it already exists (resume)."""
        row = info_row(info)
        async with self._db() as db:
            await db.execute(self._sql.begin, *row)

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        """Append records in order after the run's last one; return payload bytes."""
        rows, size = encode_records(run_id, records)
        if not rows:
            return size
        kinds, versions, datas = (list(column) for column in zip(*rows, strict=True))
        versions = [str(version) for version in versions]  # text[]: no type look-up round trip
        async with self._db() as db:
            found, fenced = await db.fetchrow(
                self._sql.append, run_id, kinds, versions, datas, fence
            )
        if fence is not None and not fenced:
            raise lease_lost(run_id, fence)
        if not found:
            raise RunNotFound(f"no run {run_id!r} to append to", hint="Call begin() first.")
        return size

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The run, its records in order and its result; None when unknown (one
        statement: the run row and its records from one snapshot)."""
        async with self._db() as db:
            run = await db.fetchrow(self._sql.load_run, run_id)
        if run is None:
            return None
        info = info_from_row(run)
        n = len(RUN_COLUMNS)
        result, seqs, versions, kinds, datas = run[n], *(run[n + 1 + i] or () for i in range(4))
        records = [
            decode_record(run_id, int(seq), int(version), kind, data)
            for seq, version, kind, data in zip(seqs, versions, kinds, datas, strict=True)
        ]
        return RunSnapshot(info=info, records=records, result=load_result(run_id, result))

    async def finish(
        self, info: RunInfo, result: dict[str, Any] | None, *, fence: int | None = None
    ) -> None:
        """Record the run's outcome and result (creates the run if it was never begun)."""
        row = info_row(info)
        data = None if result is None else dump_json(result, f"result of run {info.run_id}")
        async with self._db() as db:
            written = await db.fetchval(self._sql.finish, *row, data, fence)
        if written is None and fence is not None:
            raise lease_lost(info.run_id, fence)

    async def acquire(self, run_id: str, owner: str, ttl_s: float) -> int | None:
        """Grant a lease with the next fencing token; None while another owner's lease
        is unexpired or the run is completed."""
        async with self._db() as db:
            token = await db.fetchval(self._sql.acquire, run_id, owner, float(ttl_s))
        return None if token is None else int(token)

    async def renew(self, run_id: str, owner: str, fence: int, ttl_s: float) -> bool:
        """Extend the lease granted with ``fence``; False when a later grant replaced it."""
        async with self._db() as db:
            status = await db.execute(self._sql.renew, run_id, owner, fence, float(ttl_s))
        return status.split()[-1] != "0"

    async def renew_many(self, leases: Sequence[tuple[str, str, int]], ttl_s: float) -> set[str]:
        """``renew`` for each ``(run_id, owner, fence)`` in one statement; the run ids
        not renewed."""
        if not leases:
            return set()
        runs = [lease[0] for lease in leases]
        owners = [lease[1] for lease in leases]
        fences = [str(lease[2]) for lease in leases]
        async with self._db() as db:
            rows = await db.fetch(self._sql.renew_many, runs, owners, fences, float(ttl_s))
        renewed = {str(row[0]) for row in rows}
        return {run_id for run_id, _, _ in leases if run_id not in renewed}

    async def lease_holder(self, run_id: str) -> str | None:
        """The owner of the unexpired lease on ``run_id``, if any."""
        async with self._db() as db:
            owner = await db.fetchval(self._sql.lease_holder, run_id)
        return None if owner is None else str(owner)

    async def release(self, run_id: str, owner: str) -> None:
        """Free the lease if ``owner`` holds it (its token is kept)."""
        async with self._db() as db:
            await db.execute(self._sql.release, run_id, owner)

    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 50,
        parent_run_id: str | None = None,
        top_level: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> list[RunInfo]:
        """Runs matching every given filter, newest first."""
        where, params = run_filter(
            lambda n: f"${n}",
            top_level=top_level,
            labels=labels,
            label_sql=_label_sql,
            session_id=session_id,
            agent=agent,
            status=status,
            parent_run_id=parent_run_id,
        )
        params.append(limit)
        sql = (
            f"SELECT {_COLS} FROM {self._sql.runs} {where} "
            f"ORDER BY started_at DESC, run_id DESC LIMIT ${len(params)}"
        )
        async with self._db() as db:
            rows = await db.fetch(sql, *params)
        return [info_from_row(row) for row in rows]

    # -- spend ledger (spend limits: see lovia.stores.spend) ----------------------------

    async def reserve_spend(
        self, key: str, window_start: float, amount: float, limit: float
    ) -> float | None:
        async with self._db() as db:
            return await pg_reserve(db, self._sql.spend, key, window_start, amount, limit)

    async def settle_spend(
        self, key: str, window_start: float, reserved: float, actual: float
    ) -> None:
        async with self._db() as db:
            await pg_settle(db, self._sql.spend, key, window_start, reserved, actual)

    async def spent(self, key: str, window_start: float) -> float:
        async with self._db() as db:
            return await pg_spent(db, self._sql.spend, key, window_start)

    async def find_run_by_trace(self, trace_id: str) -> RunInfo | None:
        """The newest run recorded with this trace id, if any."""
        async with self._db() as db:
            row = await db.fetchrow(self._sql.by_trace, trace_id)
        return None if row is None else info_from_row(row)

    async def delete_run(self, run_id: str) -> None:
        """Remove the run, its records and its lease (its session segment stays)."""
        async with self._db() as db:
            await db.fetchval(self._sql.delete.format(where="run_id = $1"), run_id)

    async def prune(
        self,
        older_than_s: float,
        *,
        status: str | None = None,
        run_id: str | None = None,
        records_only: bool = False,
        force: bool = False,
    ) -> int:
        """Delete finished runs that ended over ``older_than_s`` ago (or only their
        records, keeping the summary row); return count. Failed runs with a tool ledger
        are kept unless ``force``; a run deleted whole leaves a tombstone."""
        args: list[Any] = [list(prune_statuses(status)), time.time() - older_than_s]
        where = "status = ANY($1::text[]) AND ended_at <= $2"
        if run_id is not None:
            args.append(run_id)
            where += " AND run_id = $3"
        if not force:
            where += f" AND {self._sql.resumable}"
        sql = self._sql.drop_records if records_only else self._sql.prune_delete
        async with self._db() as db:
            count = await db.fetchval(sql.format(where=where), *args)
        return int(count)

    async def tombstone(self, run_id: str) -> Tombstone | None:
        """What is left of ``run_id`` if ``prune`` deleted it (None otherwise)."""
        try:
            async with self._db() as db:
                row = await db.fetchrow(self._sql.tombstone, run_id)
        except StoreError:
            if not self.read_only:
                raise
            return None  # a read-only open of a schema made before tombstones
        return (
            None
            if row is None
            else Tombstone(run_id=row[0], status=row[1], ended_at=row[2], pruned_at=row[3])
        )

    # -- sessions -----------------------------------------------------------------

    async def load_session(self, session_id: str) -> list[TranscriptEntry]:
        """Every segment's entries, in the order the segments were written."""
        async with self._db() as db:
            rows = await db.fetch(self._sql.load_session, session_id)
        return join_segments(session_id, [(row[0], row[1]) for row in rows])

    async def session_labels(
        self, session_id: str, record: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The session's labels; ``record`` becomes them when it has none."""
        text = encode_labels(record) if record else None
        try:
            async with self._db() as db:
                found = await pg_session_labels(
                    db, self._sql.session_labels, session_id, text, time.time()
                )
        except StoreError:
            if not self.read_only:
                raise
            return {}  # a read-only open of a schema made before session labels
        return decode_labels(session_id, found)

    async def append_segment(
        self,
        session_id: str,
        run_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        fence: int | None = None,
    ) -> bool:
        """Write the run's segment once; False (nothing written) when it exists."""
        text = encode_entries(session_id, entries)
        async with self._db() as db:
            written, fenced = await db.fetchrow(
                self._sql.append_segment,
                session_id,
                run_id,
                SCHEMA_VERSION,
                text,
                time.time(),
                fence,
            )
        if fence is not None and not fenced:
            raise lease_lost(run_id, fence)
        return bool(written)

    # -- waiting for a run ---------------------------------------------------------

    @asynccontextmanager
    async def watch_run(self, run_id: str) -> AsyncGenerator[Watch]:
        """Notifications about ``run_id`` (its ``finish``) while inside the block.

        The store ``LISTEN`` s on one extra connection (not from the pool) unless the
        URL says ``listen=off`` or the store is read-only; when notifications cannot
        arrive (PgBouncer in transaction mode) the watch says ``listening`` False.
        """
        notifier = await self._get_notifier()
        watch = Watch(notifier, run_id)
        if notifier is None:
            yield watch
            return
        notifier.add(watch)
        try:
            await notifier.ensure()
            yield watch
        finally:
            notifier.remove(watch)

    async def _get_notifier(self) -> Notifier | None:
        if not self.options.listen or self.read_only:
            return None
        async with self._db():  # the pool of this event loop (and its schema)
            pass
        if self._notifier is None:
            options = self.options

            async def connect() -> Any:
                return await self._asyncpg.connect(
                    options.dsn,
                    timeout=options.connect_timeout,
                    server_settings={"application_name": options.application_name},
                )

            async def send(channel: str, payload: str) -> None:
                async with self._db() as db:
                    await db.execute(_PROBE, channel, payload)

            self._notifier = Notifier(connect, self._sql.channel, send)
        return self._notifier

    async def aclose(self) -> None:
        """Close the pool; later calls fail."""
        self._closed = True
        pool, loop = self._pool, self._pool_loop
        notifier, self._notifier = self._notifier, None
        self._pool = self._pool_loop = None
        if pool is None:
            return
        if loop is asyncio.get_running_loop():
            if notifier is not None:
                await notifier.aclose()
            await pool.close()
        else:
            if notifier is not None:
                notifier.terminate()
            pool.terminate()


def _label_sql(key: str) -> tuple[str, str]:
    """A run's label ``key`` in its ``extra`` JSON."""
    return "(extra::jsonb -> 'labels' ->> {key}) = {value}", key
