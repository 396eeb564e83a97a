"""The portal's image, built here without a Docker daemon (``python -m devcluster image``), runs
each of the chart's commands as a container the way the chart's pods run them: the command, the
settings (its ConfigMap and Secret as rendered by ``helm template``), the user, a read-only root
filesystem with the chart's emptyDir mounts, no capabilities, no privilege escalation.

PostgreSQL and Redis are the suite's own, on the host (the containers share the host's network,
as the services a platform team points the chart at would be reachable from its pods); the
containers get a database and Redis databases of their own. What the chart adds on a cluster
(probes by the kubelet, the Service, the in-cluster identity) is test_chart_on_the_cluster.py's
and the real node's."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import socket
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

from devcluster import images
from tests.integration.deploy.conftest import by_kind_and_name

pytestmark = [pytest.mark.integration]

RELEASE = "portal-gpu-portal"
ADMIN_PASSWORD = "image-test-" + secrets.token_hex(8)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def database_url():
    """A database of the containers' own on the suite's PostgreSQL, dropped afterwards."""
    server = os.environ["DATABASE_URL"]
    name = f"image_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield server.rsplit("/", 1)[0] + f"/{name}?connect_timeout=3"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def chart(helm, database_url):
    """The chart as `helm template` renders it for these containers."""
    redis = os.environ["CELERY_BROKER_URL"].rsplit("/", 1)[0]
    return by_kind_and_name(
        helm.objects(
            values={
                "secrets.databaseUrl": database_url,
                # Redis databases no other test uses: the containers' workers take only their
                # own tasks.
                "secrets.brokerUrl": f"{redis}/11",
                "secrets.cacheUrl": f"{redis}/12",
                "config.allowedHosts[0]": "127.0.0.1",
                "config.sslRedirect": "false",
                "config.env.PORTAL_RECONCILE_SWEEP_SECONDS": 5,
                "web.port": free_port(),
                "web.workers": 1,
            }
        )
    )


@pytest.fixture(scope="module")
def settings_env(chart, tmp_path_factory) -> Path:
    """The ConfigMap's and the Secret's keys, as the pods' envFrom gives them, in an env file."""
    config = chart[("ConfigMap", RELEASE)]["data"]
    secret = chart[("Secret", RELEASE)]
    values = {
        **config,
        **secret.get("stringData", {}),
        **{k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()},
        "DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD,
    }
    path = tmp_path_factory.mktemp("image") / "settings.env"
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return path


def pod_of(chart, kind: str, name: str) -> dict:
    return chart[(kind, f"{RELEASE}-{name}")]["spec"]["template"]["spec"]


def podman_arguments(pod: dict, container: dict) -> list[str]:
    """`podman run` options for what the pod spec asks of its container's sandbox."""
    context = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    arguments = ["--network", "host", "--read-only-tmpfs=false"]
    if "runAsUser" in context:
        arguments += ["--user", f"{context['runAsUser']}:{context.get('runAsGroup', 0)}"]
    if context.get("readOnlyRootFilesystem"):
        arguments.append("--read-only")
    for dropped in context.get("capabilities", {}).get("drop", []):
        arguments += ["--cap-drop", dropped]
    if context.get("allowPrivilegeEscalation") is False:
        arguments += ["--security-opt", "no-new-privileges"]
    empty_dirs = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
    for mount in container.get("volumeMounts", []):
        if mount["name"] in empty_dirs:
            arguments += ["--tmpfs", mount["mountPath"]]
    return arguments


class Containers:
    """The containers a test starts, removed at the end."""

    def __init__(self, image: str, settings: Path) -> None:
        self.image = image
        self.settings = settings
        self.names: list[str] = []

    def command(self, pod: dict, container: dict, *, name: str, detach: bool) -> list[str]:
        return [
            "podman",
            "run",
            *(["--detach"] if detach else ["--rm"]),
            "--name",
            name,
            "--hostname",
            name,
            "--env-file",
            str(self.settings),
            *podman_arguments(pod, container),
            self.image,
            *container["command"],
        ]

    def run(self, pod: dict, container: dict, *, timeout: float = 300) -> str:
        """Run the container to its end; its output. Fails the test when it fails."""
        name = f"gpuportal-test-{uuid.uuid4().hex[:8]}"
        result = subprocess.run(
            self.command(pod, container, name=name, detach=False),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=images.container_env(),
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result.stdout + result.stderr

    def start(self, pod: dict, container: dict) -> str:
        name = f"gpuportal-test-{container['name']}-{uuid.uuid4().hex[:6]}"
        images.run(*self.command(pod, container, name=name, detach=True))
        self.names.append(name)
        return name

    def logs(self, name: str) -> str:
        result = images.run("podman", "logs", name)
        return result.stdout + result.stderr

    def running(self, name: str) -> bool:
        state = json.loads(images.run("podman", "inspect", name).stdout)[0]["State"]
        return state["Running"]

    def remove_all(self) -> None:
        for name in self.names:
            subprocess.run(
                ["podman", "rm", "--force", "--time", "5", name],
                capture_output=True,
                env=images.container_env(),
            )


@pytest.fixture(scope="module")
def containers(portal_image, settings_env, chart):
    running = Containers(portal_image, settings_env)
    # The migration hook first, as Helm runs it before the other objects.
    job = chart[("Job", f"{RELEASE}-migrate")]["spec"]["template"]["spec"]
    running.run(job, job["containers"][0])
    yield running
    running.remove_all()


def wait_until(check, *, timeout: float, what: str, logs=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            found = check()
            if found:
                return found
        time.sleep(1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}\n{logs()[-4000:]}")


def component(chart, name: str) -> tuple[dict, dict]:
    pod = pod_of(chart, "Deployment", name)
    return pod, pod["containers"][0]


def test_the_migration_job_migrates_a_fresh_database(containers, database_url):
    with psycopg.connect(database_url) as connection:
        apps = {app for (app,) in connection.execute("SELECT DISTINCT app FROM django_migrations")}

    assert {"tenants", "gpujobs", "serving", "billing", "webhooks", "django_celery_beat"} <= apps


def test_the_web_container_is_ready_and_serves_pages_and_the_api(containers, chart):
    pod, web = component(chart, "web")
    name = containers.start(pod, web)
    port = web["ports"][0]["containerPort"]
    base = f"http://127.0.0.1:{port}"
    probe = web["readinessProbe"]["httpGet"]["path"]

    wait_until(
        lambda: httpx.get(base + probe, timeout=5).status_code == 200,
        timeout=120,
        what=f"{probe} of the web container",
        logs=lambda: containers.logs(name),
    )
    login = httpx.get(f"{base}/login/", timeout=10)
    assert login.status_code == 200
    assert "Sign in" in login.text
    # Static files from the image's collectstatic, served by WhiteNoise.
    stylesheet = httpx.get(f"{base}/static/css/portal.css", timeout=10)
    assert stylesheet.status_code == 200, stylesheet.status_code

    containers.run(
        pod,
        {
            **web,
            "command": [
                "python",
                "manage.py",
                "createsuperuser",
                "--noinput",
                "--username",
                "ada",
                "--email",
                "ada@example.org",
            ],
        },
    )
    token = httpx.post(
        f"{base}/api/v1/auth/token/",
        json={"username": "ada", "password": ADMIN_PASSWORD},
        timeout=10,
    )
    assert token.status_code == 200, token.text
    teams = httpx.get(
        f"{base}/api/v1/teams/",
        headers={"Authorization": f"Token {token.json()['token']}"},
        timeout=10,
    )
    assert teams.status_code == 200, teams.text
    assert teams.json()["results"] == []


def test_the_workers_answer_and_beat_has_them_run_the_sweep(containers, chart):
    started = {
        name: containers.start(*component(chart, name))
        for name in ("worker", "webhook-worker", "beat")
    }
    pod, worker = component(chart, "worker")

    def pongs() -> bool:
        ping = subprocess.run(
            containers.command(
                pod,
                {**worker, "command": ["celery", "-A", "portal", "inspect", "ping", "-t", "5"]},
                name=f"gpuportal-test-ping-{uuid.uuid4().hex[:6]}",
                detach=False,
            ),
            capture_output=True,
            text=True,
            env=images.container_env(),
            timeout=60,
        )
        return ping.stdout.count("pong") >= 2

    wait_until(
        pongs,
        timeout=120,
        what="both workers to answer a ping",
        logs=lambda: containers.logs(started["worker"]),
    )
    wait_until(
        lambda: (
            "reconcile.tasks.reconcile_sweep" in containers.logs(started["worker"])
            and "succeeded" in containers.logs(started["worker"])
        ),
        timeout=90,
        what="beat to send the sweep and the worker to run it",
        logs=lambda: containers.logs(started["beat"]) + containers.logs(started["worker"]),
    )
    assert containers.running(started["beat"])


def test_the_watcher_runs_and_stays_up(containers, chart):
    pod, watcher = component(chart, "watcher")
    name = containers.start(pod, watcher)

    time.sleep(10)

    logs = containers.logs(name)
    assert containers.running(name), logs
    assert "Traceback" not in logs, logs
