"""One small world for the bad-input suites: two teams on one cluster (one in a department), a
pending request, an active grant, a job, a member's limit, a notification and audit events, so
that generated and hand-written inputs reach real objects as well as missing ones.

The cluster points at ports nothing listens on: reads of the cluster or of Prometheus fail at
once, and must answer as the schema says (502/503), never 500. Nothing reaches a worker: the
test's transaction never commits, so what services enqueue on commit is never sent.
"""

import datetime

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.utils import timezone

from billing.budgets import budget_set
from serving import services as serving_services
from serving.specs import DeployRequest
from tenants import quota, services
from tests import factories

UNREACHABLE = "http://127.0.0.1:9"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/abuse" in str(item.path):
            item.add_marker(pytest.mark.abuse)


@pytest.fixture
def world(db, cluster, team, other_team, lead, member, other_lead, admin, outsider):
    """The objects every suite here points at, by name."""
    cluster.prometheus_url = UNREACHABLE
    # A careful deployment's cluster: images from its own registry only.
    cluster.allowed_registries = ["registry.example.com/"]
    cluster.allow_all_registries = False
    cluster.save(update_fields=["prometheus_url", "allowed_registries", "allow_all_registries"])
    today = timezone.localdate()
    granted = quota.quota_request_create(
        requested_by=lead, team=team, cluster=cluster, gpus=4, justification="Training."
    )
    grant = quota.quota_request_approve(reviewer=admin, quota_request=granted)
    pending = quota.quota_request_create(
        requested_by=lead,
        team=team,
        cluster=cluster,
        gpus=2,
        starts_on=today + datetime.timedelta(days=1),
        ends_on=today + datetime.timedelta(days=10),
        justification="Evaluation.",
    )
    job = factories.GpuJobFactory(team=team, cluster=cluster, submitted_by=member)
    session = factories.InteractiveSessionFactory(
        team=team, cluster=cluster, owner=member, image="registry.example.com/notebook:1"
    )
    service = serving_services.service_deploy(
        user=member,
        team=team,
        cluster=cluster,
        request=DeployRequest.parse(
            {"name": "llm", "image": "registry.example.com/llm:1", "gpus": 1, "port": 8000}
        ),
    )
    archived = factories.TeamFactory(slug="archived", name="Archived")
    factories.TeamClusterFactory(team=archived, cluster=cluster)
    services.team_archive(actor=admin, team=archived, note="Done.")
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model="NVIDIA-A100-SXM4-80GB")
    department = factories.DepartmentFactory(slug="research", name="Research")
    team.department = department
    team.save(update_fields=["department"])
    notification = factories.NotificationFactory(user=lead, team=team)
    audit_event = grant.request.team.audit_events.order_by("pk").first()
    budget = budget_set(actor=admin, team=team, gpu_hours="1000")
    webhook = factories.WebhookFactory(team=team, name="chat")
    delivery = factories.DeliveryFactory(webhook=webhook)
    layout = factories.LayoutRequestFactory(
        source_grant=factories.QuotaGrantFactory(
            request__team=team,
            request__cluster=cluster,
            request__requested_by=lead,
            request__gpu_model="NVIDIA-A100-SXM4-80GB",
        ),
        requested_by=lead,
    )
    member_limit = factories.MemberLimitFactory(
        team=team, user=member, cluster=cluster, max_gpus=2, set_by=lead
    )
    return {
        "cluster": cluster,
        "team": team,
        "other_team": other_team,
        "lead": lead,
        "member": member,
        "admin": admin,
        "pending": pending,
        "grant": grant,
        "job": job,
        "service": service,
        "session": session,
        "notification": notification,
        "audit_event": audit_event,
        "budget": budget,
        "webhook": webhook,
        "layout": layout,
        "delivery": delivery,
        "member_limit": member_limit,
        "department": department,
        "outsider": outsider,
        "archived": archived,
        "today": today,
        "in_a_week": today + datetime.timedelta(days=7),
        "in_a_month": today + datetime.timedelta(days=30),
    }


@pytest.fixture
def in_process_requests():
    """Requests served by Django's WSGI handler inside the test's transaction. The handler closes
    "old" connections when a request starts and ends, which inside a test's transaction would
    close the test's own connection; Django's test client disconnects it the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
