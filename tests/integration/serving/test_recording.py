"""What the watcher records of a revision, and what it asks for next: a revision whose first
replica becomes ready (or whose last one stops being ready) has its service reconciled, since
the route's weights follow it (``serving.manifests.route_weights``); a change that keeps it on
the same side of zero asks for nothing."""

import base64
import json
import uuid

import pytest
import redis
from django.conf import settings

from serving import recording
from serving.observe import RevisionObservation
from tests import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]


def seen(ready: int) -> RevisionObservation:
    return RevisionObservation(
        desired=2, current=2, ready=ready, updated=2, reason="", message="", pods=("p",)
    )


@pytest.fixture
def canary():
    service = factories.InferenceServiceFactory()
    factories.RevisionFactory(service=service, number=1, role="stable", weight=80, replicas=2)
    return factories.RevisionFactory(
        service=service, number=2, role="candidate", weight=20, replicas=2
    )


@pytest.fixture
def reconciles(monkeypatch):
    """The services whose reconcile was enqueued, read back from the broker: the reconcile task
    goes to a queue of this test's own, which no worker reads (a list in Redis)."""
    from serving.tasks import reconcile_service

    queue = f"serving-test-{uuid.uuid4().hex[:8]}"
    task = reconcile_service._get_current_object()
    monkeypatch.setattr(task, "queue", queue, raising=False)
    monkeypatch.setattr(task, "_exec_options", None)  # Celery caches the options with the queue

    def enqueued() -> list[int]:
        found = []
        while raw := broker.lpop(queue):
            body = json.loads(base64.b64decode(json.loads(raw)["body"]))
            found.append(body[1]["service_id"])  # Celery's message: (args, kwargs, embed)
        return found

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield enqueued
    broker.delete(queue)
    broker.close()


def record(revision, ready: int) -> None:
    key = (revision.service.team.slug, revision.service_id, revision.number)
    assert recording.record_observations(
        cluster_id=revision.service.cluster_id, seen=[(key, seen(ready))]
    )


def test_the_first_ready_replica_and_the_last_one_going_ask_for_a_reconcile(canary, reconciles):
    record(canary, 1)
    assert reconciles() == [canary.service_id]

    record(canary, 2)
    assert reconciles() == []

    record(canary, 0)
    assert reconciles() == [canary.service_id]
