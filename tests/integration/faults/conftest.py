"""A portal of the fault tests' own, whose services they may break: a private PostgreSQL
(``initdb`` on a temporary directory, a free port, as ``scripts/services.sh`` starts one) and a
private Redis, with the portal's processes as production runs them: gunicorn, a Celery worker,
Celery beat and the job watcher. The tests drive it through its HTTP API with API tokens and
check the devcluster (shared: each test has teams of its own) with its admin client.

Restarting this PostgreSQL or Redis disturbs neither the test session's database nor another
session's. Beat runs the production schedule, squeezed to seconds (the reconcile sweep every 3,
the job resync every 2), and a claim on a job lapses after 5 seconds, so that what the portal
repairs on its own is repaired within a test.

Each fault test records a row (fault, what was in flight, what was checked, result) in
``FAULT_TABLE``; the session prints the table at its end and writes it to
``<pytest basetemp>/fault-table.md``, with rows for the fault tests kept elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from clusters.vocabulary import JOB_ID_LABEL
from tests.integration.conftest import REPO_ROOT, free_port, wait_for
from tests.integration.kube import delete_namespace, read_or_none
from tests.integration.portal_identity import mint_portal_identity
from tests.integration.private_services import PrivatePostgres, PrivateRedis

QUOTA_NAME = "gpu-portal-quota"
COMPLETE_AFTER = "devcluster.gpuportal.io/complete-after-seconds"
PASSWORD = "faults-portal-password"
PORTAL_USER = "gpu-portal-faults"

# --- the fault table --------------------------------------------------------------------------


@dataclass
class FaultRow:
    fault: str
    in_flight: str
    checked: str
    test: str
    result: str = "failed"


FAULT_TABLE: list[FaultRow] = []

# Faults proven by tests kept with the code they concern: their rows take the session's result.
ELSEWHERE = [
    FaultRow(
        "Worker SIGKILLed mid-reconcile",
        "a reconcile stopped inside its first server-side apply",
        "the task is delivered again to the next worker; the quota reaches the cluster once, "
        "one recorded run, no error",
        "tests/integration/reconcile/test_failures.py::"
        "test_a_worker_killed_mid_reconcile_leaves_the_task_to_the_next_worker",
    ),
    FaultRow(
        "Kubernetes API server stopped during an approval",
        "the approval's reconcile",
        "the outage shows on the team's status; the quota is applied once it is back",
        "tests/integration/reconcile/test_failures.py::"
        "test_an_approval_while_the_apiserver_is_down_is_applied_once_it_is_back",
    ),
    FaultRow(
        "Submit task delivered twice / message lost",
        "a job's submit task",
        "one Job on the cluster; a queued job whose message was lost is created by the resync",
        "tests/integration/gpujobs/test_submission.py::"
        "test_submit_task_delivered_twice_creates_one_job (and "
        "test_queued_job_whose_message_was_lost_is_created_by_the_periodic_resync)",
    ),
]


@pytest.fixture
def fault_row(request):
    """``fault_row(fault, in_flight, checked)``: this test's row; its result is the test's."""
    rows = []

    def record(fault: str, in_flight: str, checked: str) -> FaultRow:
        row = FaultRow(fault, in_flight, checked, request.node.nodeid)
        rows.append(row)
        FAULT_TABLE.append(row)
        return row

    yield record
    outcome = getattr(request.node, "fault_outcome", None)
    seconds = getattr(request.node, "fault_seconds", 0.0)
    for row in rows:
        row.result = f"{'passed' if outcome == 'passed' else 'failed'} ({seconds:.0f} s)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.when == "call":
        item.fault_outcome, item.fault_seconds = report.outcome, report.duration


def pytest_terminal_summary(terminalreporter, config):
    if not FAULT_TABLE:
        return
    outcomes = {}
    for kind in ("passed", "failed", "error"):
        for report in terminalreporter.stats.get(kind, []):
            if getattr(report, "when", "call") == "call":
                outcomes[report.nodeid] = f"{kind} ({report.duration:.0f} s)"
    rows = list(FAULT_TABLE)
    for row in ELSEWHERE:
        first = row.test.split(" ")[0]
        result = outcomes.get(first, "not run in this session")
        rows.append(FaultRow(row.fault, row.in_flight, row.checked, row.test, result))
    lines = [
        "| Fault | In flight | Checked afterwards | Result | Test |",
        "|---|---|---|---|---|",
        *(f"| {r.fault} | {r.in_flight} | {r.checked} | {r.result} | `{r.test}` |" for r in rows),
    ]
    text = "\n".join(lines) + "\n"
    path = Path(config._tmp_path_factory.getbasetemp()) / "fault-table.md"
    path.write_text(text)
    terminalreporter.section("fault table")
    terminalreporter.write(text)
    terminalreporter.write_line(f"(written to {path})")


# --- the portal's processes -------------------------------------------------------------------


class PortalProcess:
    """One of the portal's processes, its output in a log file; started again with ``start``."""

    def __init__(self, name: str, argv: list[str], env: dict, log_dir: Path, ready: str):
        self.name, self.argv, self.env, self.ready = name, argv, env, ready
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self, *, argv: list[str] | None = None, wait: bool = True) -> None:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(
                argv or self.argv,
                cwd=REPO_ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if wait:
            wait_for(lambda: self._started(offset), timeout=90, what=f"{self.name} to start")

    def _started(self, offset: int) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"{self.name} exited:\n{self.log()[-3000:]}")
        return self.ready in self.log()[offset:]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown, no acknowledgement, nothing cleaned up."""
        if self.alive:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)

    def stop(self) -> None:
        if self.alive:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


SETUP = """
import json
from django.contrib.auth.models import User
from clusters.models import Cluster, GpuCapacity
from tests.tokens import api_token

users = {
    "admin": User.objects.create_superuser("faults-admin", "admin@example.com", PASSWORD),
    "lead": User.objects.create_user("faults-lead", "lead@example.com", PASSWORD),
    "member": User.objects.create_user("faults-member", "member@example.com", PASSWORD),
}
cluster = Cluster.objects.create(
    name="devcluster", kubeconfig_path=KUBECONFIG, allowed_registries=["registry.example.com/"]
)
GpuCapacity.objects.create(
    cluster=cluster, resource_name="nvidia.com/gpu", gpu_model="NVIDIA-A100-SXM4-80GB",
    allocatable=32,
)
print(json.dumps({name: api_token(user) for name, user in users.items()}))
"""


@dataclass
class Portal:
    """The private portal: its services, processes, base URL and users' tokens."""

    postgres: PrivatePostgres
    redis: PrivateRedis
    processes: dict[str, PortalProcess]
    url: str
    tokens: dict[str, str]
    core: client.CoreV1Api
    batch: client.BatchV1Api
    teams: list[str] = field(default_factory=list)

    def api(self, actor: str) -> httpx.Client:
        headers = {"Authorization": f"Token {self.tokens[actor]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def call(self, actor: str, method: str, path: str, **kwargs) -> httpx.Response:
        with self.api(actor) as http:
            return http.request(method, path, **kwargs)

    # --- the portal, through its API -------------------------------------------------------

    def make_team(self, name: str) -> str:
        slug = f"ft-{uuid.uuid4().hex[:6]}-{name}"
        self.teams.append(slug)
        answer = self.call("admin", "POST", "/api/v1/teams/", json={"slug": slug, "name": name})
        assert answer.status_code == 201, answer.text
        for username, role in (("faults-lead", "lead"), ("faults-member", "member")):
            answer = self.call(
                "admin",
                "POST",
                f"/api/v1/teams/{slug}/members/",
                json={"username": username, "role": role},
            )
            assert answer.status_code == 200, answer.text
        return slug

    def request_quota(self, slug: str, gpus: int) -> int:
        answer = self.call(
            "lead",
            "POST",
            "/api/v1/quota-requests/",
            json={"team": slug, "cluster": "devcluster", "gpus": gpus, "justification": "Faults."},
        )
        assert answer.status_code == 201, answer.text
        return answer.json()["id"]

    def approve(self, request_id: int) -> httpx.Response:
        return self.call("admin", "POST", f"/api/v1/quota-requests/{request_id}/approve/", json={})

    def grant(self, slug: str, gpus: int) -> dict:
        answer = self.approve(self.request_quota(slug, gpus))
        assert answer.status_code == 201, answer.text
        return answer.json()

    def submit(self, slug: str, name: str, *, run_seconds: float = 3) -> httpx.Response:
        return self.call(
            "member",
            "POST",
            "/api/v1/jobs/",
            json={
                "team": slug,
                "cluster": "devcluster",
                "name": name,
                "image": "registry.example.com/ml/trainer:1.0",
                "gpus": 1,
                "annotations": {COMPLETE_AFTER: str(run_seconds)},
            },
        )

    def jobs(self, slug: str) -> list[dict]:
        answer = self.call("admin", "GET", "/api/v1/jobs/", params={"team": slug, "page_size": 500})
        assert answer.status_code == 200, answer.text
        return answer.json()["results"]

    def active_grant_gpus(self, slug: str) -> int:
        answer = self.call(
            "admin", "GET", "/api/v1/quota-grants/", params={"team": slug, "state": "active"}
        )
        assert answer.status_code == 200, answer.text
        return sum(grant["gpus"] for grant in answer.json()["results"])

    def wait_running(self, slug: str) -> None:
        wait_for(
            lambda: all(job["state"] == "running" for job in self.jobs(slug)),
            timeout=120,
            what=f"the jobs of {slug} to run",
        )

    # --- the cluster, as its admin ---------------------------------------------------------

    def quota_on_cluster(self, slug: str) -> str | None:
        quota = read_or_none(self.core.read_namespaced_resource_quota, QUOTA_NAME, slug)
        return None if quota is None else (quota.spec.hard or {}).get("requests.nvidia.com/gpu")

    def kube_jobs(self, slug: str) -> Counter:
        """How many Jobs of each portal job id the namespace holds."""
        if read_or_none(self.core.read_namespace, slug) is None:
            return Counter()
        items = self.batch.list_namespaced_job(slug, label_selector=JOB_ID_LABEL).items
        return Counter(int(job.metadata.labels[JOB_ID_LABEL]) for job in items)

    def kube_job_uids(self, slug: str) -> dict[int, str]:
        items = self.batch.list_namespaced_job(slug, label_selector=JOB_ID_LABEL).items
        return {int(job.metadata.labels[JOB_ID_LABEL]): job.metadata.uid for job in items}

    # --- what every fault test checks afterwards -------------------------------------------

    def wait_converged(self, slug: str, *, job_ids: list[int], timeout: float = 150) -> dict:
        """Wait until every active grant of the team is its quota on the cluster, and every
        job of the team exists exactly once on the cluster and in the database and has
        succeeded; return what was seen."""
        seen = {}

        def converged():
            granted = self.active_grant_gpus(slug)
            jobs = {job["id"]: job for job in self.jobs(slug)}
            kube = self.kube_jobs(slug)
            seen.update(granted=granted, quota=self.quota_on_cluster(slug), jobs=jobs, kube=kube)
            return (
                seen["quota"] == str(granted)
                and sorted(jobs) == sorted(job_ids)
                and all(kube[job_id] == 1 for job_id in job_ids)
                and set(kube) <= set(jobs)
                and all(job["state"] == "succeeded" for job in jobs.values())
            )

        try:
            wait_for(converged, timeout=timeout, interval=1, what=f"team {slug} to converge")
        except pytest.fail.Exception:
            states = {i: (j["state"], j["message"][:80]) for i, j in seen.get("jobs", {}).items()}
            pytest.fail(
                f"team {slug} did not converge: granted {seen.get('granted')}, quota on the "
                f"cluster {seen.get('quota')}, jobs {states}, Jobs on the cluster "
                f"{dict(seen.get('kube', {}))}, expected jobs {job_ids}\n{self.logs_tail()}",
                pytrace=False,
            )
        return seen

    def logs_tail(self, lines: int = 15) -> str:
        return "\n".join(
            f"--- {name} ---\n" + "\n".join(p.log().splitlines()[-lines:])
            for name, p in self.processes.items()
        )

    def all_alive(self) -> dict[str, bool]:
        return {name: process.alive for name, process in self.processes.items()}


@pytest.fixture(scope="module")
def private_portal(devcluster, k8s, tmp_path_factory):
    """The private portal, started once for the module's fault tests; each test leaves it
    running with every service up."""
    root = Path(tempfile.mkdtemp(prefix="gpuportal-faults-"))
    root.chmod(0o755)
    logs = root / "logs"
    logs.mkdir()
    postgres = redis = None
    processes: dict[str, PortalProcess] = {}
    portal = None
    try:
        postgres, redis = PrivatePostgres(root), PrivateRedis(root)
        kubeconfig = mint_portal_identity(devcluster, k8s, user=PORTAL_USER)
        queue = f"faults-{uuid.uuid4().hex[:8]}"
        env = {
            **os.environ,
            "DATABASE_URL": postgres.url,
            "CELERY_BROKER_URL": redis.url,
            "CELERY_TASK_DEFAULT_QUEUE": queue,
            # Its watcher leads the devcluster under a Lease of its own (not the session's).
            "GPUJOBS_WATCHER_LEASE_NAME": f"{queue}-watcher",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
            "PORTAL_RECONCILE_SWEEP_SECONDS": "3",
            "GPUJOBS_RESYNC_SECONDS": "2",
            "PORTAL_INVENTORY_SYNC_SECONDS": "3600",
            "PORTAL_IDLE_CHECK_EVERY_SECONDS": "3600",
            "GPUJOBS_CLAIM_SECONDS": "5",
            "GPUJOBS_REQUEUE_AFTER_SECONDS": "3",
            "PORTAL_RECONCILE_RETRY_BACKOFF_MAX": "1",
            "PORTAL_RECONCILE_MAX_RETRIES": "100",
            "CELERY_BROKER_TRANSPORT_OPTIONS_VISIBILITY_TIMEOUT": "2",
            "CELERY_BROKER_TRANSPORT_OPTIONS_UNACKED_RESTORE_INTERVAL": "1",
        }
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=REPO_ROOT, env=env, check=True)
        setup = SETUP.replace("PASSWORD", repr(PASSWORD)).replace(
            "KUBECONFIG", repr(str(kubeconfig))
        )
        made = subprocess.run(
            [*manage, "shell", "-c", setup],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        tokens = json.loads(made.stdout.strip().splitlines()[-1])
        port = free_port()
        celery = [sys.executable, "-m", "celery", "-A", "portal"]
        worker = [
            *celery,
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "-Q",
            queue,
            "--without-gossip",
            "--without-mingle",
            "-n",
            f"{queue}@%h",
        ]
        for name, argv, ready in (
            (
                "web",
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "portal.wsgi:application",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    "2",
                    "--timeout",
                    "120",
                ],
                "Booting worker",
            ),
            ("worker", worker, "ready."),
            (
                "beat",
                [*celery, "beat", "--loglevel=INFO", "-s", str(root / "beat-schedule")],
                "beat: Starting",
            ),
            (
                "watcher",
                [*manage, "watch_jobs", "--discover-every", "0.5", "--watch-timeout", "30"],
                "following GPU jobs",
            ),
        ):
            processes[name] = PortalProcess(name, argv, env, logs, ready)
            processes[name].start()
        portal = Portal(
            postgres=postgres,
            redis=redis,
            processes=processes,
            url=f"http://127.0.0.1:{port}",
            tokens=tokens,
            core=client.CoreV1Api(k8s),
            batch=client.BatchV1Api(k8s),
        )
        wait_for(lambda: _answers(portal), timeout=60, what="gunicorn to answer the private portal")
        yield portal
    finally:
        for process in reversed(list(processes.values())):
            process.stop()
        if portal is not None:
            core = client.CoreV1Api(k8s)
            for slug in portal.teams:
                delete_namespace(core, slug)
        if redis is not None:
            redis.stop()
        if postgres is not None:
            postgres.stop()
        shutil.copytree(logs, tmp_path_factory.mktemp("faults-logs"), dirs_exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)


def _answers(portal: Portal) -> bool:
    try:
        return portal.call("admin", "GET", "/api/v1/me/").status_code == 200
    except httpx.HTTPError:
        return False


def wait_seconds(seconds: float) -> None:
    """A pause the fault needs (a claim to lapse, a job to finish while a service is away)."""
    time.sleep(seconds)
