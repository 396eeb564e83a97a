"""A refused write writes nothing: for each way the API refuses to create a quota request, a team
or a job, or to revoke or shrink a grant (400, 403, 404, 409), every row of the portal's tables
and the audit trail are read back unchanged. The answers themselves are tested beside each
endpoint (test_quota_requests.py, test_teams.py, test_quota_grants.py, gpujobs/test_api.py)."""

import datetime

import pytest
from django.apps import apps
from django.utils import timezone

pytestmark = pytest.mark.django_db

PORTAL_APPS = ("clusters", "tenants", "gpujobs", "monitoring")


def every_portal_row() -> dict:
    return {
        model._meta.label: list(model.objects.order_by("pk").values())
        for label in PORTAL_APPS
        for model in apps.get_app_config(label).get_models()
    }


def quota_request(**changes):
    today = timezone.localdate()
    body = {
        "team": "vision",
        "cluster": "gpu-east",
        "gpu_resource": "nvidia.com/gpu",
        "gpus": 4,
        "starts_on": today.isoformat(),
        "ends_on": (today + datetime.timedelta(days=30)).isoformat(),
        "justification": "Fine-tuning the support model.",
    }
    body.update(changes)
    return {key: value for key, value in body.items() if value is not None}


def job(**changes):
    body = {
        "team": "vision",
        "cluster": "gpu-east",
        "name": "trainer",
        "image": "registry.example.com/ml/trainer:1.0",
        "gpus": 1,
    }
    body.update(changes)
    return body


REQUESTS = "/api/v1/quota-requests/"
TEAMS = "/api/v1/teams/"
JOBS = "/api/v1/jobs/"
GRANT = "/api/v1/quota-grants/{grant}/"
YESTERDAY = (datetime.date.today() - datetime.timedelta(days=1)).isoformat()
LATER = "9999-12-31"

REFUSED = [
    # (name, who, path, body, status); {grant} is the team's active grant of 4 GPUs
    ("request-no-gpus", "lead", REQUESTS, quota_request(gpus=0), 400),
    ("request-gpus-text", "lead", REQUESTS, quota_request(gpus="4x"), 400),
    ("request-huge", "lead", REQUESTS, quota_request(gpus=10**12), 400),
    ("request-past-start", "lead", REQUESTS, quota_request(starts_on=YESTERDAY), 400),
    ("request-end-first", "lead", REQUESTS, quota_request(ends_on="2000-01-01"), 400),
    ("request-bad-date", "lead", REQUESTS, quota_request(ends_on="soon"), 400),
    ("request-no-reason", "lead", REQUESTS, quota_request(justification=" "), 400),
    ("request-bad-kind", "lead", REQUESTS, quota_request(gpu_resource="x/y"), 400),
    ("request-no-cluster", "lead", REQUESTS, quota_request(cluster="nowhere"), 400),
    ("request-other-team", "other_lead", REQUESTS, quota_request(), 400),
    ("request-viewer", "viewer", REQUESTS, quota_request(), 403),
    ("team-bad-slug", "admin", TEAMS, {"slug": "ML_Team", "name": "Bad"}, 400),
    ("team-taken-slug", "admin", TEAMS, {"slug": "vision", "name": "Again"}, 400),
    ("team-no-name", "admin", TEAMS, {"slug": "ok"}, 400),
    ("team-by-a-lead", "lead", TEAMS, {"slug": "x", "name": "X"}, 403),
    ("revoke-by-a-lead", "lead", GRANT + "revoke/", {}, 403),
    ("revoke-other-team", "other_lead", GRANT + "revoke/", {}, 404),
    ("shrink-upward", "admin", GRANT + "shrink/", {"gpus": 5}, 400),
    ("shrink-to-zero", "admin", GRANT + "shrink/", {"gpus": 0}, 400),
    ("shrink-nothing", "admin", GRANT + "shrink/", {"gpus": 4}, 400),
    ("shrink-longer", "admin", GRANT + "shrink/", {"ends_on": LATER}, 400),
    ("shrink-by-a-lead", "lead", GRANT + "shrink/", {"gpus": 1}, 403),
    ("shrink-other-team", "other_lead", GRANT + "shrink/", {"gpus": 1}, 404),
    ("job-over-quota", "member", JOBS, job(gpus=5), 400),
    ("job-shell-command", "member", JOBS, job(command="python train.py"), 400),
    ("job-bad-kind", "member", JOBS, job(gpu_resource="nvidia.com/mig-7g"), 400),
    ("job-no-image", "member", JOBS, job(image=""), 400),
    ("job-by-a-viewer", "viewer", JOBS, job(), 403),
    ("job-by-an-admin", "admin", JOBS, job(), 403),
    ("job-other-team", "other_lead", JOBS, job(), 400),
]


@pytest.mark.parametrize(
    ("who", "path", "body", "status"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_a_refused_write_changes_no_row(
    request, api, grant, member, viewer, other_lead, who, path, body, status
):
    user = request.getfixturevalue(who)
    before = every_portal_row()

    response = api.as_user(user).post(path.format(grant=grant.pk), body)

    assert response.status_code == status, response.data
    assert every_portal_row() == before


def test_revoking_a_revoked_grant_is_409_and_changes_no_row(api, admin, grant):
    revoke = GRANT.format(grant=grant.pk) + "revoke/"
    assert api.as_user(admin).post(revoke, {}).status_code == 200
    before = every_portal_row()

    response = api.post(revoke, {})

    assert response.status_code == 409
    assert every_portal_row() == before
