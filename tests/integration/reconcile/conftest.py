"""Reconcile against the devcluster with a real Redis broker and real Celery workers.

The worker acts with the credentials of a user minted for these tests and bound to exactly the
ClusterRole in deploy/rbac.yaml, so a verb missing from that role fails a test here. Checks of
what the cluster holds use the devcluster's admin client.

Every test makes its own teams with unique slugs (so namespaces never clash with other tests or
sessions) and deletes their namespaces afterwards.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.test.utils import override_settings
from django_celery_beat.models import PeriodicTask

from clusters.models import QuotaMode
from portal.celery import app as celery_app
from tenants import queueing, quota
from tenants.models import Membership, TeamCluster
from tests import factories
from tests.integration import kube
from tests.integration.conftest import REPO_ROOT, _database_url, wait_for
from tests.integration.kube import delete_namespace, read_or_none, remove_admission_objects
from tests.integration.kueue_portal import KueueObjects
from tests.integration.portal_identity import mint_portal_identity

PORTAL_TEST_USER = "gpu-portal-tests"


@pytest.fixture(scope="session")
def portal_kubeconfig(devcluster, k8s):
    """Credentials bound to deploy/rbac.yaml's ClusterRole and nothing else. The admission
    policies the session's passes installed go at its end."""
    yield mint_portal_identity(devcluster, k8s, user=PORTAL_TEST_USER)
    remove_admission_objects(k8s, settings.PORTAL_NAME)


@pytest.fixture
def kube_cluster(transactional_db, portal_kubeconfig):
    """The devcluster as the portal knows it: 32 A100s to plan with (capacity is not synced
    from the nodes here; test_inventory does that)."""
    cluster = factories.ClusterFactory(
        name="dev", display_name="Devcluster", kubeconfig_path=str(portal_kubeconfig)
    )
    factories.GpuCapacityFactory(cluster=cluster, allocatable=32)
    return cluster


@pytest.fixture
def make_team(transactional_db, core):
    """``make_team("a")``: a team with a unique slug; its namespaces go when the test ends."""
    made = []

    def make(name: str = "team", **kwargs):
        slug = f"rc-{uuid.uuid4().hex[:6]}-{name}"
        made.append(slug)
        return factories.TeamFactory(slug=slug, name=name, **kwargs)

    yield make
    for slug in made:
        delete_namespace(core, slug)


@pytest.fixture
def admin_user(transactional_db):
    return factories.AdminFactory(username="ada-admin")


@pytest.fixture
def approve(admin_user):
    """``approve(team, cluster, gpus=4, ...)``: a lead's request, approved; returns the grant."""

    def grant(team, cluster, gpus=4, **kwargs):
        lead = factories.UserFactory(username=f"lead-{team.slug}")
        Membership.objects.get_or_create(team=team, user=lead, defaults={"role": "lead"})
        kwargs.setdefault("justification", "Training.")
        quota_request = quota.quota_request_create(
            requested_by=lead, team=team, cluster=cluster, gpus=gpus, **kwargs
        )
        return quota.quota_request_approve(reviewer=admin_user, quota_request=quota_request)

    return grant


# --- reading the cluster -----------------------------------------------------------------------


def quota_hard(core, namespace: str) -> dict | None:
    quota = read_or_none(core.read_namespaced_resource_quota, "gpu-portal-quota", namespace)
    return None if quota is None else dict(quota.spec.hard or {})


def wait_for_gpu_quota(core, namespace: str, gpus: str, *, timeout: float = 60) -> dict:
    return wait_for(
        lambda: (
            (hard := quota_hard(core, namespace)) is not None
            and hard.get("requests.nvidia.com/gpu") == gpus
            and hard
        ),
        timeout=timeout,
        what=f"requests.nvidia.com/gpu={gpus} in namespace {namespace}",
    )


def wait_for_quota_status(core, namespace: str, *, timeout: float = 60):
    """Pods are only admitted against a quota once the controller has computed its usage."""
    return wait_for(
        lambda: (
            (q := read_or_none(core.read_namespaced_resource_quota, "gpu-portal-quota", namespace))
            is not None
            and q.status is not None
            and q.status.used is not None
            and q.status.hard == q.spec.hard
            and q
        ),
        timeout=timeout,
        what=f"the quota controller to count usage in {namespace}",
    )


def wait_for_state(team, cluster, predicate, *, timeout: float = 60, what: str = "status"):
    def check():
        state = TeamCluster.objects.filter(team=team, cluster=cluster).first()
        return state if state is not None and predicate(state) else None

    return wait_for(check, timeout=timeout, what=what)


def in_sync(team, cluster, *, timeout: float = 60) -> TeamCluster:
    return wait_for_state(
        team,
        cluster,
        lambda s: s.status == TeamCluster.Status.IN_SYNC,
        timeout=timeout,
        what=f"{team.slug} in sync",
    )


def gpu_pod(name: str, gpus: int) -> dict:
    """A pod asking for GPUs only: its CPU and memory come from the team's LimitRange."""
    return kube.gpu_pod(name, gpus, cpu=None, memory=None)


# --- workers of a test's own -------------------------------------------------------------------


class Worker:
    """A ``celery worker`` process of one test, on its own queue, killed or stopped at the end."""

    def __init__(self, *, queue: str, log: Path, app: str = "portal", env: dict | None = None):
        self.queue, self.log = queue, log
        self.name = f"{queue}-{uuid.uuid4().hex[:4]}@{socket.gethostname()}"
        environment = {
            **os.environ,
            "DATABASE_URL": _database_url(settings.DATABASES["default"]),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "PYTHONUNBUFFERED": "1",
            # Fast enough for a test: retries within a second or two, and a message whose worker
            # died is delivered again two seconds after it was taken.
            "PORTAL_RECONCILE_RETRY_BACKOFF_MAX": "1",
            "PORTAL_RECONCILE_MAX_RETRIES": "100",
            "CELERY_BROKER_TRANSPORT_OPTIONS_VISIBILITY_TIMEOUT": "2",
            "CELERY_BROKER_TRANSPORT_OPTIONS_UNACKED_RESTORE_INTERVAL": "1",
            **(env or {}),
        }
        self.handle = open(log, "a")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                app,
                "worker",
                "--pool=solo",
                "-Q",
                queue,
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                self.name,
            ],
            cwd=REPO_ROOT,
            env=environment,
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while "ready." not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"worker did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.handle.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.handle.close()


def route_reconciles(monkeypatch, queue: str) -> None:
    """Send the reconcile tasks (a team's, a cluster's) to ``queue``."""
    from reconcile.tasks import reconcile_cluster, reconcile_team

    for task in (reconcile_team._get_current_object(), reconcile_cluster._get_current_object()):
        monkeypatch.setattr(task, "queue", queue, raising=False)
        # Celery caches the options with the queue.
        monkeypatch.setattr(task, "_exec_options", None)


@pytest.fixture
def own_queue(monkeypatch):
    """A queue only this test's workers read: reconcile tasks the test enqueues (through the
    real services) go there rather than to the shared session worker."""
    queue = f"reconcile-test-{uuid.uuid4().hex[:8]}"
    route_reconciles(monkeypatch, queue)
    yield queue
    with celery_app.connection_for_write() as connection:
        connection.default_channel.queue_delete(queue)


@pytest.fixture
def start_worker(postgres_database, tmp_path):
    """``start_worker(queue, app=..., env=...)``: a worker of this test, stopped afterwards."""
    workers = []

    def start(queue: str, *, app: str = "portal", env: dict | None = None, wait: bool = True):
        worker = Worker(queue=queue, log=tmp_path / f"worker-{len(workers)}.log", app=app, env=env)
        workers.append(worker)
        if wait:
            worker.wait_ready()
        return worker

    yield start
    for worker in workers:
        worker.stop()


@pytest.fixture
def beat(postgres_database, tmp_path):
    """``beat(every=2)``: Celery beat publishing the reconcile sweep every few seconds, for one
    test (it would disturb tests that count reconcile runs). It runs the production scheduler
    (``CELERY_BEAT_SCHEDULER``, django-celery-beat's database scheduler), which writes the
    schedule into the test database: the tests using it commit (``transactional_db``)."""
    processes = []

    def start(every: float = 2.0):
        log = tmp_path / "beat.log"
        env = {
            **os.environ,
            "DATABASE_URL": _database_url(settings.DATABASES["default"]),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "PORTAL_RECONCILE_SWEEP_SECONDS": str(every),
            # Only the sweep matters here: push the other entries out of the test's way.
            "PORTAL_INVENTORY_SYNC_SECONDS": "3600",
            "PORTAL_IDLE_CHECK_EVERY_SECONDS": "3600",
        }
        handle = open(log, "w")  # noqa: SIM115 - closed below
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "beat",
                "--loglevel=INFO",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        processes.append((process, handle))
        wait_for(
            lambda: (
                process.poll() is not None
                or PeriodicTask.objects.filter(
                    name="reconcile-sweep", interval__every=every, interval__period="seconds"
                ).exists()
            ),
            what="beat to write the sweep's schedule into the database",
        )
        if process.poll() is not None:
            pytest.fail(f"celery beat exited:\n{log.read_text()[-3000:]}")
        return process

    yield start
    for process, handle in processes:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        handle.close()


# --- a Kueue portal of its own -----------------------------------------------------------------

A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"


@dataclass
class KueuePortal:
    """The portal name the module's tests and their worker run under, the portal's credentials
    for that name (deploy/rbac.yaml's role binds the team roles of that name), and the admin's
    view of its Kueue objects."""

    name: str
    queue: str
    worker: Worker
    objects: KueueObjects
    kubeconfig: Path

    def wait_idle(self, timeout: float = 30) -> None:
        """Until the worker has nothing queued, reserved or running."""
        inspect = celery_app.control.inspect(destination=[self.worker.name], timeout=2)

        def idle() -> bool:
            with celery_app.connection_for_read() as connection:
                if connection.default_channel.client.llen(self.queue):
                    return False
            active = (inspect.active() or {}).get(self.worker.name, [])
            reserved = (inspect.reserved() or {}).get(self.worker.name, [])
            return not active and not reserved

        deadline = time.monotonic() + timeout
        while not idle() and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture(scope="module")
def kueue_portal(postgres_database, devcluster, k8s, tmp_path_factory):
    """A portal name of the module's own (so its cohort and flavors are its own on the shared
    devcluster), a worker running under it with deploy/rbac.yaml's role, the reconcile tasks
    routed to that worker, and its cluster-wide objects removed at the end."""
    if not devcluster.settings.kueue:
        pytest.fail("this devcluster runs without Kueue (DEVCLUSTER_KUEUE=0); start one with it")
    name = f"kq-{uuid.uuid4().hex[:6]}"
    queue = f"kueue-test-{name}"
    kubeconfig = mint_portal_identity(devcluster, k8s, user=PORTAL_TEST_USER, portal_name=name)
    patches = pytest.MonkeyPatch()
    route_reconciles(patches, queue)
    with override_settings(PORTAL_NAME=name):
        worker = Worker(
            queue=queue,
            log=tmp_path_factory.mktemp("kueue-worker") / "worker.log",
            # What the worker itself enqueues (a cluster pass asking for its teams' passes)
            # stays on its queue too, under its portal name.
            env={"PORTAL_NAME": name, "CELERY_TASK_DEFAULT_QUEUE": queue},
        )
        worker.wait_ready()
        portal = KueuePortal(
            name=name,
            queue=queue,
            worker=worker,
            objects=KueueObjects(k8s, name),
            kubeconfig=kubeconfig,
        )
        try:
            yield portal
        finally:
            worker.stop()
            patches.undo()
            with celery_app.connection_for_write() as connection:
                connection.default_channel.queue_delete(queue)
            portal.objects.remove_everything()
            remove_admission_objects(k8s, name)


@pytest.fixture
def kueue_clean(transactional_db, kueue_portal):
    """After the test (its namespaces deleted, before its rows are flushed): the worker idle and
    the portal's cluster-wide objects gone, so each test starts from an empty cohort."""
    yield kueue_portal
    kueue_portal.wait_idle()
    kueue_portal.objects.remove_everything()


@pytest.fixture
def queue_cluster(kueue_clean, admin_user):
    """The devcluster switched to Kueue mode by an admin: 32 A100s on 4 nodes and 16 H100s on
    2 (as the devcluster has them; the capacity rows written as the capacity sync would)."""
    cluster = factories.ClusterFactory(
        name="dev", display_name="Devcluster", kubeconfig_path=str(kueue_clean.kubeconfig)
    )
    factories.GpuCapacityFactory(cluster=cluster, allocatable=48, gpu_model=f"{A100}, {H100}")
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=A100, allocatable=32, nodes=4)
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=H100, allocatable=16, nodes=2)
    return queueing.cluster_set_quota_mode(
        actor=admin_user, cluster=cluster, quota_mode=QuotaMode.KUEUE
    )
