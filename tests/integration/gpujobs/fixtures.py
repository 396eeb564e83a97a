"""Fixtures for GPU job tests against the devcluster, with a real Celery worker and the watcher
(``manage.py watch_jobs``) running as processes of their own on the test database.

Shared by tests/integration/gpujobs (through its conftest) and the browser tests
(tests/e2e/test_gpujobs_flow.py imports them).

A team's namespace and ResourceQuota come from the portal's own reconcile: an admin approves a
grant and the worker brings the namespace in line, as in production. Each test's team has a
unique slug; its namespace is deleted when the test ends.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field

import pytest
from django.conf import settings
from django.utils import timezone

from gpujobs.models import GpuJob
from tenants import quota as tenant_quota
from tenants.models import Membership, TeamCluster
from tests import factories
from tests.integration.conftest import (
    REPO_ROOT,
    OnePerSession,
    _database_url,
    stop_process,
    wait_for,
)
from tests.integration.kube import delete_namespace, read_or_none, remove_admission_objects
from tests.integration.portal_identity import mint_portal_identity

QUOTA_NAME = "gpu-portal-quota"
DEVCLUSTER_GPU_MODEL = "NVIDIA-A100-SXM4-80GB"
COMPLETE_AFTER = "devcluster.gpuportal.io/complete-after-seconds"
EXIT_CODE = "devcluster.gpuportal.io/exit-code"


# --- the watcher process -------------------------------------------------------------------------


_watcher = OnePerSession()


@pytest.fixture(scope="session")
def watcher_process(postgres_database, tmp_path_factory):
    """``manage.py watch_jobs`` as a process of its own, reading the test database: one per
    session (``OnePerSession``), leading every cluster alone under its Lease's name
    (``SESSION_LEASE_NAME``).

    It looks for clusters every half second (each test makes its own Cluster row) and restarts
    its watches every 30 s, so the tests also exercise resuming from a resourceVersion.
    """

    def start():
        return _start_watcher(postgres_database, tmp_path_factory)

    with _watcher.use(start, stop_process) as watcher:
        yield watcher


# The session's watchers' Leases (leader election, workloads/leader_election.py): a name of the
# session's own, so that sessions sharing the devcluster never wait on each other's watcher.
SESSION_LEASE_NAME = f"test-watcher-{uuid.uuid4().hex[:8]}"


def _start_watcher(
    postgres_database, tmp_path_factory, *, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """``manage.py watch_jobs`` on the test database, started once it says it follows the
    jobs; ``env``: more variables (another lease name, shorter leases)."""
    log_path = tmp_path_factory.mktemp("watcher") / "watcher.log"
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(postgres_database),
        "PYTHONUNBUFFERED": "1",
        "GPUJOBS_WATCHER_LEASE_NAME": SESSION_LEASE_NAME,
        **(env or {}),
    }
    with open(log_path, "w") as log:
        watcher = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "watch_jobs",
                "--discover-every",
                "0.5",
                "--watch-timeout",
                "30",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while "following GPU jobs" not in log_path.read_text():
        if watcher.poll() is not None or time.monotonic() > deadline:
            watcher.kill()
            pytest.fail(f"watch_jobs did not start:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.2)
    watcher.log_path = log_path
    return watcher


@pytest.fixture
def running_services(celery_worker_process, watcher_process):
    """A real Celery worker and the watcher, both on the test database."""
    return celery_worker_process, watcher_process


# --- the cluster, as the devcluster's admin ----------------------------------------------------


def wait_for_quota(core, namespace: str, gpus: int, *, timeout: float = 120) -> None:
    """Wait until the namespace's GPU quota is ``gpus`` and the quota controller has counted
    usage against it: until then the API server refuses every pod."""
    wait_for(
        lambda: (
            (q := read_or_none(core.read_namespaced_resource_quota, QUOTA_NAME, namespace))
            is not None
            and (q.spec.hard or {}).get("requests.nvidia.com/gpu") == str(gpus)
            and q.status is not None
            and q.status.hard == q.spec.hard
            and q.status.used is not None
        ),
        timeout=timeout,
        what=f"requests.nvidia.com/gpu={gpus} counted in namespace {namespace}",
    )


def set_gpu_quota(core, namespace: str, gpus: int) -> None:
    """Change the namespace's GPU quota by hand, as a cluster admin would (the reconcile puts
    it back on its next pass; none runs during a test unless the test asks for one)."""
    core.patch_namespaced_resource_quota(
        QUOTA_NAME, namespace, {"spec": {"hard": {"requests.nvidia.com/gpu": str(gpus)}}}
    )
    wait_for_quota(core, namespace, gpus)


# --- the portal's side -------------------------------------------------------------------------


PORTAL_JOBS_USER = "gpu-portal-jobs-tests"


@pytest.fixture(scope="session")
def portal_kubeconfig(devcluster, k8s):
    """Credentials bound to deploy/rbac.yaml's ClusterRole and nothing else: the worker and the
    watcher act with these, so a verb the job work needs and the role lacks fails a test. The
    admission policies the session's passes installed go at its end."""
    yield mint_portal_identity(devcluster, k8s, user=PORTAL_JOBS_USER)
    remove_admission_objects(k8s, settings.PORTAL_NAME)


@pytest.fixture
def gpu_cluster(transactional_db, devcluster, portal_kubeconfig):
    """The devcluster as the portal knows it, 32 A100s in its inventory; the portal acts with
    the least-privilege credentials of deploy/rbac.yaml."""
    cluster = factories.ClusterFactory(
        name="devcluster",
        display_name="Devcluster",
        kubeconfig_path=str(portal_kubeconfig),
        prometheus_url=devcluster.prometheus_url,
    )
    factories.GpuCapacityFactory(cluster=cluster, allocatable=32, gpu_model=DEVCLUSTER_GPU_MODEL)
    return cluster


@dataclass
class GpuTeam:
    team: object
    lead: object
    member: object
    viewer: object
    namespace: str
    grants: list = field(default_factory=list)


def team_with_members(name: str, *, prefix: str):
    """A team of a unique slug (``<prefix>-<8 hex>``) with a lead, a member and a viewer;
    returns the team and the users by role."""
    slug = f"{prefix}-{uuid.uuid4().hex[:8]}"
    team = factories.TeamFactory(slug=slug, name=f"{name.title()} {slug[-4:]}")
    users = {}
    for role in ("lead", "member", "viewer"):
        user = factories.UserFactory(username=f"{role}-{slug}")
        Membership.objects.create(team=team, user=user, role=role)
        users[role] = user
    return team, users


@pytest.fixture
def make_gpu_team(transactional_db, gpu_cluster, core, celery_worker_process):
    """``make_gpu_team(gpus=2)``: a team with a lead, a member and a viewer, and a grant of
    ``gpus`` on the devcluster approved by an admin, so that the reconcile (run by the real
    worker) makes its namespace there with that GPU quota. ``quota=`` then changes the
    namespace's quota by hand, as if it had been shrunk meanwhile."""
    made = []
    admin = factories.AdminFactory(username="gj-admin")

    def make(gpus: int = 2, *, name: str = "team", quota: int | None = None) -> GpuTeam:
        team, users = team_with_members(name, prefix="gj")
        slug = team.slug
        grants = []
        if gpus:
            made.append(slug)
            request = tenant_quota.quota_request_create(
                requested_by=users["lead"],
                team=team,
                cluster=gpu_cluster,
                gpus=gpus,
                justification="GPU job tests.",
                ends_on=timezone.localdate() + datetime.timedelta(days=30),
            )
            grants.append(tenant_quota.quota_request_approve(reviewer=admin, quota_request=request))
            wait_for(
                lambda: TeamCluster.objects.filter(
                    team=team, cluster=gpu_cluster, status=TeamCluster.Status.IN_SYNC
                ).exists(),
                timeout=120,
                what=f"the reconcile of {slug} (its namespace and quota)",
            )
            wait_for_quota(core, slug, gpus)
            if quota is not None:
                set_gpu_quota(core, slug, quota)
        return GpuTeam(team=team, namespace=slug, grants=grants, **users)

    yield make
    for slug in made:
        delete_namespace(core, slug)


def wait_for_job(job_id: int, predicate, *, timeout: float = 90, what: str = "the job"):
    """Poll the job's row (as the watcher writes it) until ``predicate(job)`` holds."""

    def check():
        job = GpuJob.objects.select_related("team").get(pk=job_id)
        return job if predicate(job) else None

    try:
        return wait_for(check, timeout=timeout, interval=0.3, what=what)
    except pytest.fail.Exception:
        job = GpuJob.objects.get(pk=job_id)
        pytest.fail(
            f"timed out after {timeout}s waiting for {what}; job #{job_id} is {job.state} "
            f"({job.reason}: {job.message})"
        )


def wait_for_state(job_id: int, *states: str, timeout: float = 90) -> GpuJob:
    return wait_for_job(
        job_id, lambda j: j.state in states, timeout=timeout, what=f"state {'/'.join(states)}"
    )


def wait_for_finish(job_id: int, state: str, *, timeout: float = 90) -> GpuJob:
    """Wait for a job that ran to end in ``state`` with its pod's facts known (node, exit
    code): the Job's end may reach the watcher before its pod's last events."""
    return wait_for_job(
        job_id,
        lambda j: j.state == state and j.node and j.exit_code is not None,
        timeout=timeout,
        what=f"state {state}, its node and exit code known",
    )


def job_pods(core, job: GpuJob) -> list:
    return core.list_namespaced_pod(
        job.team.slug, label_selector=f"gpuportal.io/job-id={job.pk}"
    ).items


def api_client_for(user):
    from rest_framework.test import APIClient

    api = APIClient()
    api.default_format = "json"
    api.force_authenticate(user=user)
    return api


def submit(user, team, cluster, **body):
    """POST /api/v1/jobs/ as the user; returns the response."""
    body.setdefault("name", "job")
    body.setdefault("image", "registry.example.com/ml/trainer:1.0")
    body.setdefault("gpus", 1)
    payload = {"team": team.slug, "cluster": cluster.name, **body}
    return api_client_for(user).post("/api/v1/jobs/", payload)


def finishing(seconds: float = 2, exit_code: int | None = None) -> dict:
    """Pod annotations that make the devcluster finish the pod (with that exit code)."""
    annotations = {COMPLETE_AFTER: str(seconds)}
    if exit_code is not None:
        annotations[EXIT_CODE] = str(exit_code)
    return annotations


def gpu_nodes(core) -> set[str]:
    return {n.metadata.name for n in core.list_node(label_selector="hardware-type=gpu").items}


LOG_LINES = 50


@pytest.fixture
def running_job(make_gpu_team, gpu_cluster, devcluster):
    """``(gpu_team, job)``: a job of a new team running on the devcluster, whose one pod's
    main container has written ``LOG_LINES`` lines (``<pod>/main line <n>``)."""
    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster, name="logs").data["id"]
    job = wait_for_state(job_id, "running")
    (pod,) = job.pods
    lines = [f"{pod}/main line {i}" for i in range(1, LOG_LINES + 1)]
    devcluster.write_pod_log(job.team.slug, pod, lines)
    yield gpu, job
    api_client_for(gpu.member).post(f"/api/v1/jobs/{job_id}/cancel/")
