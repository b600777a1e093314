"""The PostgreSQL store's schema and statements, with its schema-qualified names.

Each statement is one round trip; fenced writes check the lease token in the same
statement (see :mod:`lovia.stores.postgres`).
"""

from __future__ import annotations

from ._codec import RUN_COLUMNS
from .base import CANCEL_REQUEST_KEY, PRUNED_KEY, RESUMABLE_SQL
from .session_labels import PG_SESSION_LABELS_DDL
from .spend import PG_SPEND_DDL

COLS = ", ".join(RUN_COLUMNS)
LOCK_KEY = 0x6C6F766961  # "lovia": serializes schema creation across workers
NOW = "extract(epoch FROM clock_timestamp())::float8"
DDL = """
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
MIGRATE = (
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
    + PG_SESSION_LABELS_DDL
)
"""In-place migrations, run after ``DDL`` under the same lock (each is idempotent).
Fencing: each lease row keeps its run's last fencing token. Agents as tools: the
parent → child run link, on schemas made without it. ``lovia_acquire_v1``: a lease
grant in one round trip (a changed body gets a new name)."""
CURRENT = """
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
"""How many of the newest schema's parts exist (``CURRENT_PARTS`` when nothing is missing)."""
CURRENT_PARTS = 11
PROBE = "SELECT 1 FROM (SELECT pg_notify($1, $2)) AS n"
"""A notification sent through the pool (its ``void`` column unread: no type look-up)."""


def _fence(leases: str, n: int, run: str = "$1") -> str:
    """A fenced write's CTE: ``fence`` rows exist only while ``$n`` is the lease token of
    run ``run`` (and share-lock it until commit)."""
    return f"fence AS (SELECT 1 FROM {leases} WHERE run_id = {run} AND token = ${n} FOR SHARE)"


def _fenced(n: int) -> str:
    """True when no fence was given (``$n`` is NULL) or it held (see :func:`_fence`)."""
    return f"(${n}::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))"


class Sql:
    """Statements with this store's schema-qualified table names."""

    def __init__(self, schema: str) -> None:
        s = f'"{schema}"'
        self.ddl = DDL.format(s=s) + MIGRATE.format(s=s, now=NOW)
        self.channel = f"lovia_{schema}"[:63]
        self.meta = f"{s}.lovia_meta"
        self.runs = f"{s}.lovia_runs"
        self.spend = f"{s}.lovia_spend"
        self.session_labels = f"{s}.lovia_session_labels"
        records, leases, sessions = f"{s}.lovia_records", f"{s}.lovia_leases", f"{s}.lovia_sessions"
        self._run_writes(records, leases, sessions)
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

    def _run_writes(self, records: str, leases: str, sessions: str) -> None:
        runs = self.runs
        marks = ", ".join(f"${i}" for i in range(1, len(RUN_COLUMNS) + 1))
        marks = marks.replace("$17", "$17::json")
        self.begin = f"INSERT INTO {runs} ({COLS}) VALUES ({marks}) ON CONFLICT DO NOTHING"
        updates = ", ".join(f"{c} = excluded.{c}" for c in (*RUN_COLUMNS[1:], "result"))
        n_result, n_fence = len(RUN_COLUMNS) + 1, len(RUN_COLUMNS) + 2
        self.finish = (
            f"WITH {_fence(leases, n_fence)}, up AS (INSERT INTO {runs} ({COLS}, result) "
            f"SELECT {marks}, ${n_result}::json WHERE {_fenced(n_fence)} "
            f"ON CONFLICT (run_id) DO UPDATE SET {updates} RETURNING run_id) "
            f"SELECT 1 FROM up, LATERAL (SELECT pg_notify('{self.channel}', up.run_id)) AS n"
        )
        self._end(records, leases, sessions, marks, updates)
        self._start(records, leases, marks)
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

    def _start(self, records: str, leases: str, marks: str) -> None:
        """``start``: a new run's row and first records in one statement (a run that
        exists keeps its row and gets the records appended; a refused fence writes
        nothing). Parameters after the run columns: the records' kinds, versions and
        data, then the fence."""
        n = len(RUN_COLUMNS)
        kinds, vers, datas = (f"${i}" for i in range(n + 1, n + 4))
        count = f"cardinality({kinds}::text[])"
        self.start = (
            f"WITH {_fence(leases, n + 4)}, "
            f"run AS (INSERT INTO {self.runs} AS t ({COLS}, n_records) "
            f"SELECT {marks}, {count} WHERE {_fenced(n + 4)} "
            f"ON CONFLICT (run_id) DO UPDATE SET n_records = t.n_records + {count} "
            f"RETURNING t.n_records - {count} AS start), "
            f"ins AS (INSERT INTO {records} (run_id, seq, kind, version, data) "
            "SELECT $1, run.start + r.ord, r.kind, r.version::int, r.data::json FROM run, "
            f"unnest({kinds}::text[], {vers}::text[], {datas}::text[]) "
            "WITH ORDINALITY AS r(kind, version, data, ord)) "
            f"SELECT {_fenced(n + 4)}"
        )

    def _end(self, records: str, leases: str, sessions: str, marks: str, updates: str) -> None:
        """``end``: a run's last records, outcome, session segment and lease release in one
        statement. Parameters after the run columns: result, fence, the records' kinds,
        versions and data, then session id, segment version, entries, created_at, owner."""
        n = len(RUN_COLUMNS)
        res, _, kinds, vers, datas, sid, sver, ents, at, owner = (
            f"${i}" for i in range(n + 1, n + 11)
        )
        fenced = _fenced(n + 2)
        ok = f"{fenced} AND (cardinality({kinds}::text[]) = 0 OR EXISTS (SELECT 1 FROM cur))"
        self.end = (
            f"WITH {_fence(leases, n + 2)}, "
            f"cur AS (SELECT n_records FROM {self.runs} WHERE run_id = $1 AND {fenced} "
            "FOR UPDATE), "
            f"ins AS (INSERT INTO {records} (run_id, seq, kind, version, data) "
            "SELECT $1, cur.n_records + r.ord, r.kind, r.version::int, r.data::json FROM cur, "
            f"unnest({kinds}::text[], {vers}::text[], {datas}::text[]) "
            "WITH ORDINALITY AS r(kind, version, data, ord)), "
            f"up AS (INSERT INTO {self.runs} AS t ({COLS}, result) "
            f"SELECT {marks}, {res}::json WHERE {ok} ON CONFLICT (run_id) DO UPDATE SET "
            f"{updates}, n_records = t.n_records + cardinality({kinds}::text[]) "
            "RETURNING run_id), "
            f"seg AS (INSERT INTO {sessions} (session_id, run_id, version, entries, created_at) "
            f"SELECT {sid}::text, $1, {sver}, {ents}::json, {at} "
            f"WHERE {sid}::text IS NOT NULL AND {ok} "
            "ON CONFLICT (session_id, run_id) DO NOTHING RETURNING 1), "
            f"rel AS (UPDATE {leases} SET owner = '', expires_at = 0 "
            f"WHERE run_id = $1 AND owner = {owner}::text AND {ok} RETURNING 1) "
            f"SELECT {fenced}, EXISTS (SELECT 1 FROM up), "
            f"(SELECT count(*) FROM up, LATERAL (SELECT pg_notify('{self.channel}', up.run_id)) "
            "AS n)"
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
            f"SELECT {COLS} FROM {runs} WHERE trace_id = $1 ORDER BY started_at DESC LIMIT 1"
        )
        self.open_session = (
            f"SELECT (SELECT labels::text FROM {self.session_labels} WHERE session_id = $1), "
            "array_agg(version::text ORDER BY seq), array_agg(entries::text ORDER BY seq) "
            f"FROM {sessions} WHERE session_id = $1"
        )
        self.load_session = (
            f"SELECT version, entries FROM {sessions} WHERE session_id = $1 ORDER BY seq"
        )

    def _leases(self, leases: str) -> None:
        self.acquire = f"SELECT {self.runs.rsplit('.', 1)[0]}.lovia_acquire_v1($1, $2, $3)"
        self.renew = (
            f"UPDATE {leases} SET expires_at = {NOW} + $4::float8 "
            "WHERE run_id = $1 AND owner = $2 AND token = $3"
        )
        self.renew_many = (
            f"UPDATE {leases} AS l SET expires_at = {NOW} + $4::float8 "
            "FROM unnest($1::text[], $2::text[], $3::text[]) AS r(run_id, owner, token) "
            "WHERE l.run_id = r.run_id AND l.owner = r.owner AND l.token = r.token::bigint "
            "RETURNING l.run_id"
        )
        self.release = (
            f"UPDATE {leases} SET owner = '', expires_at = 0 WHERE run_id = $1 AND owner = $2"
        )
        self.lease_holder = f"SELECT owner FROM {leases} WHERE run_id = $1 AND expires_at > {NOW}"
        self.cancel_requests = (
            f"SELECT run_id, extra->'{CANCEL_REQUEST_KEY}' FROM {self.runs} "
            "WHERE status = 'cancelled' AND run_id = ANY($1::text[])"
        )

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
            f"SELECT run_id, status, ended_at, {NOW} FROM gone ON CONFLICT (run_id) DO UPDATE "
            "SET status = excluded.status, ended_at = excluded.ended_at, "
            f"pruned_at = excluded.pruned_at), {cascade}"
        )
        self.tombstone = (
            f"SELECT run_id, status, ended_at, pruned_at FROM {pruned} WHERE run_id = $1"
        )
        self.resumable = RESUMABLE_SQL.format(records=records, runs=runs)
        self.drop_records = (
            f"WITH gone AS (UPDATE {runs} SET extra = (extra::jsonb || "
            f"jsonb_build_object('{PRUNED_KEY}', {NOW}))::json "
            f"WHERE {{where}} AND extra::jsonb->'{PRUNED_KEY}' IS NULL RETURNING run_id), "
            f"{cascade}"
        )
