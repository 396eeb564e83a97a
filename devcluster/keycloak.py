"""Keycloak, the OpenID provider the single sign-on tests sign in through: its server
distribution (``org.keycloak:keycloak-quarkus-dist``) from Maven Central, run on the machine's JDK.

``build`` (``python -m devcluster keycloak-build``, run by scripts/test.sh before pytest) fetches
the pinned zip once into ``~/.cache/gpuportal-keycloak/<version>/``, checks its SHA-256, unpacks
it and runs Keycloak's own build step (an in-memory database, health checks on), so that a test
session starts it with ``start --optimized`` in tens of seconds instead of re-building at each
start. Nothing is downloaded at test time: ``start`` refuses when the cache is empty.

``start`` runs one Keycloak on free ports with a temporary admin and waits for its readiness
check; ``Keycloak`` then talks to its admin REST API (import a realm, add or remove a user's
group). Its data lives in memory and goes with the process.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcluster.log import progress

KEYCLOAK_VERSION = "26.7.3"
# Of keycloak-quarkus-dist-26.7.3.zip (Maven Central's .sha1 for it: 1e21a7f5...9b67208).
ZIP_SHA256 = "27a6535553c3cdcd083872ba40629efafb3475e3b758e0c6f691395561dd0f1f"
ZIP_URL = (
    "https://repo1.maven.org/maven2/org/keycloak/keycloak-quarkus-dist/"
    f"{KEYCLOAK_VERSION}/keycloak-quarkus-dist-{KEYCLOAK_VERSION}.zip"
)
# Keycloak's build-time options: an in-memory H2 database (each start is a fresh provider) and
# the readiness endpoint on the management port.
BUILD_OPTIONS = ["--db=dev-mem", "--health-enabled=true"]
STAMP_NAME = ".gpuportal-keycloak-build-stamp"
# Keycloak 26 needs Java 21 or later; Debian's default here is 17.
DEFAULT_JAVA_HOME = "/usr/lib/jvm/temurin-25-jdk-amd64"
START_TIMEOUT_SECONDS = 300  # two busy cores: a cold start has taken 60 s


def cache_dir() -> Path:
    root = os.environ.get("GPUPORTAL_KEYCLOAK_CACHE") or Path.home() / ".cache/gpuportal-keycloak"
    return Path(root) / KEYCLOAK_VERSION


def home() -> Path:
    return cache_dir() / f"keycloak-{KEYCLOAK_VERSION}"


def java_home() -> str:
    return os.environ.get("KEYCLOAK_JAVA_HOME", DEFAULT_JAVA_HOME)


def _stamp() -> str:
    return f"keycloak={KEYCLOAK_VERSION} sha256={ZIP_SHA256} build={' '.join(BUILD_OPTIONS)}"


def is_built() -> bool:
    stamp = home() / STAMP_NAME
    return stamp.exists() and stamp.read_text().strip() == _stamp()


def _java_env() -> dict[str, str]:
    java = java_home()
    if not Path(java, "bin", "java").exists():
        raise RuntimeError(
            f"Keycloak {KEYCLOAK_VERSION} needs Java 21+: no JDK at {java} (set KEYCLOAK_JAVA_HOME)"
        )
    return {
        **os.environ,
        "JAVA_HOME": java,
        "PATH": f"{java}/bin:{os.environ.get('PATH', '')}",
        # Keycloak sizes its heap from the machine's memory otherwise (gigabytes).
        "JAVA_OPTS_KC_HEAP": "-Xms64m -Xmx768m",
    }


def _download(target: Path) -> None:
    progress(f"keycloak: downloading {ZIP_URL}")
    partial = target.with_suffix(".part")
    digest = hashlib.sha256()
    with urllib.request.urlopen(ZIP_URL, timeout=60) as answer, open(partial, "wb") as out:
        while chunk := answer.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != ZIP_SHA256:
        partial.unlink()
        raise RuntimeError(
            f"keycloak: {ZIP_URL} has SHA-256 {digest.hexdigest()}, expected {ZIP_SHA256}"
        )
    partial.rename(target)


def build(*, force: bool = False) -> str:
    """Fetch, unpack and build Keycloak into the cache unless it is there; a line saying so."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time, whoever runs it
        if is_built() and not force:
            return f"keycloak: {KEYCLOAK_VERSION} already built in {home()}"
        archive = cache / f"keycloak-quarkus-dist-{KEYCLOAK_VERSION}.zip"
        if not archive.exists():
            _download(archive)
        shutil.rmtree(home(), ignore_errors=True)
        unpacking = Path(tempfile.mkdtemp(dir=cache, prefix="unpack-"))
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(unpacking)
        (unpacking / home().name).rename(home())
        unpacking.rmdir()
        for script in (home() / "bin").glob("*.sh"):
            script.chmod(0o755)  # zipfile keeps no file modes
        progress(f"keycloak: building ({' '.join(BUILD_OPTIONS)}); a minute or two")
        started = time.monotonic()
        subprocess.run(
            [str(home() / "bin/kc.sh"), "build", *BUILD_OPTIONS],
            env=_java_env(),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (home() / STAMP_NAME).write_text(_stamp() + "\n")
        return f"keycloak: {KEYCLOAK_VERSION} built in {home()} ({time.monotonic() - started:.0f}s)"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Keycloak:
    """A running Keycloak: its URL, its temporary admin's credentials, and its process."""

    url: str
    management_url: str
    admin_username: str
    admin_password: str
    process: subprocess.Popen | None = None
    work_dir: Path | None = None
    _token: str | None = field(default=None, repr=False)
    _token_renew_at: float = field(default=0.0, repr=False)

    # --- the OpenID endpoints of a realm (what the portal's OIDC_OP_* settings name) ---

    def issuer(self, realm: str) -> str:
        return f"{self.url}/realms/{realm}"

    def endpoints(self, realm: str) -> dict[str, str]:
        base = f"{self.issuer(realm)}/protocol/openid-connect"
        return {
            "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{base}/auth",
            "OIDC_OP_TOKEN_ENDPOINT": f"{base}/token",
            "OIDC_OP_USER_ENDPOINT": f"{base}/userinfo",
            "OIDC_OP_JWKS_ENDPOINT": f"{base}/certs",
        }

    # --- the admin REST API ---

    def _request(self, method: str, path: str, body: Any = None, *, form: dict | None = None):
        headers = {}
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if path.startswith("/admin/"):
            headers["Authorization"] = f"Bearer {self.admin_token()}"
        request = urllib.request.Request(
            f"{self.url}{path}", data=data, headers=headers, method=method
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read().decode()
        return json.loads(text) if text else None

    def admin_token(self) -> str:
        """The temporary admin's access token, fetched again before it expires: the master
        realm's tokens live 60 s, and a session's tests use the admin API for many minutes."""
        if self._token is None or time.monotonic() >= self._token_renew_at:
            answer = self._request(
                "POST",
                "/realms/master/protocol/openid-connect/token",
                form={
                    "grant_type": "password",
                    "client_id": "admin-cli",
                    "username": self.admin_username,
                    "password": self.admin_password,
                },
            )
            self._token = answer["access_token"]
            lifetime = float(answer.get("expires_in", 60))
            self._token_renew_at = time.monotonic() + max(lifetime - 15, lifetime / 2)
        return self._token

    def import_realm(self, realm: dict) -> None:
        self._request("POST", "/admin/realms", realm)

    def user_id(self, realm: str, username: str) -> str:
        query = urllib.parse.urlencode({"username": username, "exact": "true"})
        (user,) = self._request("GET", f"/admin/realms/{realm}/users?{query}")
        return user["id"]

    def group_id(self, realm: str, name: str) -> str:
        query = urllib.parse.urlencode({"search": name, "exact": "true"})
        (group,) = self._request("GET", f"/admin/realms/{realm}/groups?{query}")
        return group["id"]

    def add_user(self, realm: str, username: str, password: str, groups: list[str]) -> str:
        self._request(
            "POST",
            f"/admin/realms/{realm}/users",
            {
                "username": username,
                "enabled": True,
                "email": f"{username}@example.org",
                "emailVerified": True,
                "firstName": username.capitalize(),
                "lastName": "Example",
                "credentials": [{"type": "password", "value": password, "temporary": False}],
                "groups": [f"/{group}" for group in groups],
            },
        )
        return self.user_id(realm, username)

    def set_user_group(self, realm: str, username: str, group: str, *, member: bool) -> None:
        user, group_id = self.user_id(realm, username), self.group_id(realm, group)
        method = "PUT" if member else "DELETE"
        self._request(method, f"/admin/realms/{realm}/users/{user}/groups/{group_id}")

    def user_groups(self, realm: str, username: str) -> list[str]:
        user = self.user_id(realm, username)
        return sorted(
            g["name"] for g in self._request("GET", f"/admin/realms/{realm}/users/{user}/groups")
        )

    def is_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.management_url}/health/ready", timeout=2) as r:
                return r.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)


def start(*, timeout: float = START_TIMEOUT_SECONDS) -> Keycloak:
    """A Keycloak of this caller's own, on free ports, ready; ``stop()`` it when done."""
    if not is_built():
        raise RuntimeError(
            f"Keycloak {KEYCLOAK_VERSION} is not built in {home()}: run "
            "`python -m devcluster keycloak-build` (scripts/test.sh does)"
        )
    port, management_port = free_port(), free_port()
    work_dir = Path(tempfile.mkdtemp(prefix="gpuportal-keycloak-"))
    password = hashlib.sha256(os.urandom(16)).hexdigest()[:24]
    env = {
        **_java_env(),
        "KC_BOOTSTRAP_ADMIN_USERNAME": "admin",
        "KC_BOOTSTRAP_ADMIN_PASSWORD": password,
        # Its transaction log in this run's own directory, not the shared cache.
        "JAVA_OPTS_APPEND": (
            f"-Dquarkus.transaction-manager.object-store.directory={work_dir / 'tx'} "
            f"-Djava.io.tmpdir={work_dir}"
        ),
    }
    command = [
        str(home() / "bin/kc.sh"),
        "start",
        "--optimized",
        "--http-enabled=true",
        "--http-host=127.0.0.1",
        f"--http-port={port}",
        f"--http-management-port={management_port}",
        "--hostname-strict=false",
        "--cache=local",
    ]
    log = open(work_dir / "keycloak.log", "wb")  # noqa: SIM115 (the process writes it)
    process = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    keycloak = Keycloak(
        url=f"http://127.0.0.1:{port}",
        management_url=f"http://127.0.0.1:{management_port}",
        admin_username="admin",
        admin_password=password,
        process=process,
        work_dir=work_dir,
    )
    progress(f"keycloak: starting on port {port} (log {work_dir / 'keycloak.log'})")
    started = time.monotonic()
    while not keycloak.is_ready():
        if process.poll() is not None or time.monotonic() - started > timeout:
            tail = (work_dir / "keycloak.log").read_text(errors="replace").splitlines()[-30:]
            keycloak.stop()
            raise RuntimeError(
                f"Keycloak did not become ready (exit {process.poll()}):\n" + "\n".join(tail)
            )
        time.sleep(0.5)
    progress(f"keycloak: ready after {time.monotonic() - started:.0f}s")
    return keycloak
