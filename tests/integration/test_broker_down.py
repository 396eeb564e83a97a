"""Redis down when a change enqueues its work: an approval through the review page and a job
submitted through the API still commit and answer, the log says the task could not be sent, and
once Redis is back the periodic sweep (reconciles) and resync (jobs) send what was lost.

The broker here is a redis-server of this test's own, on a free port, stopped and started again
for real; the shared Redis of the session is left alone. No worker reads it: the tests read the
messages the portal sent off its queue. (Broker faults beyond this one path are the fault
suite's.)"""

from __future__ import annotations

import base64
import json
import logging
import shutil
import subprocess

import pytest
import redis
from django.utils import timezone

from gpujobs import tasks as job_tasks
from gpujobs.models import GpuJob
from portal.celery import app as celery_app
from reconcile import tasks as tenant_tasks
from tenants.models import QuotaGrant, QuotaRequest, TeamCluster
from tests import factories
from tests.integration.conftest import SESSION_QUEUE, free_port, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class OwnRedis:
    """``redis-server`` on a free port, without persistence, that a test stops and starts."""

    def __init__(self, directory):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.directory = directory
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                shutil.which("redis-server"),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self._answers, timeout=30, interval=0.1, what=f"redis-server on {self.port}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        assert not self._answers()

    def messages(self) -> list[dict]:
        """The task messages waiting on the session's queue: task name and keyword arguments."""
        with redis.Redis(port=self.port) as client:
            raw = client.lrange(SESSION_QUEUE, 0, -1)
        found = []
        for item in reversed(raw):  # kombu pushes on the left: oldest last
            message = json.loads(item)
            _, kwargs, _ = json.loads(base64.b64decode(message["body"]))
            found.append({"task": message["headers"]["task"], **kwargs})
        return found

    def _answers(self) -> bool:
        try:
            with redis.Redis(port=self.port, socket_timeout=1) as client:
                return client.ping()
        except redis.ConnectionError:
            return False


def _drop_broker_connections() -> None:
    # Celery pools its broker connections on first use; without them the next send connects
    # to the URL set now, as a process started with it would.
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def own_redis(tmp_path, monkeypatch):
    """The portal's Celery broker is a Redis of this test's own (and the session's after it).
    Celery reads ``CELERY_BROKER_URL`` from the environment before its configuration."""
    server = OwnRedis(tmp_path)
    server.start()
    try:
        monkeypatch.setenv("CELERY_BROKER_URL", server.url)
        _drop_broker_connections()
        assert celery_app.connection_for_write().port == server.port
        yield server
    finally:
        monkeypatch.undo()
        _drop_broker_connections()
        if server.process.poll() is None:
            server.stop()


def could_not_enqueue(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("Could not enqueue")
    ]


def test_an_approval_commits_while_redis_is_down_and_the_sweep_sends_its_reconcile(
    own_redis, client_as, admin, lead, team, cluster, caplog
):
    quota_request = factories.QuotaRequestFactory(
        team=team, cluster=cluster, requested_by=lead, gpus=4
    )
    own_redis.stop()

    with caplog.at_level(logging.ERROR):
        response = client_as(admin).post(f"/requests/{quota_request.pk}/approve/", follow=True)

    # The page answers and the decision is saved, marked for a reconcile ...
    assert response.status_code == 200
    assert response.redirect_chain == [("/review/", 302)]
    assert QuotaRequest.objects.get(pk=quota_request.pk).state == QuotaRequest.State.APPROVED
    assert QuotaGrant.objects.get(request=quota_request).gpus == 4
    marker = TeamCluster.objects.get(team=team, cluster=cluster)
    assert marker.status == TeamCluster.Status.PENDING
    assert marker.reconcile_requested_at is not None
    # ... and the log says what could not be sent.
    assert could_not_enqueue(caplog) == [
        f"Could not enqueue reconcile of team {team.pk} on {cluster.pk}"
    ]

    own_redis.start()
    assert own_redis.messages() == []  # nothing was sent while it was down

    # What beat runs every few minutes: the team's pass and the cluster-wide one.
    assert tenant_tasks.reconcile_sweep() == 2

    assert own_redis.messages() == [
        {"task": "reconcile.tasks.reconcile_team", "team_id": team.pk, "cluster_id": cluster.pk},
        {"task": "reconcile.tasks.reconcile_cluster", "cluster_id": cluster.pk},
    ]


def test_a_job_submitted_while_redis_is_down_is_queued_and_the_resync_sends_it(
    own_redis, api, client_as, admin, member, lead, team, cluster, settings, caplog
):
    factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=2,
        request__starts_on=timezone.localdate(),
        granted_by=admin,
    )
    own_redis.stop()

    with caplog.at_level(logging.ERROR):
        response = api.as_user(member).post(
            "/api/v1/jobs/",
            {
                "team": team.slug,
                "cluster": cluster.name,
                "name": "trainer",
                "image": "registry.example.com/ml/trainer:1.0",
                "gpus": 1,
            },
        )

    assert response.status_code == 201, response.data
    job = GpuJob.objects.get(pk=response.data["id"])
    assert (job.state, job.claimed_at) == (GpuJob.State.QUEUED, None)
    assert could_not_enqueue(caplog) == [
        f"Could not enqueue gpujobs.tasks.submit_job({{'job_id': {job.pk}}}); the resync will"
    ]
    page = client_as(member).get(f"/jobs/{job.pk}/")
    assert page.status_code == 200
    assert "Waiting for a worker" in page.content.decode()

    own_redis.start()
    settings.GPUJOBS_REQUEUE_AFTER_SECONDS = 0  # the resync waits this long for a lost message
    result = job_tasks.resync_jobs()  # what beat runs every minute

    assert result["requeued"] == [job.pk]
    assert own_redis.messages() == [{"task": "gpujobs.tasks.submit_job", "job_id": job.pk}]
