"""``RunQueue``: run tasks as entries of a Redis stream (JSON in the field ``task``)."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..labels import check_labels
from ..runner import check_deps_key
from ..stores import Store
from ..stores import store as open_store
from ..stores.base import RunSnapshot
from .execute import decode_input, encode_input, wait_for_run
from .marks import request_cancel

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RunQueue", "decode_input"]


def _connect(url: str) -> Redis:
    try:
        import redis.asyncio as aioredis
    except ImportError as exc:
        raise UserError(
            "the Redis task queue needs the redis package", hint="pip install 'lovia[redis]'"
        ) from exc
    return aioredis.from_url(url, decode_responses=True)


class RunQueue:
    """A Redis stream of run tasks, read by :class:`Worker` s through one consumer group."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        stream: str = "lovia:runs",
        group: str = "lovia-workers",
        *,
        done_ttl_s: float = 86400.0,
    ) -> None:
        self.url, self.stream, self.group = url, stream, group
        self.done_ttl_s = done_ttl_s
        self._client: Redis | None = None

    @property
    def client(self) -> Redis:
        """The ``redis.asyncio`` client (opened on first use)."""
        if self._client is None:
            self._client = _connect(self.url)
        return self._client

    async def submit(
        self,
        agent: str,
        input: Any = None,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        deps_key: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> str:
        """Queue a run of the agent named ``agent``; return its ``run_id``.

        ``input`` is a str, an ``InputEntry`` or a list of them. ``run_id`` (generated
        when absent) is the idempotency key: submitting it again is safe. ``deps_key``
        (at most 256 printable characters) is handed to the worker's ``deps`` factory
        and stored with the run (``RunInfo.extra["deps_key"]``). ``labels``: the run's
        attribution labels. Both are checked here, so a bad one fails the caller, not a
        worker.
        """
        checked = check_labels(labels)
        check_deps_key(deps_key)
        run_id = run_id or secrets.token_hex(16)
        task = {
            "v": 1,
            "run_id": run_id,
            "agent": agent,
            "input": encode_input(input),
            "session_id": session_id,
            "deps_key": deps_key,
        }
        if checked:
            task["labels"] = checked
        await self.client.xadd(self.stream, {"task": json.dumps(task)})
        return run_id

    async def ensure_group(self) -> None:
        """Create the stream and the consumer group (from the start) unless they exist."""
        try:
            await self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except Exception as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def ack(self, msg_id: str, run_id: str | None, outcome: str) -> None:
        """Acknowledge a task and note that the queue is done with its run."""
        # commands are queued on the pipeline (`_ =`: not coroutines) and run by execute()
        async with self.client.pipeline(transaction=True) as pipe:
            _ = pipe.xack(self.stream, self.group, msg_id)
            if run_id is not None:
                key, ttl = self._done_key(run_id), int(self.done_ttl_s)
                _ = pipe.set(key, outcome, ex=ttl)
                _ = pipe.hdel(self.running_key, run_id)
                _ = pipe.hdel(self.errors_key, run_id)
            await pipe.execute()

    async def cancel(
        self, run_id: str, store: str | Store, reason: str = "cancelled", *, ttl_s: float = 86400.0
    ) -> str:
        """Cancel the run by id, queued or running; return the state it was in.

        The cancel request is stored on the run (a worker checks it before it starts a
        delivery: a queued run never starts, even after a worker restart) and signalled
        to the worker running it, which sets the run's cancel token within a few
        seconds (the run ends ``cancelled``, resumable, and its task is acknowledged).
        A finished run is left as it is (``"ended"``).
        """
        db = open_store(store) if isinstance(store, str) else store
        try:
            before = await request_cancel(db, run_id, reason)
        finally:
            if isinstance(store, str):
                await db.aclose()
        if before != "ended":
            await self.client.set(self.cancel_key(run_id), reason, ex=int(ttl_s))
        return before

    def cancel_key(self, run_id: str) -> str:
        """The key a cancel of ``run_id`` is signalled in (its value: the reason)."""
        return f"{self.stream}:cancel:{run_id}"

    @property
    def running_key(self) -> str:
        """The hash of ``run_id`` -> stream entry id of the tasks workers started."""
        return f"{self.stream}:running"

    @property
    def errors_key(self) -> str:
        """The hash of ``run_id`` -> last error, kept for a dead letter's record."""
        return f"{self.stream}:errors"

    @property
    def dead_stream(self) -> str:
        """The stream dead-lettered tasks are moved to."""
        return f"{self.stream}:dead"

    def _done_key(self, run_id: str) -> str:
        return f"{self.stream}:done:{run_id}"

    async def dead_letters(self) -> list[dict[str, Any]]:
        """The dead-lettered tasks: each task's fields with ``deliveries`` and ``reason``."""
        found: Any = await self.client.xrange(self.dead_stream)
        out: list[dict[str, Any]] = []
        for _, fields in found:
            task = json.loads(fields.get("task", "{}"))
            out.append({**task, "deliveries": int(fields.get("deliveries", 0) or 0),
                        "reason": fields.get("reason", "")})  # fmt: skip
        return out

    async def pending(self) -> int:
        """Tasks delivered to a worker and not acknowledged yet."""
        info = await self.client.xpending(self.stream, self.group)
        return int(info["pending"])

    async def result(
        self, run_id: str, store: str | Store, *, timeout_s: float = 60.0, poll_s: float = 0.2
    ) -> RunSnapshot:
        """Wait until the run completed, or a worker acknowledged its task as ended.

        Returns the stored run (``.info.status``: completed, failed or paused;
        ``.result["output"]``); raises ``TimeoutError`` after ``timeout_s`` seconds. A
        run that failed for a retryable reason is waited for: a worker will resume it.
        """
        db = open_store(store) if isinstance(store, str) else store

        async def acked(snap: RunSnapshot) -> bool:
            return bool(await self.client.exists(self._done_key(run_id)))

        try:
            return await wait_for_run(db, run_id, settled=acked, timeout_s=timeout_s, poll_s=poll_s)
        finally:
            if isinstance(store, str):
                await db.aclose()

    async def delete(self) -> None:
        """Drop the stream with its groups, tasks and done-marks (tests, demos)."""
        for pattern in (f"{self.stream}:done:*", f"{self.stream}:cancel:*"):
            keys: AsyncIterator[str] = self.client.scan_iter(match=pattern)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType] -- redis leaves scan_iter untyped
            async for key in keys:
                await self.client.delete(key)
        await self.client.delete(self.stream, self.dead_stream, self.running_key, self.errors_key)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
