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
from . import _pg_sql as sq
from ._codec import (
    RUN_COLUMNS,
    decode_record,
    dump_json,
    encode_entries,
    encode_records,
    info_from_row,
    info_row,
    join_segments,
    load_json,
    load_result,
    run_filter,
)
from ._pg_notify import Notifier, Watch
from ._pg_options import PgOptions, parse_url
from .base import (
    SCHEMA_VERSION,
    CheckpointRecord,
    RunEnd,
    RunInfo,
    RunSnapshot,
    Tombstone,
    check_version,
    lease_lost,
    prune_statuses,
)
from .session_labels import decode_labels, encode_labels, pg_session_labels
from .spend import pg_reserve, pg_settle, pg_spent

__all__ = ["PostgresStore"]


async def _no_reset(conn: Any) -> None:
    """Hand a connection back to the pool as it is: no reset query, no round trip.

    asyncpg rolls back an open transaction before calling this; the store leaves no
    other session state behind (no session locks, ``LISTEN`` or ``SET`` on pooled
    connections), so its default reset (``pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL``) would cost a round trip per call for nothing.
    """


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


def _columns(rows: Sequence[tuple[str, int, str]]) -> tuple[list[str], list[str], list[str]]:
    """Encoded records as the statements' three arrays: kinds, versions and data (the
    versions as text: a ``text[]`` needs no type look-up round trip)."""
    return [k for k, _, _ in rows], [str(v) for _, v, _ in rows], [d for _, _, d in rows]


class PostgresStore:
    """Session and checkpoint store in PostgreSQL (see the module docs)."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self._asyncpg = _import_asyncpg()
        self.url = url
        self.read_only = read_only
        self.options: PgOptions = parse_url(url)
        self.schema = self.options.schema
        self._sql = sq.Sql(self.schema)
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
                await conn.execute("SELECT pg_advisory_xact_lock($1)", sq.LOCK_KEY)
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
        count = await conn.fetchval(sq.CURRENT, self.schema, f'"{self.schema}".lovia_meta')
        return count == sq.CURRENT_PARTS

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
        kinds, versions, datas = _columns(rows)
        async with self._db() as db:
            found, fenced = await db.fetchrow(
                self._sql.append, run_id, kinds, versions, datas, fence
            )
        if fence is not None and not fenced:
            raise lease_lost(run_id, fence)
        if not found:
            raise RunNotFound(f"no run {run_id!r} to append to", hint="Call begin() first.")
        return size

    async def start_run(
        self, info: RunInfo, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        """A new run's row and first records in one statement; the records' bytes (see
        :func:`~lovia.stores.base.start_run`). A run that exists keeps its row: the records
        are appended to it."""
        rows, size = encode_records(info.run_id, records)
        kinds, versions, datas = _columns(rows)
        async with self._db() as db:
            fenced = await db.fetchval(
                self._sql.start, *info_row(info), kinds, versions, datas, fence
            )
        if fence is not None and not fenced:
            raise lease_lost(info.run_id, fence)
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

    async def end_run(self, end: RunEnd) -> int:
        """A run's last records, outcome, session segment and lease release in one
        statement; the records' bytes (see :func:`~lovia.stores.base.end_run`)."""
        info = end.info
        run_id = info.run_id
        data = None if end.result is None else dump_json(end.result, f"result of run {run_id}")
        rows, size = encode_records(run_id, end.records)
        kinds, versions, datas = _columns(rows)
        text = None if end.session_id is None else encode_entries(end.session_id, end.entries)
        async with self._db() as db:
            fenced, written, _ = await db.fetchrow(
                self._sql.end, *info_row(info), data, end.fence, kinds, versions, datas,
                end.session_id, SCHEMA_VERSION, text, time.time(), end.release,
            )  # fmt: skip
        if end.fence is not None and not fenced:
            raise lease_lost(run_id, end.fence)
        if not written:
            raise RunNotFound(f"no run {run_id!r} to append to", hint="Call begin() first.")
        return size

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

    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, Any]:
        """The cancel requests on the rows of ``run_ids`` (run id -> the request)."""
        if not run_ids:
            return {}
        async with self._db() as db:
            rows = await db.fetch(self._sql.cancel_requests, list(run_ids))
        marks = ((str(row[0]), None if row[1] is None else load_json(row[1])) for row in rows)
        return {run_id: mark for run_id, mark in marks if isinstance(mark, dict)}

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
            f"SELECT {sq.COLS} FROM {self._sql.runs} {where} "
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

    async def open_session(
        self, session_id: str, record: Mapping[str, str] | None = None
    ) -> tuple[list[TranscriptEntry], dict[str, str]]:
        """The session's history and labels in one statement (after recording ``record``
        as its labels when it has none: one more)."""
        if record or self.read_only:
            return await self.load_session(session_id), await self.session_labels(
                session_id, record
            )
        async with self._db() as db:
            labels, versions, texts = await db.fetchrow(self._sql.open_session, session_id)
        rows = list(zip((int(v) for v in versions or ()), texts or (), strict=True))
        return join_segments(session_id, rows), decode_labels(session_id, labels)

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
                    await db.execute(sq.PROBE, channel, payload)

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
