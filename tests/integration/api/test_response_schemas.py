"""Every GET operation answers as the OpenAPI schema says, field by field: the real answers of
each list and detail operation of the schema ``/api/v1/schema/`` serves, validated against
that operation's response schema for the status it answered with.

Twice: in a bare world, where everything optional is absent (a team without a budget or a
department, a request nobody decided, an open-ended grant, a job that never started, a
delivery never tried, an audit event without actor or team, a cluster without Prometheus or
Kueue), so every field that can be null is null; and in a rich one, where it is all there
(budgets with their spending, nested departments with ceilings, decided requests and ended
grants, jobs with every timestamp and jobs waiting in Kueue, services with revisions and
sidecars, deliveries tried, read notifications, used tokens). A field the API answers null for
must be ``nullable`` in the schema; one it fills must have the declared type.

The operations come from the schema itself, so a new GET operation is called here without a
change to this file: its path is filled from the world's objects (or the test says which it
lacks), its required query parameters from ``query``. Only those in ``SKIPPED`` are left out,
each with its reason, and each of them must still be in the schema.

The schema is OpenAPI 3.0: ``nullable: true`` becomes a union with null, and ``$ref``s are
resolved against the schema's components, for a JSON Schema (2020-12) validator. Date-times
are checked as ISO 8601 with a time zone, dates as ISO 8601 dates.
"""

import datetime
import re
from decimal import Decimal

import jsonschema
import pytest
from django.conf import settings
from django.utils import timezone

from accounts.models import ApiToken
from billing import periods
from billing.budgets import budget_set
from billing.models import BudgetSpend
from billing.prices import price_set
from clusters.models import GpuModelCapacity, QuotaMode
from gpujobs.models import GpuJob
from gpujobs.queues import gpu_pod_holding, record_snapshot, snapshot_fields
from monitoring import dashboards, metrics
from monitoring.models import Notification
from monitoring.prometheus import Sample, Series
from serving.models import InferenceService, Revision
from sharing import grants as sharing_grants
from tenants import quota, services
from tenants.models import DepartmentCeiling, Membership, TeamCluster
from tenants.queueing import team_queue_policy_set
from tests import factories
from webhooks.models import Delivery
from workloads.pod_states import Reason

pytestmark = pytest.mark.django_db

# GET operations that cannot answer 200 in process, by operationId: they read the cluster or
# Prometheus, which the devcluster and Prometheus tests have (``make test``).
SKIPPED = {
    "jobs_logs_retrieve": "reads the pod's log from the cluster",
    "jobs_events_list": "reads the Job's events from the cluster",
    "services_logs_retrieve": "reads a replica's log from the cluster",
    "services_events_list": "reads the Deployment's events from the cluster",
    "monitoring_teams_pods_retrieve": "asks Prometheus",
    "monitoring_teams_utilisation_retrieve": "asks Prometheus",
}

A100 = "NVIDIA-A100-SXM4-80GB"
FLAVOR = "gpu-portal-nvidia-a100-sxm4-80gb"
MODEL_LABEL = "nvidia.com/gpu.product"


# --- the schema as JSON Schema -------------------------------------------------------------------


def json_schema(node):
    """An OpenAPI 3.0 schema as JSON Schema: ``nullable: true`` becomes a union with null."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    # ``nullable`` the keyword is a boolean; a property of that name would be a schema.
    converted = {
        key: json_schema(value)
        for key, value in node.items()
        if not (key == "nullable" and isinstance(value, bool))
    }
    if node.get("nullable") is True:
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value) -> bool:
    if not isinstance(value, str):
        return True
    return datetime.datetime.fromisoformat(value).tzinfo is not None


def response_problems(schema: dict, operation: dict, response) -> list[str]:
    """What is wrong with ``response`` by the schema's answer for its status (empty: nothing)."""
    declared = operation["responses"].get(str(response.status_code))
    if declared is None:
        return [f"answered {response.status_code}, which the schema does not declare"]
    content = declared.get("content", {})
    if "application/json" not in content:
        return [] if not response.content else [f"{response.status_code} declares no JSON body"]
    root = {
        **json_schema(content["application/json"]["schema"]),
        "components": json_schema(schema["components"]),
    }
    validator = jsonschema.Draft202012Validator(root, format_checker=FORMATS)
    return [
        f"{error.json_path}: {error.message}"
        for error in sorted(validator.iter_errors(response.json()), key=lambda e: e.json_path)
    ]


def get_operations(schema: dict) -> dict[str, tuple[str, dict]]:
    """Every GET operation of the schema: operationId -> (path, operation)."""
    return {
        item["get"]["operationId"]: (path, item["get"])
        for path, item in schema["paths"].items()
        if "get" in item
    }


def served_schema(api, user) -> dict:
    response = api.as_user(user).get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


# --- calling every operation ---------------------------------------------------------------------


def path_values(path: str, world: dict) -> list[dict[str, str]]:
    """The values of the path's parameters for each of the world's objects it names (the
    longest prefix of the path that the world knows)."""
    names = re.findall(r"{(\w+)}", path)
    if not names:
        return [{}]
    prefix = max((p for p in world["paths"] if path.startswith(p)), key=len, default=None)
    assert prefix is not None, f"{path}: the world has no objects for it: add them to `paths`"
    values = world["paths"][prefix]
    for given in values:
        missing = set(names) - set(given)
        assert not missing, f"{path}: the world's objects under {prefix} lack {sorted(missing)}"
    return [{name: str(given[name]) for name in names} for given in values]


def required_query(operation: dict, world: dict) -> dict[str, str]:
    wanted = [
        p["name"]
        for p in operation.get("parameters", [])
        if p["in"] == "query" and p.get("required")
    ]
    missing = [name for name in wanted if name not in world["query"]]
    assert not missing, f"{operation['operationId']}: no value for {missing}: add it to `query`"
    return {name: world["query"][name] for name in wanted}


def items_of(body) -> list | None:
    """A list's items (a page's results), or None when the body is no list."""
    if isinstance(body, list):
        return body
    if isinstance(body, dict) and isinstance(body.get("results"), list) and "count" in body:
        return body["results"]
    return None


def check_every_get_operation(api, world: dict) -> None:
    schema = served_schema(api, world["callers"][0])
    problems = []
    for operation_id, (path, operation) in sorted(get_operations(schema).items()):
        if operation_id in SKIPPED:
            continue
        query = required_query(operation, world)
        answered_ok = is_list = listed = False
        for values in path_values(path, world):
            url = re.sub(r"{(\w+)}", lambda m, v=values: v[m.group(1)], path)
            for user in world["callers"]:
                response = api.as_user(user).get(url, query)
                for problem in response_problems(schema, operation, response):
                    problems.append(
                        f"{operation_id} GET {url} as {user.username} "
                        f"({response.status_code}): {problem}"
                    )
                if response.status_code == 200:
                    answered_ok = True
                    items = items_of(response.json())
                    is_list = is_list or items is not None
                    listed = listed or bool(items)
        if not answered_ok:
            problems.append(f"{operation_id} GET {path}: no caller got a 200")
        elif is_list and not listed:
            problems.append(f"{operation_id} GET {path}: every list was empty: add objects")
    assert not problems, "\n".join(problems)


# --- the worlds ----------------------------------------------------------------------------------


def _token(user, *, used_at=None) -> ApiToken:
    token, _ = ApiToken.objects.create(user=user, expiry=datetime.timedelta(days=1))
    if used_at is not None:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=used_at)
    return token


@pytest.fixture
def bare_world(team, lead, admin, cluster, today):
    """Everything optional absent: no department, budget, Kueue or Prometheus for the team,
    nothing decided, started, tried, read or used."""
    assert not cluster.prometheus_url
    pending = factories.QuotaRequestFactory(
        team=team, cluster=cluster, requested_by=lead, gpus=2, ends_on=None
    )
    grant = factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__starts_on=today - datetime.timedelta(days=3),
        request__ends_on=None,
        granted_by=admin,
    )
    job = factories.GpuJobFactory(team=team, cluster=cluster, submitted_by=lead)
    session = factories.InteractiveSessionFactory(team=team, cluster=cluster, owner=lead)
    service = factories.InferenceServiceFactory(team=team, cluster=cluster, created_by=lead)
    factories.RevisionFactory(service=service)
    webhook = factories.WebhookFactory(team=team)
    delivery = factories.DeliveryFactory(webhook=webhook, next_attempt_at=None)
    event = factories.AuditEventFactory(team=None, actor=None, before=None, after=None)
    department = factories.DepartmentFactory(slug="bare")
    # A department's budget (no team), never checked; the team itself has none.
    budget_set(actor=admin, department=department, gpu_hours="0")
    factories.TeamClusterFactory(team=team, cluster=cluster)
    factories.TeamQueuePolicyFactory(team=team, cluster=cluster)
    # A pending sharing layout: nothing decided, picked or granted yet.
    layout = factories.LayoutRequestFactory(
        source_grant=factories.QuotaGrantFactory(
            request__team=team, request__cluster=cluster, request__gpu_model=A100
        ),
        requested_by=lead,
    )
    price_set(actor=admin, effective_from=today.replace(day=1).isoformat(), gpu_hour="2")
    # A limit of running work only, whose setter is gone, on a member who holds nothing.
    limit = factories.MemberLimitFactory(
        team=team, user=lead, cluster=cluster, max_gpus=None, max_running=1, set_by=None
    )
    for user in (admin, lead):
        factories.NotificationFactory(user=user, team=None)
        _token(user)
    team_values = {
        "slug": team.slug,
        "team_slug": team.slug,
        "username": lead.username,
        "cluster": cluster.name,
    }
    return {
        "callers": [admin, lead],
        "paths": {
            "/api/v1/quota-requests/": [{"id": pending.pk}],
            "/api/v1/quota-grants/": [{"id": grant.pk}],
            "/api/v1/jobs/": [{"id": job.pk}],
            "/api/v1/services/": [{"id": service.pk}],
            "/api/v1/sessions/": [{"id": session.pk}],
            "/api/v1/audit-events/": [{"id": event.pk}],
            "/api/v1/teams/{team_slug}/webhooks/": [{**team_values, "id": webhook.pk}],
            "/api/v1/teams/{team_slug}/webhook-deliveries/": [{**team_values, "id": delivery.pk}],
            "/api/v1/teams/{team_slug}/member-limits/": [{**team_values, "id": limit.pk}],
            "/api/v1/teams/": [team_values],
            "/api/v1/clusters/": [{"name": cluster.name}],
            "/api/v1/departments/": [{"slug": department.slug}],
            "/api/v1/sharing-layouts/": [{"id": layout.pk}],
        },
        # More GPUs than the cluster has: no window is found.
        "query": {
            "cluster": cluster.name,
            "gpus": settings.PORTAL_MAX_GPUS_PER_REQUEST,
            "days": 1,
        },
    }


def _cluster_queue(
    name: str,
    slug: str,
    *,
    nominal: int,
    used: int = 0,
    borrowed: int = 0,
    pending: int = 0,
    borrowing_limit: int | None = None,
) -> dict:
    resource = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if borrowing_limit is not None:
        resource["borrowingLimit"] = borrowing_limit
    return {
        "metadata": {"name": name},
        "spec": {
            "cohortName": "gpu-portal",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": slug}},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": FLAVOR, "resources": [resource]}],
                }
            ],
        },
        "status": {
            "pendingWorkloads": pending,
            "flavorsReservation": [
                {
                    "name": FLAVOR,
                    "resources": [
                        {"name": "nvidia.com/gpu", "total": str(used), "borrowed": str(borrowed)}
                    ],
                }
            ],
        },
    }


def _pending_workload(job: GpuJob, *, position: int) -> dict:
    return {
        "metadata": {
            "name": f"job-gpujob-{job.pk}-x",
            "namespace": job.team.slug,
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "ownerReferences": [{"kind": "Job", "name": f"gpujob-{job.pk}"}],
        },
        "priority": 1000,
        "localQueueName": "guaranteed",
        "positionInClusterQueue": position,
        "positionInLocalQueue": position,
    }


def _bound_pod(namespace: str, name: str, *, gpus: int) -> dict:
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}"},
        "spec": {
            "nodeName": "gpu-node-1",
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {"phase": "Running"},
    }


@pytest.fixture
def rich_world(team, other_team, lead, member, viewer, admin, cluster, research, dept_admin, today):
    """Everything optional there: the team in a nested department with ceilings and budgets
    that were checked, on a Kueue cluster with the watcher's snapshot, with decided requests,
    ended grants, jobs in every stage, services mid-rollout, deliveries tried."""
    now = timezone.now()
    earlier = now - datetime.timedelta(hours=3)
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.gateway_api = True
    cluster.save(update_fields=["quota_mode", "gateway_api"])
    GpuModelCapacity.objects.filter(cluster=cluster).update(allocatable=32, nodes=4)
    child = factories.DepartmentFactory(slug="research-vision", parent=research)
    child.admins.add(dept_admin)
    DepartmentCeiling.objects.create(department=child, cluster=cluster, gpu_model=A100, gpus=4)
    factories.MembershipFactory(team=other_team, user=member, role=Membership.Role.VIEWER)

    # Quota: a decided request and its grant (of a model, ending), a rejected one, a revoked
    # grant, and a pending request of a model that a department admin may decide.
    approved = quota.quota_request_create(
        requested_by=lead,
        team=team,
        cluster=cluster,
        gpus=4,
        gpu_model=A100,
        cpu_cores=Decimal("16.5"),
        memory_gib=64,
        ends_on=today + datetime.timedelta(days=30),
        justification="Training.",
    )
    grant = quota.quota_request_approve(reviewer=admin, quota_request=approved, note="Fine.")
    rejected = quota.quota_request_create(
        requested_by=lead, team=team, cluster=cluster, gpus=1, justification="Too much."
    )
    quota.quota_request_reject(reviewer=admin, quota_request=rejected, note="Not now.")
    revoked = quota.quota_request_approve(
        reviewer=admin,
        quota_request=quota.quota_request_create(
            requested_by=lead, team=team, cluster=cluster, gpus=1, justification="Short."
        ),
    )
    quota.quota_grant_revoke(actor=admin, grant=revoked, note="Done.")
    pending = quota.quota_request_create(
        requested_by=lead,
        team=team,
        cluster=cluster,
        gpus=2,
        gpu_model=A100,
        cpu_cores=Decimal(4),
        memory_gib=16,
        starts_on=today + datetime.timedelta(days=1),
        ends_on=today + datetime.timedelta(days=10),
        justification="Evaluation.",
    )

    # Jobs: one that ran and was cancelled (every field filled), one running in Kueue, one
    # waiting in Kueue's queue, one held back while Kueue does not admit.
    finished = factories.GpuJobFactory(
        team=team,
        cluster=cluster,
        submitted_by=member,
        state=GpuJob.State.CANCELLED,
        reason=Reason.CANCELLED,
        message="Cancelled by lena-lead.",
        node="gpu-node-1",
        exit_code=137,
        kube_uid="0b1c2d3e",
        claimed_at=earlier,
        submitted_at=earlier,
        started_at=earlier,
        finished_at=now,
        state_changed_at=now,
        cancelled_by=lead,
        command=["python"],
        args=["train.py", "--epochs=3"],
        env=[{"name": "SEED", "value": "1"}],
        gpus=2,
        gpu_model=A100,
        cpu_cores=Decimal("8.50"),
        memory_gib=Decimal("32.00"),
        backoff_limit=2,
        preprocess={
            "image": "registry.example.com/prep:1",
            "mode": "before",
            "command": ["prep"],
            "args": ["--fast"],
            "cpu_cores": "1.50",
            "memory_gib": "2.00",
        },
        annotations={"example.com/owner": "vision"},
        pods=["gpujob-1-abcde"],
        queue_name="guaranteed",
        admitted_at=earlier,
        admitted_flavor=FLAVOR,
        preemptions=1,
        preempted_at=earlier,
        preempted_by="speech/gpujob-9",
        preemption_reason="Preempted.",
    )
    running = factories.GpuJobFactory(
        team=team,
        cluster=cluster,
        submitted_by=member,
        state=GpuJob.State.RUNNING,
        reason=Reason.ADMITTED,
        gpus=2,
        gpu_model=A100,
        queue_name="guaranteed",
        submitted_at=earlier,
        admitted_at=earlier,
        admitted_flavor=FLAVOR,
        started_at=earlier,
        state_changed_at=earlier,
        node="gpu-node-1",
        pods=["gpujob-2-abcde"],
        kube_uid="1b",
    )
    waiting = factories.GpuJobFactory(
        team=team,
        cluster=cluster,
        submitted_by=member,
        state=GpuJob.State.PENDING,
        reason=Reason.IN_QUEUE,
        message="Waits for GPUs.",
        gpus=3,
        gpu_model=A100,
        queue_name="guaranteed",
        submitted_at=earlier,
        state_changed_at=earlier,
    )
    held_back = factories.GpuJobFactory(
        team=team,
        cluster=cluster,
        submitted_by=member,
        state=GpuJob.State.QUEUED,
        reason=Reason.KUEUE_NOT_ADMITTING,
        message="Kueue is not admitting.",
        state_changed_at=earlier,
    )
    fields = snapshot_fields(
        cluster_queues=[
            _cluster_queue("gpu-portal-vision", "vision", nominal=4, used=2, pending=1),
            _cluster_queue(
                "gpu-portal-vision-opportunistic", "vision", nominal=0, borrowing_limit=2
            ),
            _cluster_queue("gpu-portal-speech", "speech", nominal=4),
            _cluster_queue(
                "gpu-portal-speech-opportunistic",
                "speech",
                nominal=0,
                used=2,
                borrowed=2,
                borrowing_limit=4,
            ),
        ],
        resource_flavors=[
            {"metadata": {"name": FLAVOR}, "spec": {"nodeLabels": {MODEL_LABEL: A100}}}
        ],
        pending={"gpu-portal-vision": [_pending_workload(waiting, position=0)]},
        portal_name="gpu-portal",
        gpu_model_label=MODEL_LABEL,
        gpu_pods=[gpu_pod_holding(_bound_pod("vision", "notebook-by-hand", gpus=1))],
    )
    record_snapshot(cluster.pk, fields, now=now)

    # Services: one mid-canary (a stable revision with a sidecar, a candidate, a retired
    # one), one stopped and deleted.
    service = factories.InferenceServiceFactory(
        team=team,
        cluster=cluster,
        created_by=lead,
        rollout=InferenceService.Rollout.CANARY,
        routing=InferenceService.Routing.GATEWAY_API,
        status="in_sync",
        last_applied_at=earlier,
        last_reconciled_at=now,
    )
    factories.RevisionFactory(
        service=service,
        number=1,
        role=Revision.Role.RETIRED,
        weight=0,
        replicas=1,
        retired_at=earlier,
        observed_at=earlier,
    )
    factories.RevisionFactory(
        service=service,
        number=2,
        role=Revision.Role.STABLE,
        weight=90,
        replicas=2,
        desired_replicas=2,
        current_replicas=2,
        ready_replicas=2,
        observed_at=now,
        command=["serve"],
        args=["--port=8000"],
        env=[{"name": "MODEL", "value": "llm"}],
        cpu_cores=Decimal("4.00"),
        memory_gib=Decimal("16.00"),
        gpu_model=A100,
        pods=["llm-2-abc"],
        nodes=["gpu-node-1"],
        annotations={"example.com/a": "b"},
        sidecar={
            "image": "registry.example.com/prep:1",
            "command": ["prep"],
            "args": [],
            "env": [{"name": "A", "value": "b"}],
            "cpu_cores": "0.50",
            "memory_gib": "1.00",
        },
    )
    factories.RevisionFactory(
        service=service,
        number=3,
        role=Revision.Role.CANDIDATE,
        weight=10,
        variant="b",
        observed_at=now,
        reason="Progressing",
        message="1 of 1 ready.",
    )
    stopped = factories.InferenceServiceFactory(
        team=team,
        cluster=cluster,
        created_by=lead,
        state=InferenceService.State.DELETED,
        stopped_at=earlier,
        deleted_at=now,
        last_error="Gone.",
    )
    factories.RevisionFactory(service=stopped, number=1, retired_at=now)
    factories.HomeVolumeFactory(team=team, cluster=cluster, owner=lead)
    running_session = factories.InteractiveSessionFactory(
        team=team,
        cluster=cluster,
        owner=lead,
        gpus=1,
        gpu_model="A100",
        state="running",
        reason="Started",
        message="Its server is up: open it.",
        queue_name="guaranteed",
        node="gpu-node-1",
        server_address="10.0.0.9:8888",
        started_at=earlier,
        last_activity_at=earlier,
        idle_since=earlier,
        idle_checked_at=now,
        warned_at=now,
    )
    stopped_session = factories.InteractiveSessionFactory(
        team=team,
        cluster=cluster,
        owner=lead,
        state="stopped",
        stop_reason="idle",
        started_at=earlier,
        stopped_at=now,
        stopped_by=lead,
    )

    # Webhooks: a delivery that got through, one that failed.
    webhook = factories.WebhookFactory(
        team=team, events=["gpu_job.failed", "quota_request.decided"]
    )
    delivered = factories.DeliveryFactory(
        webhook=webhook,
        status=Delivery.Status.SUCCEEDED,
        attempts=1,
        response_code=200,
        last_attempt_at=now,
        delivered_at=now,
        next_attempt_at=None,
    )
    factories.DeliveryFactory(
        webhook=webhook,
        status=Delivery.Status.FAILED,
        attempts=5,
        response_code=500,
        error="Server error.",
        last_attempt_at=now,
        next_attempt_at=None,
    )

    # Billing: the team's budget and the department's, both checked this month; prices.
    team_budget = budget_set(actor=admin, team=team, gpu_hours="1000")
    department_budget = budget_set(
        actor=admin,
        department=research,
        period="quarter",
        gpu_model=A100,
        gpu_hours="5000",
        policy="opportunistic",
    )
    for budget, spent in ((team_budget, 900.25), (department_budget, 12.5)):
        BudgetSpend.objects.create(
            budget=budget,
            period_start=periods.period_start(budget.period, today),
            spent_gpu_hours=spent,
            checked_at=now,
            warned_at=now,
            exhausted_at=now,
        )
    month = today.replace(day=1).isoformat()
    price_set(actor=admin, effective_from=month, gpu_hour="2.5")
    price_set(
        actor=admin,
        gpu_model=A100,
        effective_from=month,
        gpu_hour="3.125",
        cpu_core_hour="0.01",
        memory_gib_hour="0.002",
    )

    # The team's namespaces (the grants' reconcile made the rows): reconciled, with an error
    # since; an archived team's, deleted.
    TeamCluster.objects.update_or_create(
        team=team,
        cluster=cluster,
        defaults={
            "status": TeamCluster.Status.ERROR,
            "reconcile_requested_at": now,
            "last_applied_at": earlier,
            "last_reconciled_at": now,
            "applied_quota": {"requests.nvidia.com/gpu": "4"},
            "last_error": "Refused.",
            "last_error_at": now,
            "consecutive_failures": 2,
            "namespace_owned": True,
        },
    )
    archived = factories.TeamFactory(slug="archived", name="Archived", department=child)
    services.team_archive(actor=admin, team=archived, note="Done.")
    TeamCluster.objects.update_or_create(
        team=archived,
        cluster=cluster,
        defaults={
            "status": TeamCluster.Status.DELETED,
            "namespace_delete_requested_at": earlier,
            "namespace_deleted_at": now,
            "namespace_owned": False,
        },
    )
    team_queue_policy_set(
        actor=admin,
        team=team,
        cluster=cluster,
        borrowing_limit=2,
        lending_limit=1,
        fair_sharing_weight=Decimal("2.5"),
    )

    for user in (admin, lead, dept_admin):
        factories.NotificationFactory(
            user=user,
            team=team,
            kind=Notification.Kind.BUDGET_WARNING,
            body="80% spent.",
            link="/billing/",
            read_at=now,
        )
        _token(user, used_at=now)
    # A sharing layout that was applied and reverted: decided, nodes picked, slices granted and
    # the whole GPUs given back.
    layout = factories.LayoutRequestFactory(
        source_grant=grant,
        requested_by=lead,
        gpus=1,
        kind="shared",
        mig_profile="",
        replicas=4,
        slices=4,
        state="applying",
        decided_by=admin,
        decided_at=earlier,
        decision_note="Fine.",
        nodes=["gpu-node-1"],
        node_gpus={"gpu-node-1": 1},
        progress="Reverted.",
        error="",
        applied_at=earlier,
        reverted_at=now,
    )
    sharing_grants.convert(layout)
    sharing_grants.give_back(layout)
    layout.state = "reverted"
    layout.save()
    # A member's limit of both, set by a lead, with jobs of theirs holding GPUs.
    limit = factories.MemberLimitFactory(
        team=team, user=member, cluster=cluster, max_gpus=8, max_running=4, set_by=lead
    )
    event = team.audit_events.exclude(actor=None).exclude(before=None).order_by("pk").first()
    team_values = {
        "slug": team.slug,
        "team_slug": team.slug,
        "username": lead.username,
        "cluster": cluster.name,
    }
    return {
        "callers": [admin, lead, dept_admin],
        "paths": {
            "/api/v1/quota-requests/": [{"id": r.pk} for r in (approved, rejected, pending)],
            "/api/v1/quota-grants/": [{"id": grant.pk}, {"id": revoked.pk}],
            "/api/v1/jobs/": [{"id": j.pk} for j in (finished, running, waiting, held_back)],
            "/api/v1/services/": [{"id": service.pk}, {"id": stopped.pk}],
            "/api/v1/sessions/": [{"id": running_session.pk}, {"id": stopped_session.pk}],
            "/api/v1/audit-events/": [{"id": event.pk}],
            "/api/v1/teams/{team_slug}/webhooks/": [{**team_values, "id": webhook.pk}],
            "/api/v1/teams/{team_slug}/webhook-deliveries/": [{**team_values, "id": delivered.pk}],
            "/api/v1/teams/{team_slug}/member-limits/": [{**team_values, "id": limit.pk}],
            "/api/v1/teams/": [team_values, {**team_values, "slug": archived.slug}],
            "/api/v1/clusters/": [{"name": cluster.name}],
            "/api/v1/departments/": [{"slug": research.slug}, {"slug": child.slug}],
            "/api/v1/sharing-layouts/": [{"id": layout.pk}],
        },
        "query": {"cluster": cluster.name, "gpus": 1, "days": 1},
    }


# --- the tests -----------------------------------------------------------------------------------


def test_every_get_operation_answers_as_its_schema_says_with_everything_optional_absent(
    api, bare_world
):
    check_every_get_operation(api, bare_world)


def test_every_get_operation_answers_as_its_schema_says_with_everything_there(api, rich_world):
    check_every_get_operation(api, rich_world)


def test_the_skipped_operations_are_in_the_schema(api, admin):
    operations = get_operations(served_schema(api, admin))

    assert set(SKIPPED) <= set(operations), set(SKIPPED) - set(operations)


class _SlicedPrometheus:
    """A Prometheus whose only answer is a pod holding two 1g.10gb slices (for the operations
    ``SKIPPED`` because they ask the real one): enough for their answers' every field."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def query_range(self, query, *, start, end, step):
        return [Series({"namespace": "vision", "pod": "nb"}, [start], [12.5])]

    def query(self, query, *, at=None):
        labels = {"namespace": "vision", "pod": "nb"}
        if query.startswith("count by"):
            labels |= {"Hostname": "mig-0", "modelName": "NVIDIA A100-SXM4-80GB"}
            return [Sample(labels | {"GPU_I_PROFILE": "1g.10gb"}, 2.0)]
        return [Sample(labels, 12.5)]


@pytest.mark.parametrize(
    "operation_id", ["monitoring_teams_pods_retrieve", "monitoring_teams_utilisation_retrieve"]
)
def test_the_prometheus_operations_answer_as_the_schema_says_with_slices_held(
    api, team, lead, cluster, monkeypatch, operation_id
):
    cluster.prometheus_url = "http://prometheus.invalid:9090"
    cluster.save()
    factories.TeamClusterFactory(
        team=team, cluster=cluster, status=TeamCluster.Status.IN_SYNC, namespace_owned=True
    )
    factories.QuotaGrantFactory(
        request__team=team, request__cluster=cluster, request__gpus=2,
        request__gpu_resource="nvidia.com/mig-1g.10gb", request__gpu_model=A100,
    )  # fmt: skip
    monkeypatch.setattr(metrics, "prometheus_for", lambda cluster, **kwargs: _SlicedPrometheus())
    monkeypatch.setattr(dashboards, "prometheus_for", lambda cluster, **kwargs: _SlicedPrometheus())
    schema = served_schema(api, lead)
    path, operation = get_operations(schema)[operation_id]

    response = api.as_user(lead).get(path.replace("{slug}", team.slug))

    assert response.status_code == 200, response.content
    assert response_problems(schema, operation, response) == []
    (pod,) = response.json()["pods"]
    assert (pod["gpus"], pod["gpus_described"]) == (2, "2 × 1g.10gb slices (2/7 GPU)")


def test_a_null_where_the_schema_says_number_is_found():
    """The check itself: ``nullable`` is honoured, and its absence is not."""
    schema = {
        "components": {
            "schemas": {
                "Row": {
                    "type": "object",
                    "properties": {
                        "hours": {"type": "number"},
                        "budget": {"type": "number", "nullable": True},
                        "at": {"type": "string", "format": "date-time", "nullable": True},
                    },
                    "required": ["hours", "budget", "at"],
                }
            }
        }
    }
    operation = {
        "operationId": "rows",
        "responses": {
            "200": {
                "content": {
                    "application/json": {
                        "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Row"}}
                    }
                }
            }
        },
    }

    class Answer:
        status_code = 200
        content = b"[]"

        def __init__(self, body):
            self.body = body

        def json(self):
            return self.body

    good = Answer(
        [
            {"hours": 1.5, "budget": None, "at": None},
            {"hours": 0, "budget": 2.5, "at": "2025-10-11T12:00:00.123456Z"},
        ]
    )
    bad = Answer([{"hours": None, "budget": 2, "at": "2025-10-11"}])

    assert response_problems(schema, operation, good) == []
    assert response_problems(schema, operation, bad) == [
        "$[0].at: '2025-10-11' is not valid under any of the given schemas",
        "$[0].hours: None is not of type 'number'",
    ]
