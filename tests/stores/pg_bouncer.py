"""Start a private PgBouncer (Debian's ``pgbouncer``) in transaction mode (tests, bench).

It listens on a free 127.0.0.1 port, forwards every database to the PostgreSQL server
at ``upstream`` with ``auth_type = trust``, and keeps its ini, pid and log files in a
temporary folder. ``stats()`` reads its admin console (``SHOW POOLS``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PgBouncer", "find_pgbouncer"]


def find_pgbouncer() -> str | None:
    """The pgbouncer binary (Debian installs it in /usr/sbin), or None."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PgBouncer:
    """One pgbouncer process; ``start()`` then ``url(db)``; ``stop()`` when done."""

    upstream_port: int = 5432
    pool_size: int = 20
    max_db_connections: int = 0
    """Server connections per database at most (0: no limit beyond ``pool_size``)."""
    max_client_conn: int = 2000
    port: int = 0
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="lovia-pgb-")))
    process: subprocess.Popen[bytes] | None = None

    def ini(self) -> str:
        return "\n".join(
            [
                "[databases]",
                f"* = host=127.0.0.1 port={self.upstream_port}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {self.folder / 'users.txt'}",
                "admin_users = postgres",
                "pool_mode = transaction",
                f"default_pool_size = {self.pool_size}",
                f"max_client_conn = {self.max_client_conn}",
                f"max_db_connections = {self.max_db_connections}",
                "server_reset_query =",
                "ignore_startup_parameters = extra_float_digits",
                f"logfile = {self.folder / 'pgbouncer.log'}",
                f"pidfile = {self.folder / 'pgbouncer.pid'}",
                "",
            ]
        )

    def start(self, timeout_s: float = 10.0) -> PgBouncer:
        binary = find_pgbouncer()
        if binary is None:
            raise FileNotFoundError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.port = _free_port()
        (self.folder / "users.txt").write_text('"postgres" ""\n')
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(self.ini())
        args = [binary, str(ini)]
        if os.geteuid() == 0:
            args[1:1] = ["-u", "nobody"]  # it refuses to run as root
            os.chmod(self.folder, 0o777)  # a private temp folder: nobody writes its log there
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"pgbouncer exited: {err.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError("pgbouncer did not start listening")

    def url(self, database: str, query: str = "") -> str:
        tail = f"?{query}" if query else ""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}{tail}"

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()
        self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)
