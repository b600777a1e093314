"""A counting TCP proxy between a PostgreSQL client and its server (tests and bench).

It reads the frontend protocol as it passes and counts round trips the way the wire
sees them: a ``Sync`` (the end of an extended-protocol batch: bind + execute) and a
simple ``Query`` make the client wait for the server's ``ReadyForQuery``, and a
``Flush`` (asyncpg's prepare: ``Parse`` + ``Describe`` + ``Flush``) makes it wait for
the statement's description, so their sum is the number of round trips, whatever the
driver believes it sent. Each round trip is labelled with the SQL it carried (the
``Parse``d text, the text of the named statement a ``Bind`` used, or the ``Query``
text; a prepare as ``(prepare) SQL``). Bytes are forwarded unchanged; TLS is refused
to the client (the server's ``N``).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["WireCounter"]

_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104
_CANCEL_REQUEST = 80877102


@dataclass
class WireCounter:
    """Listen on 127.0.0.1 and forward every connection to ``upstream``."""

    upstream_host: str = "127.0.0.1"
    upstream_port: int = 5432
    trips: list[str] = field(default_factory=lambda: list[str]())
    connections: int = 0
    open_now: int = 0
    peak_open: int = 0
    named_statements: int = 0
    """``Parse`` messages that named their statement (server-side prepared statements)."""
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=lambda: set[asyncio.Task[None]]())

    @property
    def round_trips(self) -> int:
        return len(self.trips)

    def reset(self) -> None:
        self.trips.clear()

    def by_statement(self) -> Counter[str]:
        """Round trips per statement's first words (for reading a breakdown)."""
        return Counter(" ".join(sql.split()[:4]) for sql in self.trips)

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def url(self, database: str, user: str = "postgres", query: str = "") -> str:
        tail = f"?{query}" if query else ""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}{tail}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        self.connections += 1
        self.open_now += 1
        self.peak_open = max(self.peak_open, self.open_now)
        back = asyncio.ensure_future(_pump(up_reader, writer))
        try:
            await self._frontend(reader, writer, up_writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open_now -= 1
            up_writer.close()
            writer.close()
            back.cancel()
            with contextlib.suppress(BaseException):
                await back
            self._tasks.discard(task)

    async def _frontend(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up: asyncio.StreamWriter,
    ) -> None:
        while True:  # untyped start-up messages: SSL/GSS requests, then the startup
            head = await reader.readexactly(8)
            length, code = struct.unpack("!ii", head)
            body = await reader.readexactly(length - 8)
            if code in (_SSL_REQUEST, _GSS_REQUEST):
                writer.write(b"N")  # no TLS through the counter
                await writer.drain()
                continue
            up.write(head + body)
            await up.drain()
            if code == _CANCEL_REQUEST:
                return
            break
        statements: dict[str, str] = {}
        pending = ""
        while True:
            kind = await reader.readexactly(1)
            raw_len = await reader.readexactly(4)
            (length,) = struct.unpack("!i", raw_len)
            body = await reader.readexactly(length - 4)
            pending = self._note(kind, body, statements, pending)
            up.write(kind + raw_len + body)
            await up.drain()
            if kind == b"X":
                return

    def _note(self, kind: bytes, body: bytes, statements: dict[str, str], pending: str) -> str:
        """Count ``Sync``, ``Flush`` and ``Query``; remember the SQL each batch carries."""
        if kind == b"Q":
            self.trips.append(body.rstrip(b"\0").decode(errors="replace"))
            return ""
        if kind == b"P":
            name, _, rest = body.partition(b"\0")
            sql = rest.partition(b"\0")[0].decode(errors="replace")
            statements[name.decode()] = sql
            self.named_statements += bool(name)
            return pending or sql
        if kind == b"B":
            _portal, _, rest = body.partition(b"\0")
            name = rest.partition(b"\0")[0].decode()
            return pending or statements.get(name, "?")
        if kind == b"H":  # asyncpg's prepare: it waits for the description
            self.trips.append(f"(prepare) {pending}")
            return ""
        if kind == b"S":
            self.trips.append(pending or "(sync)")
            return ""
        return pending


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()
