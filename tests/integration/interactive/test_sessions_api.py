"""The session API's refusals: each names its field in a 400 (an image from a registry the
cluster does not allow, a lifetime over the team's maximum, a first home volume over what the
team's storage quota leaves), viewers may not start sessions, another team's session is a 404,
and a teammate may not resume one."""

import pytest
from rest_framework.test import APIClient

from interactive.models import HomeVolume, InteractiveSession, SessionPolicy
from tenants.models import Membership, TeamObjectLimits
from tests import factories

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def world():
    cluster = factories.ClusterFactory(
        name="east", allowed_registries=["registry.example.com"], allow_all_registries=False
    )
    team = factories.TeamFactory(slug="vision")
    other = factories.TeamFactory(slug="speech")
    users = {}
    for role in ("lead", "member", "viewer"):
        users[role] = factories.UserFactory(username=f"{role}-vision")
        Membership.objects.create(team=team, user=users[role], role=role)
    users["stranger"] = factories.UserFactory(username="stranger")
    Membership.objects.create(team=other, user=users["stranger"], role="member")
    return cluster, team, users


def client(user) -> APIClient:
    api = APIClient()
    api.default_format = "json"
    api.force_authenticate(user=user)
    return api


def body(**changes):
    return {
        "team": "vision",
        "cluster": "east",
        "name": "explore",
        "image": "registry.example.com/ml/notebook:1",
        **changes,
    }


def test_each_refusal_names_its_field(world, django_capture_on_commit_callbacks):
    cluster, team, users = world
    SessionPolicy.objects.create(team=team, max_lifetime_hours=4, idle_minutes=30, warn_minutes=5)
    TeamObjectLimits.objects.create(team=team, cluster=cluster, limits={"requests.storage": "20Gi"})
    factories.HomeVolumeFactory(team=team, cluster=cluster, owner=users["lead"], size_gib=15)
    api = client(users["member"])

    answer = api.post(
        "/api/v1/sessions/",
        body(image="docker.io/evil/miner:1", max_lifetime_hours=5, home_gib=10),
    )
    assert answer.status_code == 400
    errors = answer.json()
    assert "docker.io" in errors["image"][0]
    assert "at most 4 hours" in errors["max_lifetime_hours"][0]
    assert "5 GiB are left" in errors["home_gib"][0]
    assert not InteractiveSession.objects.exists()
    assert not HomeVolume.objects.filter(owner=users["member"]).exists()

    bad_shape = api.post("/api/v1/sessions/", body(gpus="two", cpu_cores=-1))
    assert bad_shape.status_code == 400
    assert set(bad_shape.json()) >= {"gpus", "cpu_cores"}

    with django_capture_on_commit_callbacks():
        good = api.post("/api/v1/sessions/", body(home_gib=5, max_lifetime_hours=4))
    assert good.status_code == 201, good.content
    assert good.json()["home_gib"] == 5
    assert good.json()["url"].startswith("/sessions/")


def test_who_may_start_see_stop_and_resume(world, django_capture_on_commit_callbacks):
    _cluster, _team, users = world
    assert client(users["viewer"]).post("/api/v1/sessions/", body()).status_code == 403
    with django_capture_on_commit_callbacks():
        created = client(users["member"]).post("/api/v1/sessions/", body())
    session_id = created.json()["id"]
    assert client(users["stranger"]).get(f"/api/v1/sessions/{session_id}/").status_code == 404
    assert client(users["viewer"]).get(f"/api/v1/sessions/{session_id}/").status_code == 200
    assert client(users["viewer"]).post(f"/api/v1/sessions/{session_id}/stop/").status_code == 403
    with django_capture_on_commit_callbacks():
        stopped = client(users["lead"]).post(f"/api/v1/sessions/{session_id}/stop/")
    assert stopped.status_code == 200
    assert stopped.json()["stop_reason"] == "admin"
    assert client(users["lead"]).post(f"/api/v1/sessions/{session_id}/resume/").status_code == 403
    with django_capture_on_commit_callbacks():
        resumed = client(users["member"]).post(f"/api/v1/sessions/{session_id}/resume/")
    assert resumed.status_code == 200
    assert resumed.json()["run"] == 2
    listed = client(users["stranger"]).get("/api/v1/sessions/").json()
    assert listed["count"] == 0
