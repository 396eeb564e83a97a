"""The lists answered from rows (``core.rows``) say exactly what their serializer says of the
same objects: every field, its type and its format, nulls included."""

import datetime
import json
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.renderers import JSONRenderer

from gpujobs.api.serializers import GpuJobSerializer
from gpujobs.selectors import jobs_visible_to
from tenants import selectors
from tenants.api.serializers.audit import AuditEventSerializer
from tenants.api.serializers.quota_grants import QuotaGrantSerializer
from tenants.api.serializers.quota_requests import QuotaRequestSerializer
from tenants.api.serializers.review import ReviewQueueItemSerializer
from tenants.api.serializers.teams import TeamSerializer
from tests import factories
from workloads.pod_states import Reason

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(team, other_team, cluster, lead, other_lead, admin):
    """Requests pending and decided, of one model and of any, with and without CPU and end;
    grants from some; audit events with and without a team."""
    today = timezone.localdate()
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model="H100", allocatable=8)
    pending = factories.QuotaRequestFactory(
        team=team,
        cluster=cluster,
        requested_by=lead,
        gpus=2,
        gpu_model="H100",
        cpu_cores=Decimal("3.5"),
        memory_gib=64,
        ends_on=today + datetime.timedelta(days=9),
    )
    factories.QuotaRequestFactory(team=other_team, cluster=cluster, requested_by=other_lead)
    decided = factories.QuotaRequestFactory(
        team=team,
        cluster=cluster,
        requested_by=lead,
        state="rejected",
        decided_by=admin,
        decided_at=timezone.now(),
        decision_note="no room",
    )
    factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        granted_by=admin,
        gpus=3,
    )
    factories.AuditEventFactory(team=team, actor=lead, after={"gpus": 2, "why": ["a"]})
    factories.AuditEventFactory(team=None, actor=admin, target_type="Cluster")
    return pending, decided


def listed(client, url) -> list[dict]:
    response = client.get(url, {"page_size": 100})
    assert response.status_code == 200, response.content
    return response.json()["results"]


def serialized(serializer_class, queryset, **context) -> list[dict]:
    data = serializer_class(queryset, many=True, context=context).data
    return json.loads(JSONRenderer().render(data))


@pytest.mark.parametrize("reader", ["admin", "lead"])
def test_quota_request_list_says_what_its_serializer_says(api, request, rows, reader):
    user = request.getfixturevalue(reader)

    answer = listed(api.as_user(user), "/api/v1/quota-requests/")

    expected = serialized(QuotaRequestSerializer, selectors.quota_requests_visible_to(user))
    assert len(answer) >= 2
    assert answer == expected


def test_review_queue_says_what_its_serializer_says(api, rows, admin):
    answer = listed(api.as_user(admin), "/api/v1/quota-requests/review-queue/")

    expected = serialized(
        ReviewQueueItemSerializer,
        selectors.review_queue(),
        capacity=selectors.capacity_summaries(),
        model_capacity=selectors.model_capacity_summaries(),
    )
    assert len(answer) == 2
    assert any(item["model_capacity"] is not None for item in answer)
    assert answer == expected


def test_grant_list_says_what_its_serializer_says(api, rows, lead):
    answer = listed(api.as_user(lead), "/api/v1/quota-grants/")

    expected = serialized(QuotaGrantSerializer, selectors.quota_grants_visible_to(lead))
    assert len(answer) == 1
    assert answer == expected


def test_audit_event_list_says_what_its_serializer_says(api, rows, admin):
    answer = listed(api.as_user(admin), "/api/v1/audit-events/")

    expected = serialized(AuditEventSerializer, selectors.audit_events_visible_to(admin))
    assert len(answer) >= 2
    assert answer == expected


def test_team_list_says_what_its_serializer_says(api, rows, lead):
    answer = listed(api.as_user(lead), "/api/v1/teams/")

    roles = {team.pk: "lead" for team in selectors.teams_visible_to(lead)}
    expected = serialized(TeamSerializer, selectors.teams_visible_to(lead), roles=roles)
    assert answer == expected
    assert answer[0]["my_role"] == "lead"


def test_job_list_says_what_its_serializer_says(api, team, cluster, lead, admin):
    factories.GpuJobFactory(
        team=team,
        cluster=cluster,
        submitted_by=lead,
        state="failed",
        exit_code=3,
        cpu_cores=Decimal("1.5"),
        env=[{"name": "EPOCHS", "value": "3"}],
        preprocess={"image": "registry.example.com/prep:1", "mode": "before"},
        annotations={"team/purpose": "eval"},
        command=["python", "train.py"],
        cancelled_by=admin,
    )
    factories.GpuJobFactory(
        team=team,
        cluster=cluster,
        submitted_by=lead,
        state="queued",
        reason=Reason.KUEUE_NOT_ADMITTING,
        message="Kueue does not admit jobs on this cluster now.",
    )

    answer = listed(api.as_user(lead), "/api/v1/jobs/")

    expected = serialized(GpuJobSerializer, jobs_visible_to(lead).order_by("-created_at", "-pk"))
    assert len(answer) == 2
    assert answer[0]["queue_status"] is not None
    assert answer == expected
