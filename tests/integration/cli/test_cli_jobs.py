"""``gpuportal jobs`` against real jobs on the devcluster, run by the real worker and watcher:
submit from a YAML file, list, stop, and follow a log as the container writes it, until the job
ends. The follow runs against the portal as the Dockerfile serves it (gunicorn's asgi worker,
which streams the log as it comes; the live server's WSGI thread would hand it over only at its
end), with the client as its own process (``python -m gpuportal``)."""

import os
import queue
import subprocess
import sys
import threading
import time

import pytest
import yaml
from django.conf import settings

from accounts import services as account_services
from gpujobs.models import GpuJob
from gpuportal import config, exits
from tests.integration.cli.conftest import Cli
from tests.integration.conftest import REDIS_TEST_DB, REPO_ROOT, stop_process, wait_for
from tests.integration.gpujobs.fixtures import (
    api_client_for,
    job_pods,
    wait_for_state,
)
from tests.integration.servers import portal_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

# The client reads the job's state every 2 s while no line comes, then waits 2 s more for lines
# on their way; the bound leaves room for a busy machine.
ENDS_WITHIN = 15


@pytest.fixture(autouse=True)
def _services(running_services):
    """Every test here needs the worker and the watcher."""


def job_file(tmp_path, gpu, cluster, **fields):
    spec = {
        "team": gpu.team.slug,
        "cluster": cluster.name,
        "name": "cli-train",
        "image": "registry.example.com/ml/trainer:1.0",
        "command": ["python", "train.py"],
        "env": {"EPOCHS": 3},
        "gpus": 1,
        **fields,
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_submit_from_yaml_then_list_and_stop(cli, make_gpu_team, gpu_cluster, core, tmp_path):
    gpu = make_gpu_team(gpus=1)
    cli.login(gpu.member)

    submitted = cli("jobs", "submit", "-f", job_file(tmp_path, gpu, gpu_cluster), "-o", "json")
    assert submitted.code == exits.OK, submitted.err
    job_id = submitted.json()["id"]
    job = wait_for_state(job_id, "running")
    listed = cli("jobs", "list", "--team", gpu.team.slug, "-o", "json")
    table = cli("jobs", "list", "--state", "running", "--team", gpu.team.slug)
    stopped = cli("jobs", "stop", job_id)
    again = cli("jobs", "stop", job_id)

    assert (job.name, job.command, job.env) == (
        "cli-train",
        ["python", "train.py"],
        [{"name": "EPOCHS", "value": "3"}],
    )
    assert [(j["id"], j["state"]) for j in listed.json()] == [(job_id, "running")]
    row = table.out.splitlines()[1].split()
    assert row[:6] == [str(job_id), "cli-train", gpu.team.slug, "devcluster", "running", "1"]
    assert stopped.code == exits.OK, stopped.err
    assert "cancelled" in stopped.out
    assert GpuJob.objects.get(pk=job_id).state == "cancelled"
    wait_for(lambda: not job_pods(core, job), timeout=60, what="the job's pods to go")
    assert again.code == exits.CONFLICT
    assert "already cancelled" in again.err


def test_submit_beyond_the_teams_quota_exits_1_naming_gpus(
    cli, make_gpu_team, gpu_cluster, tmp_path
):
    gpu = make_gpu_team(gpus=1)
    cli.login(gpu.member)

    result = cli("jobs", "submit", "-f", job_file(tmp_path, gpu, gpu_cluster, gpus=2))

    assert result.code == exits.BAD_INPUT
    assert result.err.startswith("gpuportal: gpus: ")
    assert not GpuJob.objects.filter(team=gpu.team).exists()


def test_submit_a_list_of_jobs_in_one_call_all_or_none(cli, make_gpu_team, gpu_cluster, tmp_path):
    gpu = make_gpu_team(gpus=2)
    cli.login(gpu.member)
    sweep = {
        "team": gpu.team.slug,
        "cluster": gpu_cluster.name,
        "jobs": [
            {
                "name": f"sweep-{i}",
                "image": "registry.example.com/ml/trainer:1.0",
                "env": {"SEED": i},
                "gpus": 1,
            }
            for i in range(2)
        ],
    }
    good, bad = tmp_path / "sweep.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(sweep))
    sweep["jobs"][1]["gpus"] = 0
    bad.write_text(yaml.safe_dump(sweep))

    refused = cli("jobs", "submit", "-f", bad)
    submitted = cli("jobs", "submit", "-f", good, "-o", "json")

    assert refused.code == exits.BAD_INPUT
    assert refused.err.startswith("gpuportal: jobs: [1] gpus: ")
    assert submitted.code == exits.OK, submitted.err
    made = submitted.json()
    assert [j["name"] for j in made] == ["sweep-0", "sweep-1"]
    stored = GpuJob.objects.filter(team=gpu.team).order_by("pk")
    assert [job.env for job in stored] == [
        [{"name": "SEED", "value": "0"}],
        [{"name": "SEED", "value": "1"}],
    ]


@pytest.fixture(scope="module")
def portal(postgres_database, tmp_path_factory):
    """The portal under gunicorn's asgi worker, on plain http (the client talks to it directly,
    with no TLS proxy in front)."""
    broker = settings.CELERY_BROKER_URL
    with portal_server(
        postgres_database,
        tmp_path_factory.mktemp("cli-portal"),
        DJANGO_SECURE_SSL_REDIRECT="0",
        PORTAL_REDIS_URL=broker.rsplit("/", 1)[0] + f"/{REDIS_TEST_DB}",
    ) as base:
        yield base


class Lines:
    """A process's output lines, read by a thread of their own."""

    def __init__(self, stream):
        self.queue: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            self.queue.put(line.rstrip("\n"))

    def next(self, timeout: float = 30) -> str:
        return self.queue.get(timeout=timeout)


def test_logs_follow_prints_lines_as_written_until_the_job_ends(
    portal, make_gpu_team, gpu_cluster, devcluster, tmp_path, config_home, redis_url, monkeypatch
):
    gpu = make_gpu_team(gpus=1)
    # A token from the API tokens page, in the environment as a CI job would keep it (the server
    # cannot check the suite's fast password hashes, so no login here).
    _, secret = account_services.api_token_create(user=gpu.member)
    monkeypatch.setenv(config.URL_VARIABLE, portal)
    monkeypatch.setenv(config.TOKEN_VARIABLE, secret)
    cli = Cli(portal)
    path = job_file(tmp_path, gpu, gpu_cluster)
    job_id = cli("jobs", "submit", "-f", path, "-o", "json").json()["id"]
    job = wait_for_state(job_id, "running")
    (pod,) = job.pods
    devcluster.write_pod_log(gpu.team.slug, pod, [f"step {i}" for i in range(1, 6)])
    last_lines = cli("jobs", "logs", job_id, "--tail", "2")

    follower = subprocess.Popen(
        [sys.executable, "-m", "gpuportal", "jobs", "logs", "-f", str(job_id), "--tail", "2"],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "cli")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = Lines(follower.stdout)
        tail = [out.next(), out.next()]
        devcluster.write_pod_log(gpu.team.slug, pod, ["written while followed"])
        written = out.next()
        still_following = follower.poll() is None
        # The job ends (stopped by a lead): the client notices and ends too.
        api_client_for(gpu.lead).post(f"/api/v1/jobs/{job_id}/cancel/")
        cancelled_at = time.monotonic()
        code = follower.wait(timeout=60)
        took = time.monotonic() - cancelled_at
    finally:
        if follower.poll() is None:
            stop_process(follower)

    assert (last_lines.code, last_lines.out) == (exits.OK, "step 4\nstep 5\n")
    assert tail == ["step 4", "step 5"]
    assert written == "written while followed"
    assert still_following
    errors = follower.stderr.read()
    assert code == exits.OK, errors
    assert took < ENDS_WITHIN, f"the client took {took:.1f} s to notice the job had ended"
    assert f"job {job_id} cancelled" in errors
