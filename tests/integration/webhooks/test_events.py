"""A team's events become deliveries to the team's webhooks that want them, in the transaction
of the change: a decision, a grant's reminder, a job's end, a budget threshold."""

import datetime

import pytest
from django.db import transaction

from billing import budget_checks
from billing.budgets import budget_set
from gpujobs.models import GpuJob
from gpujobs.observe import Observation
from gpujobs.recording import OBSERVED_FIELDS, record_finished, record_observation
from monitoring import grant_reminders
from monitoring.models import Notification
from tenants import quota
from tests import factories
from webhooks.models import Delivery

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(team):
    """The team's generic-JSON webhook for every kind of event."""
    from tenants.events import EventKind

    return factories.WebhookFactory(team=team, name="all", events=list(EventKind.values))


@pytest.fixture
def quota_request(team, cluster, lead):
    return quota.quota_request_create(
        requested_by=lead, team=team, cluster=cluster, gpus=4, justification="Training."
    )


def test_an_approval_is_delivered_to_the_teams_webhook(hook, quota_request, admin):
    grant = quota.quota_request_approve(reviewer=admin, quota_request=quota_request, gpus=2)

    (delivery,) = Delivery.objects.all()
    assert delivery.webhook == hook
    assert delivery.event == "quota_request.decided"
    assert delivery.status == "pending"
    payload = delivery.payload
    assert payload["event"] == "quota_request.decided"
    assert payload["team"]["slug"] == quota_request.team.slug
    assert payload["data"]["state"] == "approved"
    assert payload["data"]["gpus_requested"] == 4
    assert payload["data"]["gpus_granted"] == 2
    assert payload["data"]["grant_id"] == grant.pk
    assert payload["title"].endswith("was approved for 2 GPUs")
    assert payload["link"] == f"http://127.0.0.1:8000/teams/{quota_request.team.slug}/"


def test_a_rejection_in_slack_format_reads_as_a_chat_message(team, quota_request, admin):
    factories.WebhookFactory(team=team, format="slack", events=["quota_request.decided"])

    quota.quota_request_reject(reviewer=admin, quota_request=quota_request, note="No room.")

    payload = Delivery.objects.get().payload
    assert set(payload) == {"text", "blocks"}
    assert f"Quota request #{quota_request.pk} of {team.slug}" in payload["text"]
    assert "was rejected" in payload["text"]
    assert {"type": "mrkdwn", "text": "*note*\nNo room."} in payload["blocks"][1]["fields"]


def test_only_active_webhooks_of_the_team_that_want_the_event_get_it(
    team, other_team, quota_request, admin
):
    wants = factories.WebhookFactory(team=team, events=["gpu_job.failed", "quota_request.decided"])
    factories.WebhookFactory(team=team, events=["gpu_job.failed"])
    factories.WebhookFactory(team=team, events=["quota_request.decided"], active=False)
    factories.WebhookFactory(team=other_team, events=["quota_request.decided"])

    quota.quota_request_reject(reviewer=admin, quota_request=quota_request, note="No.")

    assert [d.webhook for d in Delivery.objects.all()] == [wants]


def test_a_change_rolled_back_leaves_no_delivery(hook, quota_request, admin):
    def decide_then_fail():
        with transaction.atomic():
            quota.quota_request_reject(reviewer=admin, quota_request=quota_request, note="No.")
            raise RuntimeError("the caller's transaction fails after the decision")

    with pytest.raises(RuntimeError):
        decide_then_fail()

    assert not Delivery.objects.exists()


def test_a_grant_ending_soon_is_delivered_once(hook, team, cluster, lead, admin):
    grant = factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=8,
        request__starts_on=datetime.date(2027, 2, 1),
        request__ends_on=datetime.date(2027, 3, 10),
        granted_by=admin,
    )
    for _ in range(2):
        grant_reminders.grant_ending_reminders_send(today=datetime.date(2027, 3, 3), days=7)

    (delivery,) = Delivery.objects.all()
    assert delivery.event == "quota_grant.ending"
    assert delivery.payload["data"]["grant_id"] == grant.pk
    assert delivery.payload["data"]["days_left"] == 7
    assert (
        delivery.payload["title"]
        == f"Grant #{grant.pk} of {team.slug} (8 × nvidia.com/gpu on {cluster.name}) ends in 7 days"
    )


def _job(team, cluster, state=GpuJob.State.RUNNING):
    return factories.GpuJobFactory(team=team, cluster=cluster, state=state, kube_uid="uid-1")


def test_a_job_the_watcher_sees_fail_is_delivered(hook, team, cluster):
    job = _job(team, cluster)
    row = GpuJob.objects.filter(pk=job.pk).values(*OBSERVED_FIELDS).get()
    failed = Observation(state="failed", exit_code=3, reason="BackoffLimitExceeded", message="x")

    assert record_observation(row, failed, kube_uid="uid-1", now=job.created_at) == 1

    (delivery,) = Delivery.objects.all()
    assert delivery.event == "gpu_job.failed"
    assert delivery.payload["data"]["job_id"] == job.pk
    assert delivery.payload["data"]["exit_code"] == 3
    assert delivery.payload["data"]["reason"] == "BackoffLimitExceeded"
    assert delivery.payload["link"].endswith(f"/jobs/{job.pk}/")


def test_a_job_that_succeeds_is_delivered_once(hook, team, cluster):
    job = _job(team, cluster)
    done = Observation(state="succeeded", exit_code=0)
    for _ in range(2):
        row = GpuJob.objects.filter(pk=job.pk).values(*OBSERVED_FIELDS).get()
        record_observation(row, done, kube_uid="uid-1", now=job.created_at)

    assert [d.event for d in Delivery.objects.all()] == ["gpu_job.succeeded"]


def test_a_preemption_is_delivered_once_with_who_preempted_the_job(hook, team, cluster):
    job = _job(team, cluster)
    GpuJob.objects.filter(pk=job.pk).update(priority="opportunistic", queue_name="opportunistic")
    at = job.created_at + datetime.timedelta(minutes=5)
    preempted = Observation(
        state="pending",
        reason="Preempted",
        message="Preempted (to reclaim nominal quota); waiting in the queue again.",
        preemptions=1,
        preempted_at=at,
        preemption_reason="to reclaim nominal quota",
    )
    for _ in range(2):  # the watcher sees the same preemption twice: one delivery
        row = GpuJob.objects.filter(pk=job.pk).values(*OBSERVED_FIELDS).get()
        record_observation(
            row, preempted, kube_uid="uid-1", now=at, preemptor="job #9 of team lender"
        )

    (delivery,) = Delivery.objects.all()
    assert delivery.event == "gpu_job.preempted"
    data = delivery.payload["data"]
    assert (data["job_id"], data["priority"], data["preemptions"]) == (job.pk, "opportunistic", 1)
    assert data["preempted_by"] == "job #9 of team lender"
    assert data["reason"] == "to reclaim nominal quota"
    assert data["preempted_at"] == at.isoformat()
    assert delivery.payload["title"].endswith("preempted on gpu-east by job #9 of team lender")
    assert delivery.payload["link"].endswith(f"/jobs/{job.pk}/")
    # Its owner is told too, in the portal.
    (notice,) = Notification.objects.filter(user=job.submitted_by)
    assert notice.kind == "job_preempted"
    assert "by job #9 of team lender" in notice.body


def test_a_job_running_or_cancelled_is_not_delivered(hook, team, cluster):
    job = _job(team, cluster, state=GpuJob.State.PENDING)
    row = GpuJob.objects.filter(pk=job.pk).values(*OBSERVED_FIELDS).get()
    record_observation(row, Observation(state="running"), kube_uid="uid-1", now=job.created_at)
    record_finished(job.pk, state="cancelled", reason="Stopped", message="", only_from=["running"])

    assert not Delivery.objects.exists()


def test_a_job_that_could_not_be_created_is_delivered_as_failed(hook, team, cluster):
    job = _job(team, cluster, state=GpuJob.State.QUEUED)

    record_finished(
        job.pk, state="failed", reason="SubmitFailed", message="no", only_from=["queued"]
    )

    assert Delivery.objects.get().event == "gpu_job.failed"


def test_a_spent_budget_is_delivered_once_per_period(hook, team, admin):
    budget_set(actor=admin, team=team, gpu_hours="0")
    for _ in range(2):
        budget_checks.budgets_check()

    (delivery,) = Delivery.objects.all()
    assert delivery.event == "budget.exhausted"
    assert delivery.payload["data"]["budget_gpu_hours"] == "0.0000"
    assert delivery.payload["link"].endswith(f"/billing/teams/{team.slug}/budgets/")


@pytest.fixture
def failing_receiver():
    """Another listener of the events that fails on every event."""
    from tenants.events import event_emitted

    def fail(sender, *, event, **kwargs):
        raise RuntimeError("a listener fails")

    event_emitted.connect(fail, dispatch_uid="test-failing-listener")
    yield
    event_emitted.disconnect(dispatch_uid="test-failing-listener")


@pytest.mark.usefixtures("failing_receiver")
def test_a_listener_that_fails_undoes_neither_the_change_nor_the_delivery(
    hook, quota_request, admin, caplog
):
    quota.quota_request_reject(reviewer=admin, quota_request=quota_request, note="No.")

    quota_request.refresh_from_db()
    assert quota_request.state == "rejected"
    assert Delivery.objects.get().event == "quota_request.decided"
    assert "a listener fails" in caplog.text
