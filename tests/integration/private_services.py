"""A PostgreSQL and a Redis of a test's own, whose lifetime the test decides: on a temporary
directory and a free port, as ``scripts/services.sh`` starts the shared ones, so that breaking
or exposing them disturbs neither the session's database nor another session's.

``listen``: the addresses they answer on besides loopback (the real node's pods reach the host
at its address on its default route, ``devcluster.real_node.node_ip``). Clients from
``trusted_subnet`` are let in with ``password`` (PostgreSQL's scram, Redis' ``requirepass``);
loopback needs no password for PostgreSQL, as on the shared one.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.integration.conftest import free_port, wait_for


def _as_postgres(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: Debian's package made a postgres account."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.getuid() == 0 else argv


class PrivatePostgres:
    """A PostgreSQL of the test's own, in ``root``, on a free port, with a database ``portal``
    owned by the user ``portal``."""

    def __init__(
        self,
        root: Path,
        *,
        listen: tuple[str, ...] = (),
        trusted_subnet: str = "",
        password: str = "",
    ):
        if listen and not (trusted_subnet and password):
            raise ValueError("listening beyond loopback needs a trusted subnet and a password")
        versions = sorted(
            glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[4])
        )
        if not versions:
            pytest.fail("PostgreSQL is not installed (apt-get install postgresql)", pytrace=False)
        self.bin = Path(versions[-1])
        self.listen, self.password = ("127.0.0.1", *listen), password
        self.data, self.logs = root / "pg", root / "pglog"
        self.port = free_port()
        for path in (self.data, self.logs):
            path.mkdir()
            if os.getuid() == 0:
                shutil.chown(path, "postgres", "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-U", "portal", "-A", "trust", "-E", "UTF8",
            "--no-locale",
        )  # fmt: skip
        if trusted_subnet:
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all portal {trusted_subnet} scram-sha-256\n")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "portal", "portal")
        if password:
            self._run(
                "psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "portal", "-d", "portal",
                "-c", f"ALTER USER portal PASSWORD '{password}'",
            )  # fmt: skip

    @property
    def url(self) -> str:
        return self.url_at("127.0.0.1")

    def url_at(self, host: str) -> str:
        """The URL a client at ``host``'s side uses (with the password beyond loopback)."""
        secret = (
            f":{quote(self.password, safe='')}" if self.password and host != "127.0.0.1" else ""
        )
        return f"postgres://portal{secret}@{host}:{self.port}/portal"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(_as_postgres([str(self.bin / tool), *args]), check=True, capture_output=True)

    def start(self) -> None:
        options = (
            f"-p {self.port} -k /tmp -c listen_addresses={','.join(self.listen)} "
            "-c max_connections=100 -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.logs / "server.log"), "-w", "-t", "60",
            "start", "-o", options,
        )  # fmt: skip

    def stop(self) -> None:
        """A fast shutdown: open transactions are rolled back, connections cut."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


class PrivateRedis:
    """A Redis of the test's own, without persistence (as ``scripts/services.sh`` runs it): a
    restart loses every message queued in it."""

    def __init__(self, root: Path, *, listen: tuple[str, ...] = (), password: str = ""):
        if listen and not password:
            raise ValueError("listening beyond loopback needs a password")
        self.root, self.port, self.process = root, free_port(), None
        self.listen, self.password = ("127.0.0.1", *listen), password
        self.start()

    @property
    def url(self) -> str:
        return self.url_at("127.0.0.1")

    def url_at(self, host: str, database: int = 0) -> str:
        secret = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{secret}{host}:{self.port}/{database}"

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", *self.listen]
        argv += ["--save", "", "--appendonly", "no", "--dir", str(self.root)]
        if self.password:
            argv += ["--requirepass", self.password]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._answers, timeout=20, what="the private Redis to answer")

    def _answers(self) -> bool:
        argv = ["redis-cli", "-p", str(self.port), "--no-auth-warning"]
        if self.password:
            argv += ["-a", self.password]
        ping = subprocess.run([*argv, "ping"], capture_output=True)
        return ping.stdout.strip() == b"PONG"

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)
