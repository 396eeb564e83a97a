"""Two watcher replicas (``manage.py watch_jobs``) on one database and the devcluster: exactly
one holds the cluster's Lease and follows it; killed with SIGKILL, the other takes the Lease
within the lease's duration and a few seconds, starts from a full list, and the next job's
states still arrive, while what the first leader recorded is not written again.

The leases here are short (3 s, renewed every second) so that the handover takes seconds; the
replicas use a Lease name of this test's own. The session's own watcher, if a test before
started it, is paused meanwhile (SIGSTOP): it follows the same database under another Lease and
would write these jobs too."""

import signal
import socket
import subprocess
import time
import uuid

import pytest
from django.conf import settings
from kubernetes import client
from kubernetes.client.rest import ApiException

from gpujobs.models import GpuJob
from tests.integration.conftest import stop_process, wait_for
from tests.integration.gpujobs import fixtures
from tests.integration.gpujobs.fixtures import finishing, submit, wait_for_state

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

LEASE_SECONDS = 3
RENEW_SECONDS = 1
WATCHING = "watching GPU jobs on cluster devcluster"


@pytest.fixture
def session_watcher_paused():
    process = fixtures._watcher.process
    paused = process is not None and process.poll() is None
    if paused:
        process.send_signal(signal.SIGSTOP)
    yield
    if paused:
        process.send_signal(signal.SIGCONT)


@pytest.fixture
def replicas(postgres_database, tmp_path_factory, session_watcher_paused, k8s):
    """Start two watcher replicas under a Lease name of their own; ``(lease name, [processes])``
    (stopped, and the Lease deleted, at the end)."""
    prefix = f"test-replicas-{uuid.uuid4().hex[:8]}"
    env = {
        "GPUJOBS_WATCHER_LEASE_NAME": prefix,
        "GPUJOBS_WATCHER_LEASE_SECONDS": str(LEASE_SECONDS),
        "GPUJOBS_WATCHER_RENEW_SECONDS": str(RENEW_SECONDS),
    }
    started: list[subprocess.Popen] = []

    def start():
        started.extend(
            fixtures._start_watcher(postgres_database, tmp_path_factory, env=env) for _ in range(2)
        )
        return f"{prefix}-devcluster", started

    yield start
    for process in started:
        if process.poll() is None:
            stop_process(process)
    try:
        client.CoordinationV1Api(k8s).delete_namespaced_lease(
            f"{prefix}-devcluster", settings.PORTAL_NAMESPACE
        )
    except ApiException as error:
        if error.status != 404:
            raise


def lease_of(k8s, name: str):
    try:
        return client.CoordinationV1Api(k8s).read_namespaced_lease(name, settings.PORTAL_NAMESPACE)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def holder_of(k8s, name: str) -> str:
    lease = lease_of(k8s, name)
    return (lease.spec.holder_identity or "") if lease is not None else ""


def identity_of(process: subprocess.Popen) -> str:
    return f"{socket.gethostname()}-{process.pid}"


def log_of(process: subprocess.Popen) -> str:
    return process.log_path.read_text()


def test_killing_the_leader_hands_over_within_seconds_with_no_job_state_lost_or_rewritten(
    make_gpu_team, gpu_cluster, k8s, replicas
):
    gpu = make_gpu_team(gpus=1)
    lease_name, processes = replicas()
    by_identity = {identity_of(p): p for p in processes}

    holder = wait_for(
        lambda: holder_of(k8s, lease_name) in by_identity and holder_of(k8s, lease_name),
        timeout=30,
        what="one replica to hold the Lease",
    )
    leader = by_identity[holder]
    (standby,) = [p for p in processes if p is not leader]

    first = submit(gpu.member, gpu.team, gpu_cluster, name="before", annotations=finishing(1))
    assert first.status_code == 201, first.data
    before = wait_for_state(first.data["id"], "succeeded", timeout=90)

    # Only the leader follows the cluster; the other only tries to take the Lease.
    assert WATCHING in log_of(leader)
    assert WATCHING not in log_of(standby)
    assert "listed" not in log_of(standby)
    assert holder_of(k8s, lease_name) == holder

    leader.kill()
    leader.wait(timeout=10)
    killed_at = time.monotonic()
    wait_for(
        lambda: holder_of(k8s, lease_name) == identity_of(standby),
        timeout=LEASE_SECONDS + 15,
        interval=0.1,
        what="the other replica to take the Lease",
    )
    handover = time.monotonic() - killed_at
    print(f"handover after SIGKILL: {handover:.1f} s")
    assert handover < LEASE_SECONDS + RENEW_SECONDS + 5, f"handover took {handover:.1f} s"
    assert lease_of(k8s, lease_name).spec.lease_transitions == 1

    second = submit(gpu.member, gpu.team, gpu_cluster, name="after", annotations=finishing(1))
    assert second.status_code == 201, second.data
    after = wait_for_state(second.data["id"], "succeeded", timeout=90)
    assert after.finished_at is not None
    assert after.exit_code == 0

    # The new leader started from a full list, which showed it the first job again: its
    # terminal transition stays as the first leader recorded it, once.
    wait_for(lambda: WATCHING in log_of(standby), timeout=10, what="the new leader to watch")
    assert "listed" in log_of(standby)
    again = GpuJob.objects.get(pk=before.pk)
    assert (again.state, again.state_changed_at, again.finished_at, again.node) == (
        before.state,
        before.state_changed_at,
        before.finished_at,
        before.node,
    )

    # Stopped cleanly (SIGTERM, as a rolling update stops it), a leader gives the Lease up, so
    # that the next replica need not wait for it to expire.
    stop_process(standby)
    assert standby.returncode == 0
    assert holder_of(k8s, lease_name) == ""
