"""``make demo`` on a machine whose cluster is not built: the portal is served at once, with a
notice on every page of how far the cluster is, while the cluster is built in the background.

scripts/demo.sh runs here as a newcomer runs it, but with nothing of its own shared: a cache
of the devcluster's binaries that is empty (so the demo takes the path of a first build), a
state directory, ports, an SQLite file and Celery queues of the test's. The background cluster
step is held before it builds anything (``DEMO_CLUSTER_WAITS_FOR``, a file the test never
makes), so the portal must answer, signed in and with the notice, before the cluster step has
done anything; the seeded jobs must wait queued for the cluster (the worker tried them and
tries again), not fail; and Ctrl-C (SIGTERM to the demo's process group) must stop everything,
the held cluster step too, and take the notice away.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import uuid
from html import unescape
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from django.conf import settings

from portal.celery import app as celery_app
from tenants.management.commands.seed_demo import DEMO_PASSWORD
from tests.integration.conftest import REPO_ROOT, free_port, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.worker]

BUILDING = "The local GPU cluster is being built: "
WAITING = "Until it is up, reconciles, jobs and charts wait; they catch up on their own."
DEMO_JOBS = {"resnet50-baseline", "augment-sweep", "asr-finetune-de", "detector-train"}
WAITING_JOBS = DEMO_JOBS | {"while-it-builds"}


def _notice(html: str) -> str | None:
    found = re.search(r'<p [^>]*data-testid="portal-notice"[^>]*>(.*?)</p>', html, re.S)
    return unescape(found.group(1)) if found else None


def _processes_with(marker: str) -> list[int]:
    """The processes whose environment holds ``marker`` (the demo's and everything it started,
    whatever their process group)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.fixture
def demo_without_a_cluster(tmp_path):
    """scripts/demo.sh, started with its cluster step held; yields its URL, state directory,
    database and output; stopped as Ctrl-C stops it."""
    broker = urlsplit(settings.CELERY_BROKER_URL)
    queue = f"demo-early-{uuid.uuid4().hex[:8]}"
    state = tmp_path / "state"
    port = free_port()
    env = {
        **os.environ,
        "DEMO_STATE": str(state),
        "DEMO_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "PORTAL_PORT": str(port),
        "DEMO_CLUSTER_WAITS_FOR": str(tmp_path / "never"),
        # Nothing built here: the demo takes the path of a first build.
        "DEVCLUSTER_CACHE": str(tmp_path / "devcluster-cache"),
        "DEVCLUSTER_STATE": str(tmp_path / "devcluster"),
        "DEVCLUSTER_APISERVER_PORT": str(free_port()),
        "DEVCLUSTER_PROMETHEUS_PORT": str(free_port()),
        # The suite's Redis, with queues no other worker reads.
        "PORTAL_REDIS_PORT": str(broker.port),
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "WEBHOOKS_QUEUE": f"{queue}-webhooks",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DEVCLUSTER_INSTANCE", None)
    env.pop("PORTAL_NOTICE_FILE", None)
    output = tmp_path / "demo.out"
    with open(output, "w") as out:
        demo = subprocess.Popen(
            ["scripts/demo.sh"],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield {
            "url": f"http://127.0.0.1:{port}",
            "state": state,
            "database": tmp_path / "demo.sqlite3",
            "output": output,
            "process": demo,
            "marker": f"DEMO_STATE={state}",
        }
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGTERM)
            try:
                demo.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(demo.pid, signal.SIGKILL)
                demo.wait()
        for pid in _processes_with(f"DEMO_STATE={state}"):
            os.kill(pid, signal.SIGKILL)
        with celery_app.connection_for_write() as conn:
            conn.default_channel.client.delete(queue, f"{queue}-webhooks")


def _sign_in(http: httpx.Client, username: str) -> None:
    form = http.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    answer = http.post(
        "/login/",
        data={"csrfmiddlewaretoken": token, "username": username, "password": DEMO_PASSWORD},
        headers={"Referer": f"{http.base_url}login/"},
    )
    assert answer.status_code == 302, answer.text[:500]


def _jobs(database: Path) -> dict[str, tuple[str, str]]:
    with sqlite3.connect(database, timeout=30) as db:
        rows = db.execute("SELECT name, state, message FROM gpujobs_gpujob").fetchall()
    return {name: (state, message) for name, state, message in rows}


def test_the_portal_answers_with_the_build_notice_before_the_cluster_step_has_run(
    demo_without_a_cluster,
):
    demo = demo_without_a_cluster
    state, output = demo["state"], demo["output"]

    def serving():
        if demo["process"].poll() is not None:
            pytest.fail(f"the demo exited:\n{output.read_text()[-4000:]}")
        try:
            return httpx.get(f"{demo['url']}/login/", timeout=5)
        except httpx.TransportError:
            return None

    # Within two minutes on the slowest machine; in about twenty seconds on two cores.
    login = wait_for(serving, timeout=120, interval=0.5, what="the demo's portal to answer")
    assert login.status_code == 200
    notice = _notice(login.text)
    assert notice is not None, "no notice on the sign-in page"
    assert notice.startswith(BUILDING), notice
    assert notice.endswith(WAITING), notice
    # The cluster step has not run: held before `up`, which would have written these.
    assert not (state / "cluster.env").exists()
    assert not (state / "cluster.log").exists()
    assert (state / "notice.txt").exists()

    with httpx.Client(base_url=demo["url"], timeout=30) as http:
        _sign_in(http, "lena")
        for path in ("/", "/jobs/", "/monitoring/teams/vision/"):
            page = http.get(path)
            assert page.status_code == 200, (path, page.text[:500])
            assert (_notice(page.text) or "").startswith(BUILDING), path
        jobs_page = http.get("/jobs/?team=vision").text
        for name in ("resnet50-baseline", "augment-sweep", "detector-train"):
            assert name in jobs_page
        # A job submitted meanwhile is taken, and waits with the seeded ones.
        token = http.post(
            "/api/v1/auth/token/", data={"username": "lena", "password": DEMO_PASSWORD}
        ).json()["token"]
        submitted = http.post(
            "/api/v1/jobs/",
            json={
                "team": "vision",
                "cluster": "devcluster",
                "name": "while-it-builds",
                "image": "registry.example.com/vision/trainer:1.4",
                "gpus": 1,
            },
            headers={"Authorization": f"Token {token}"},
        )
        assert submitted.status_code == 201, submitted.text

    # The jobs wait for the cluster: the worker tried each, and tries again.
    def tried_and_waiting():
        jobs = _jobs(demo["database"])
        assert set(jobs) == WAITING_JOBS
        assert {state for state, _ in jobs.values()} <= {"queued"}, jobs
        return all(message.startswith("Not on the cluster yet") for _, message in jobs.values())

    wait_for(tried_and_waiting, timeout=60, interval=0.5, what="the worker to try the jobs")
    assert {state for state, _ in _jobs(demo["database"]).values()} == {"queued"}

    # Ctrl-C stops everything it started, the held cluster step too, and the notice goes.
    os.killpg(demo["process"].pid, signal.SIGTERM)
    demo["process"].wait(timeout=60)
    wait_for(
        lambda: not _processes_with(demo["marker"]),
        timeout=30,
        what="every process of the demo to stop",
    )
    assert not (state / "notice.txt").exists()
