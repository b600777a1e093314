"""Runs on Celery: a real ``celery worker`` process runs them; results come from the store.

Starts one ``celery worker --pool threads`` (this file, with ``--worker``) on a random
queue of the RabbitMQ at 127.0.0.1:5672, submits four runs of the one agent its workers
are registered to run (a task naming anything else is refused and dead-lettered),
waits for them through lovia's store, resubmits a finished ``run_id`` (replayed from the
store, no model call), and stops the worker. The model is scripted, so it runs offline.
Without a broker it says so and runs the same tasks in this process instead
(``task_always_eager``). Start RabbitMQ with ``rabbitmq-server`` (or
``docker run -p 5672:5672 rabbitmq``); ``LOVIA_AMQP_URL`` points elsewhere.

Run: python examples/61_celery.py
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from typing import Any

from celery import Celery

from lovia import Agent, UserError, tool
from lovia.integrations.celery import CeleryRunQueue
from lovia.testing import FunctionModel, call

BROKER = os.environ.get("LOVIA_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
QUEUE = os.environ.setdefault("EXAMPLE_QUEUE", f"lovia.example.{secrets.token_hex(3)}")
STORE = os.environ.get("LOVIA_STORE", "sqlite:///.lovia/lovia.db")


@tool
def fetch_report(day: str) -> str:
    """Fetch the sales report of a day."""
    return f"{day}: {int(day[-2:]) * 3} orders"


def scripted(request: Any, info: Any) -> Any:
    """Stands in for a real model: fetch the report of the day asked for, then answer."""
    last = request.messages[-1]
    if last.type == "input":
        return call("fetch_report", day=last.content.split()[-1])
    return f"Summary: {last.content}"


reporter = Agent(name="reporter", model=FunctionModel(scripted), tools=[fetch_report])
AGENT = "reporter"

app = Celery("lovia_example", broker=BROKER)
app.conf.worker_prefetch_multiplier = 1
app.conf.broker_connection_retry_on_startup = True
# the only agents workers run: a task naming anything else (say "os:abort") is refused
runs = CeleryRunQueue(app, STORE, agents={AGENT: reporter}, queue=QUEUE)


def broker_up() -> bool:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:
        return False


def start_worker() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, "--worker"], env=os.environ.copy())


def submit_and_wait() -> None:
    days = [f"2026-11-{d:02d}" for d in range(20, 24)]
    run_ids = [runs.submit(AGENT, f"Summarize {day}", session_id="sales") for day in days]
    for run_id in run_ids:
        snap = runs.get(run_id, timeout_s=30)  # read from lovia's store
        assert snap.result is not None
        print(f"{snap.info.status}: {snap.result['output']}")
    runs.submit(AGENT, f"Summarize {days[0]}", run_id=run_ids[0], session_id="sales")
    print(f"resubmitted {run_ids[0][:8]}: safe, a worker replays it from the store")
    try:  # workers run only registered agents; submit() checks the name up front too
        runs.submit("os:abort", "anything")
    except UserError as exc:
        print("refused:", exc.message.split(" (")[0])


def main() -> None:
    if not broker_up():
        print(f"No RabbitMQ at {BROKER}: running the tasks in this process instead.")
        app.conf.task_always_eager = True
        submit_and_wait()
        return
    worker = start_worker()
    try:
        submit_and_wait()
    finally:
        worker.send_signal(signal.SIGTERM)  # warm shutdown: running tasks finish first
        worker.wait(30)
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(QUEUE)
    print("worker stopped with exit code", worker.returncode)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        app.worker_main(
            ["worker", "--pool", "threads", "--concurrency", "4", "-Q", QUEUE,
             "--without-mingle", "--without-gossip", "--loglevel", "WARNING"]
        )  # fmt: skip
    else:
        main()
