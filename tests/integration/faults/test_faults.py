"""Faults in the portal's services and processes, on a private portal (``conftest``): Redis and
PostgreSQL restarted, the worker killed with SIGKILL in the middle of a job submission, the
watcher killed, the Kubernetes API server restarted. Afterwards every approved grant is on the
cluster, every submitted job exists exactly once (on the cluster and in the database) and has
run to its end, and nothing the portal answered 2xx to is lost.

The worker killed in the middle of a reconcile, and the API server stopped during an approval,
are proven in tests/integration/reconcile/test_failures.py; the fault table at the end of the
session lists them beside these.
"""

import pytest

from tests.integration.conftest import wait_for

from .conftest import wait_seconds

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


def accepted(response) -> int:
    assert response.status_code == 201, response.text[:500]
    return response.json()["id"]


def test_redis_restarted_with_tasks_queued_loses_nothing(private_portal, fault_row):
    portal = private_portal
    fault_row(
        "Redis restarted (no persistence: queued messages lost)",
        "2 job submissions and an approval's reconcile queued in Redis while the worker was "
        "stopped; 1 submission and 1 approval while Redis was down",
        "every grant is the quota on the cluster; each of the 4 jobs once on the cluster and in "
        "the database, succeeded; every process alive",
    )
    slug = portal.make_team("redis")
    portal.grant(slug, 2)
    portal.wait_converged(slug, job_ids=[])
    worker = portal.processes["worker"]

    worker.stop()
    job_ids = [accepted(portal.submit(slug, f"queued-{n}")) for n in range(2)]
    portal.grant(slug, 1)  # its reconcile waits in Redis
    portal.redis.stop()
    job_ids.append(accepted(portal.submit(slug, "while-redis-is-down")))
    assert portal.approve(portal.request_quota(slug, 1)).status_code == 201
    portal.redis.start()
    worker.start()

    seen = portal.wait_converged(slug, job_ids=job_ids)
    assert seen["granted"] == 4
    assert all(portal.all_alive().values()), portal.all_alive()


def test_postgres_restarted_while_jobs_finish_loses_nothing(private_portal, fault_row):
    portal = private_portal
    fault_row(
        "PostgreSQL restarted",
        "2 running jobs that finished on the cluster while the database was down; a submission "
        "while it was down (refused: nothing was stored)",
        "the refusal was a 503 in JSON with Retry-After; both jobs recorded succeeded once it "
        "was back; a job submitted after runs once; the grant is the quota; every process alive",
    )
    slug = portal.make_team("postgres")
    portal.grant(slug, 2)
    job_ids = [accepted(portal.submit(slug, f"running-{n}", run_seconds=12)) for n in range(2)]
    portal.wait_running(slug)

    portal.postgres.stop()
    refused = portal.submit(slug, "while-postgres-is-down")
    wait_seconds(15)  # the jobs finish meanwhile
    portal.postgres.start()

    assert refused.status_code == 503, refused.text[:300]
    assert "detail" in refused.json()
    assert refused.headers["Retry-After"]
    portal.wait_converged(slug, job_ids=job_ids)  # the finished jobs' GPUs are free again
    job_ids.append(accepted(portal.submit(slug, "after-postgres")))
    portal.wait_converged(slug, job_ids=job_ids)
    assert all(portal.all_alive().values()), portal.all_alive()


def test_worker_killed_in_the_middle_of_a_submission_makes_the_job_once(
    private_portal, fault_row, tmp_path
):
    portal = private_portal
    fault_row(
        "Worker SIGKILLed mid job submission",
        "a submission whose Job the worker had created on the cluster, killed before it "
        "recorded it",
        "the next worker finds the Job (one on the cluster, its uid recorded), the job succeeds",
    )
    slug = portal.make_team("submit-kill")
    portal.grant(slug, 1)
    portal.wait_converged(slug, job_ids=[])
    worker = portal.processes["worker"]
    marker = tmp_path / "created"

    worker.stop()
    slow_env = {**worker.env, "SLOW_SUBMIT_MARKER": str(marker), "SLOW_SUBMIT_SECONDS": "300"}
    slow_argv = [
        a if a != "portal" else "tests.integration.faults.slow_submit_worker" for a in worker.argv
    ]
    original_env, worker.env = worker.env, slow_env
    try:
        worker.start(argv=slow_argv)
        job_id = accepted(portal.submit(slug, "half-submitted"))
        wait_for(marker.exists, timeout=90, what="the worker to create the Job")
        worker.kill()
    finally:
        worker.env = original_env
    assert portal.kube_jobs(slug)[job_id] == 1
    worker.start()

    portal.wait_converged(slug, job_ids=[job_id])
    (job,) = portal.jobs(slug)
    assert job["kubernetes"]["uid"] == portal.kube_job_uids(slug)[job_id]


def test_watcher_killed_while_jobs_finish_loses_nothing(private_portal, fault_row):
    portal = private_portal
    fault_row(
        "Watcher SIGKILLed",
        "2 running jobs that finished on the cluster while no watcher ran",
        "both recorded succeeded (the periodic resync, then the restarted watcher); a job "
        "submitted after the restart is followed to its end",
    )
    slug = portal.make_team("watcher")
    portal.grant(slug, 2)
    job_ids = [accepted(portal.submit(slug, f"running-{n}", run_seconds=8)) for n in range(2)]
    portal.wait_running(slug)
    watcher = portal.processes["watcher"]

    watcher.kill()
    wait_seconds(12)  # the jobs finish meanwhile
    watcher.start()

    job_ids.append(accepted(portal.submit(slug, "after-watcher")))
    portal.wait_converged(slug, job_ids=job_ids)
    assert all(portal.all_alive().values()), portal.all_alive()


def test_kube_apiserver_restarted_during_a_submission_and_an_approval(
    private_portal, fault_row, devcluster
):
    portal = private_portal
    fault_row(
        "Kubernetes API server restarted",
        "a job submission and an approval's reconcile while it was down",
        "the job created once and succeeded, the grant is the quota, the watcher follows "
        "again; every process alive",
    )
    slug = portal.make_team("apiserver")
    portal.grant(slug, 1)
    portal.wait_converged(slug, job_ids=[])

    with devcluster.apiserver_stopped():
        job_id = accepted(portal.submit(slug, "while-apiserver-is-down"))
        portal.grant(slug, 1)
        wait_seconds(3)  # the worker tries and fails meanwhile

    seen = portal.wait_converged(slug, job_ids=[job_id])
    assert seen["granted"] == 2
    assert all(portal.all_alive().values()), portal.all_alive()
