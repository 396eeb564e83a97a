"""A grant booked ahead reaches the cluster on its first day and not before: the periodic sweep
(its clock given, as the beat's would be that day) records the start and passes over the team.

The approval's own pass runs in the worker with today's date; the sweeps run here, one with
today and one with the first day."""

import datetime

import pytest
from django.utils import timezone

from clusters.vocabulary import cluster_queue_name, resource_flavor_name
from reconcile import tasks
from tenants.models import AuditEvent

from .conftest import A100, in_sync, quota_hard

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

STARTED = AuditEvent.Action.QUOTA_GRANT_STARTED


def sweep(day: datetime.date) -> None:
    tasks.reconcile_sweep(today=day.isoformat())


def test_a_booked_grant_reaches_the_resource_quota_on_its_first_day_and_not_before(
    celery_worker_process, core, kube_cluster, make_team, approve
):
    team = make_team("a")
    today = timezone.localdate()
    first_day = today + datetime.timedelta(days=3)
    grant = approve(
        team, kube_cluster, gpus=4, starts_on=first_day, ends_on=first_day + datetime.timedelta(6)
    )
    in_sync(team, kube_cluster)
    assert quota_hard(core, team.slug)["requests.nvidia.com/gpu"] == "0"

    sweep(first_day - datetime.timedelta(days=1))

    assert quota_hard(core, team.slug)["requests.nvidia.com/gpu"] == "0"
    assert not AuditEvent.objects.filter(action=STARTED).exists()

    sweep(first_day)

    assert quota_hard(core, team.slug)["requests.nvidia.com/gpu"] == "4"
    started = AuditEvent.objects.get(action=STARTED)
    assert (started.target_id, started.team_id, started.actor) == (grant.pk, team.pk, None)
    state = in_sync(team, kube_cluster)
    assert state.applied_quota["requests.nvidia.com/gpu"] == "4"

    sweep(first_day)  # the next sweep that day records nothing new

    assert AuditEvent.objects.filter(action=STARTED).count() == 1


def test_in_kueue_mode_the_cluster_queue_gets_the_booked_gpus_on_the_first_day(
    kueue_portal, core, queue_cluster, make_team, approve
):
    portal, team = kueue_portal, make_team("a")
    today = timezone.localdate()
    first_day = today + datetime.timedelta(days=2)
    approve(team, queue_cluster, gpus=4, gpu_model=A100, starts_on=first_day)
    in_sync(team, queue_cluster)
    queue = cluster_queue_name(portal.name, team.slug, "guaranteed")
    flavor = resource_flavor_name(portal.name, A100)

    def nominal() -> str | None:
        return portal.objects.nominal_quota(queue).get(flavor)

    before = nominal()
    sweep(first_day - datetime.timedelta(days=1))
    assert nominal() == before
    assert before in (None, "0")

    sweep(first_day)

    assert nominal() == "4"
