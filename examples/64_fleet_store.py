"""Running a fleet: the PostgreSQL store URL's options and the connection math (offline).

Reads two store URLs the way a fleet would write them — workers behind PgBouncer in
transaction mode, an API process that waits for results straight on PostgreSQL — shows
what each process may open, adds it up for a fleet, and shows what a typo in an option
gets you. Opening a store connects nothing, so this needs no server.

Run: python examples/64_fleet_store.py
"""

from __future__ import annotations

from lovia.errors import UserError
from lovia.stores import store
from lovia.stores.postgres import PostgresStore

WORKERS = "postgresql://app@pgbouncer:6432/app?statement_cache_size=0&pool_max=4&listen=off"
API = "postgresql://app@db.internal:5432/app?pool_max=2&application_name=api"


def describe(name: str, url: str) -> int:
    """Print one process kind's pool and return the connections it may hold."""
    db = store(url)
    assert isinstance(db, PostgresStore)
    o = db.options
    extra = 1 if o.listen else 0  # the LISTEN connection of a process that waits
    print(
        f"{name}: pool {o.pool_min}..{o.pool_max}, statement cache {o.statement_cache_size}, "
        f"listen {'on' if o.listen else 'off'}, application_name {o.application_name!r}: "
        f"at most {o.pool_max + extra} connections"
    )
    return o.pool_max + extra


per_worker = describe("worker", WORKERS)
per_api = describe("api", API)
machines, workers_each, api_processes = 20, 2, 4
to_pgbouncer = machines * workers_each * per_worker
direct = api_processes * per_api
print(
    f"fleet: {machines} machines x {workers_each} workers: {to_pgbouncer} connections to PgBouncer"
)
print(f"fleet: {api_processes} API processes: {direct} connections straight to PostgreSQL")

try:
    store("postgresql://app@db.internal:5432/app?statment_cache_size=0")
except UserError as exc:
    print("typo:", exc.message)
    print("hint:", exc.hint)
