"""GET /api/v1/quota-grants/{id}/impact/: a dry run of shrinking or revoking a grant."""

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.models import QuotaMode
from tenants.models import AuditEvent, QuotaGrant
from tests import factories

pytestmark = pytest.mark.django_db


def url(grant, query=""):
    return f"/api/v1/quota-grants/{grant.pk}/impact/{query}"


def running_job(team, cluster, gpus, hours_ago, **fields):
    return factories.GpuJobFactory(
        team=team,
        cluster=cluster,
        gpus=gpus,
        state="running",
        started_at=timezone.now() - datetime.timedelta(hours=hours_ago),
        **fields,
    )


def test_revoking_previews_every_running_job_over_quota_newest_first(api, admin, grant):
    old = running_job(grant.team, grant.cluster, 2, hours_ago=5)
    new = running_job(grant.team, grant.cluster, 1, hours_ago=1)
    factories.GpuJobFactory(team=grant.team, cluster=grant.cluster, gpus=3, state="queued")

    response = api.as_user(admin).get(url(grant))

    assert response.status_code == 200
    body = response.data
    assert (body["quota_now"], body["quota_after"], body["held"], body["over_by"]) == (4, 0, 3, 3)
    assert [(w["kind"], w["id"]) for w in body["over_quota"]] == [
        ("job", new.pk),
        ("job", old.pk),
    ]
    assert [w["id"] for w in body["waiting"]] == [grant.team.gpu_jobs.get(state="queued").pk]
    assert body["quota_mode"] == QuotaMode.QUOTA_ONLY
    assert "refused" in body["consequence"]
    assert body["over_quota"][0]["url"] == f"/jobs/{new.pk}/"


def test_shrinking_lists_only_the_newest_work_that_no_longer_fits(api, admin, grant):
    running_job(grant.team, grant.cluster, 2, hours_ago=5)
    service = factories.InferenceServiceFactory(team=grant.team, cluster=grant.cluster)
    factories.RevisionFactory(service=service, gpus=1, replicas=1)
    newest = running_job(grant.team, grant.cluster, 1, hours_ago=0)

    response = api.as_user(admin).get(url(grant, "?gpus=3"))

    assert response.status_code == 200
    assert response.data["held"] == 4
    assert [(w["kind"], w["id"]) for w in response.data["over_quota"]] == [("job", newest.pk)]


def test_a_shrink_that_still_fits_lists_nothing(api, admin, grant):
    running_job(grant.team, grant.cluster, 2, hours_ago=1)

    response = api.as_user(admin).get(url(grant, "?gpus=2"))

    assert response.data["over_quota"] == []
    assert "still fits" in response.data["consequence"]


def test_in_kueue_mode_the_preview_counts_the_grants_model_and_new_work_waits(api, admin, grant):
    QuotaGrant.objects.filter(pk=grant.pk).update(gpu_model="H100")
    grant.cluster.quota_mode = QuotaMode.KUEUE
    grant.cluster.save(update_fields=["quota_mode"])
    h100 = running_job(grant.team, grant.cluster, 2, hours_ago=2, gpu_model="H100")
    running_job(grant.team, grant.cluster, 4, hours_ago=1, gpu_model="A100")

    response = api.as_user(admin).get(url(grant, "?gpus=1"))

    assert response.data["gpu_model"] == "H100"
    assert [w["id"] for w in response.data["over_quota"]] == [h100.pk]
    assert "waits" in response.data["consequence"]


def test_the_preview_changes_nothing(api, admin, grant):
    running_job(grant.team, grant.cluster, 2, hours_ago=1)

    api.as_user(admin).get(url(grant))

    assert QuotaGrant.objects.get(pk=grant.pk).state == QuotaGrant.State.ACTIVE
    assert not AuditEvent.objects.filter(target_type="QuotaGrant").exists()


def test_the_preview_costs_the_same_queries_with_more_work(api, admin, grant):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert api.as_user(admin).get(url(grant)).status_code == 200
        return len(captured)

    running_job(grant.team, grant.cluster, 1, hours_ago=1)
    service = factories.InferenceServiceFactory(team=grant.team, cluster=grant.cluster)
    factories.RevisionFactory(service=service, gpus=1, replicas=1)
    few = queries()
    for hours in range(2, 8):
        running_job(grant.team, grant.cluster, 1, hours_ago=hours)
        other = factories.InferenceServiceFactory(team=grant.team, cluster=grant.cluster)
        factories.RevisionFactory(service=other, gpus=1, replicas=2)

    assert queries() == few


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("?gpus=-1", "greater than or equal to 0"),
        ("?gpus=5", "the grant has 4 GPUs"),
        ("?gpus=two", "valid integer"),
        ("?gpus=1.5", "valid integer"),
    ],
)
def test_bad_gpus_is_a_400_naming_the_field(api, admin, grant, query, message):
    response = api.as_user(admin).get(url(grant, query))

    assert response.status_code == 400
    assert message in str(response.data["gpus"])


@pytest.mark.parametrize(
    ("query", "message"),
    [("?ends_on=2999-01-01", "Can only preview ending sooner"), ("?ends_on=soon", "format")],
)
def test_bad_ends_on_is_a_400_naming_the_field(api, admin, grant, query, message):
    response = api.as_user(admin).get(url(grant, query))

    assert response.status_code == 400
    assert message in str(response.data["ends_on"])


def test_an_end_before_today_previews_ending_the_grant(api, admin, grant):
    QuotaGrant.objects.filter(pk=grant.pk).update(
        starts_on=timezone.localdate() - datetime.timedelta(days=9)
    )
    running_job(grant.team, grant.cluster, 1, hours_ago=1)
    yesterday = timezone.localdate() - datetime.timedelta(days=1)

    response = api.as_user(admin).get(url(grant, f"?ends_on={yesterday.isoformat()}"))

    assert (response.data["gpus_after"], response.data["quota_after"]) == (0, 0)
    assert len(response.data["over_quota"]) == 1


def test_a_lead_of_another_team_gets_404(api, other_lead, grant):
    assert api.as_user(other_lead).get(url(grant)).status_code == 404


def test_the_endpoint_is_in_the_openapi_schema(api, admin):
    schema = api.as_user(admin).get("/api/v1/schema/?format=json").json()

    operation = schema["paths"]["/api/v1/quota-grants/{id}/impact/"]["get"]
    query = {p["name"] for p in operation["parameters"] if p["in"] == "query"}
    assert query == {"gpus", "ends_on"}
    assert "over_quota" in schema["components"]["schemas"]["GrantImpact"]["properties"]
