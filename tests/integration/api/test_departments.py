"""Departments in the API: admins create, rename and nest them (never in a cycle), put teams in
them, set their admins and ceilings, each audited; bad input is a 400 naming the field. A
department's detail shows what its teams hold against each ceiling, and the usage report can be
asked for a department's teams."""

import pytest

from tenants.models import AuditEvent, DepartmentCeiling
from tests import factories

pytestmark = pytest.mark.django_db

A100 = "NVIDIA-A100-SXM4-80GB"
URL = "/api/v1/departments/"
Action = AuditEvent.Action


@pytest.fixture
def models(cluster):
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=A100, allocatable=12, nodes=3)


@pytest.fixture
def research(db):
    return factories.DepartmentFactory(slug="research", name="Research")


@pytest.fixture
def research_vision(research):
    return factories.DepartmentFactory(slug="research-vision", parent=research)


def test_an_admin_creates_a_nested_department_and_it_is_audited(api, admin, research):
    response = api.as_user(admin).post(
        URL, {"slug": "research-nlp", "name": "NLP", "parent": "research"}
    )

    assert response.status_code == 201
    assert (response.data["slug"], response.data["parent"]) == ("research-nlp", "research")
    event = AuditEvent.objects.get(action=Action.DEPARTMENT_CREATED)
    assert event.after["slug"] == "research-nlp"
    assert event.actor == admin


def test_a_lead_cannot_create_a_department(api, lead):
    response = api.as_user(lead).post(URL, {"slug": "x", "name": "X"})

    assert response.status_code == 403


@pytest.mark.parametrize("slug", ["Not a slug", "", "x" * 64])
def test_a_bad_slug_is_400_naming_slug(api, admin, slug):
    response = api.as_user(admin).post(URL, {"slug": slug, "name": "X"})

    assert response.status_code == 400
    assert list(response.data) == ["slug"]


def test_a_taken_slug_is_400_naming_slug(api, admin, research):
    response = api.as_user(admin).post(URL, {"slug": "research", "name": "Again"})

    assert response.status_code == 400
    assert list(response.data) == ["slug"]


def test_an_unknown_parent_is_400_naming_parent(api, admin):
    response = api.as_user(admin).post(URL, {"slug": "x", "name": "X", "parent": "nowhere"})

    assert response.status_code == 400
    assert list(response.data) == ["parent"]


def test_nesting_a_department_in_its_child_is_a_cycle(api, admin, research, research_vision):
    response = api.as_user(admin).patch(f"{URL}research/", {"parent": "research-vision"})

    assert response.status_code == 400
    assert list(response.data) == ["parent"]
    assert response.data["parent"][0].startswith("Would make a cycle")
    research.refresh_from_db()
    assert research.parent is None
    assert not AuditEvent.objects.filter(action=Action.DEPARTMENT_UPDATED).exists()


def test_nesting_a_department_in_itself_is_a_cycle(api, admin, research):
    response = api.as_user(admin).patch(f"{URL}research/", {"parent": "research"})

    assert response.status_code == 400
    assert "cycle" in response.data["parent"][0]


def test_moving_a_department_to_the_top_is_audited(api, admin, research, research_vision):
    response = api.as_user(admin).patch(f"{URL}research-vision/", {"parent": None})

    assert response.status_code == 200
    assert response.data["parent"] is None
    event = AuditEvent.objects.get(action=Action.DEPARTMENT_UPDATED)
    assert (event.before["parent_id"], event.after["parent_id"]) == (research.pk, None)


def test_an_admin_puts_a_team_in_a_department(api, admin, team, research):
    response = api.as_user(admin).put(
        "/api/v1/teams/vision/department/", {"department": "research"}
    )

    assert response.status_code == 200
    team.refresh_from_db()
    assert team.department == research
    event = AuditEvent.objects.get(action=Action.TEAM_DEPARTMENT_SET)
    assert (event.team, event.after) == (team, {"department_id": research.pk})


def test_an_unknown_department_for_a_team_is_400_naming_department(api, admin, team):
    response = api.as_user(admin).put("/api/v1/teams/vision/department/", {"department": "x"})

    assert response.status_code == 400
    assert list(response.data) == ["department"]


def test_an_admin_sets_the_departments_admins(api, admin, research, lead):
    response = api.as_user(admin).put(f"{URL}research/admins/", {"admins": [lead.username]})

    assert response.status_code == 200
    assert response.data["admins"] == [lead.username]
    event = AuditEvent.objects.get(action=Action.DEPARTMENT_ADMINS_SET)
    assert (event.before, event.after) == ({"admins": []}, {"admins": [lead.username]})


def test_an_unknown_admin_is_400_naming_admins(api, admin, research):
    response = api.as_user(admin).put(f"{URL}research/admins/", {"admins": ["nobody"]})

    assert response.status_code == 400
    assert list(response.data) == ["admins"]


def test_a_department_admin_cannot_raise_their_own_ceiling(api, research, lead, cluster, models):
    research.admins.add(lead)

    response = api.as_user(lead).put(
        f"{URL}research/ceilings/", {"cluster": "gpu-east", "gpu_model": A100, "gpus": 99}
    )

    assert response.status_code == 403
    assert not DepartmentCeiling.objects.exists()


def ceiling(api, admin, **body):
    return api.as_user(admin).put(
        f"{URL}research/ceilings/", {"cluster": "gpu-east", "gpu_model": A100, "gpus": 8, **body}
    )


def test_an_admin_sets_a_ceiling_and_it_is_audited(api, admin, research, models):
    response = ceiling(api, admin)

    assert response.status_code == 200
    assert [(c["cluster"], c["gpu_model"], c["gpus"]) for c in response.data["ceilings"]] == [
        ("gpu-east", A100, 8)
    ]
    event = AuditEvent.objects.get(action=Action.DEPARTMENT_CEILING_SET)
    assert (event.before, event.after["gpus"]) == (None, 8)


@pytest.mark.parametrize("gpus", [-1, 2**31, 10**30])
def test_a_ceiling_below_zero_or_absurdly_high_is_400_naming_gpus(
    api, admin, research, models, gpus
):
    response = ceiling(api, admin, gpus=gpus)

    assert response.status_code == 400
    assert list(response.data) == ["gpus"]


def test_a_ceiling_of_a_model_the_cluster_lacks_is_400_naming_gpu_model(
    api, admin, research, models
):
    response = ceiling(api, admin, gpu_model="NVIDIA-V100")

    assert response.status_code == 400
    assert list(response.data) == ["gpu_model"]
    assert A100 in response.data["gpu_model"][0]


def test_a_ceiling_on_an_unknown_cluster_is_400_naming_cluster(api, admin, research, models):
    response = ceiling(api, admin, cluster="nowhere")

    assert response.status_code == 400
    assert list(response.data) == ["cluster"]


def test_a_ceiling_of_null_removes_it(api, admin, research, models):
    ceiling(api, admin)
    set_event = AuditEvent.objects.get(action=Action.DEPARTMENT_CEILING_SET)

    response = ceiling(api, admin, gpus=None)

    assert response.status_code == 200
    assert response.data["ceilings"] == []
    removed = AuditEvent.objects.filter(action=Action.DEPARTMENT_CEILING_SET).exclude(
        pk=set_event.pk
    )
    assert [(e.target_id, e.before["gpus"], e.after) for e in removed] == [
        (set_event.target_id, 8, None)
    ]


def test_the_detail_shows_what_nested_teams_hold_against_the_ceiling(
    api, admin, research, research_vision, team, other_team, lead, other_lead, cluster, models
):
    team.department = research
    team.save()
    other_team.department = research_vision
    other_team.save()
    ceiling(api, admin)
    for t, user, gpus in [(team, lead, 3), (other_team, other_lead, 2)]:
        factories.QuotaGrantFactory(
            request__team=t,
            request__cluster=cluster,
            request__gpu_model=A100,
            request__gpus=gpus,
            request__requested_by=user,
            granted_by=admin,
        )

    response = api.as_user(admin).get(f"{URL}research/")

    assert response.data["quota"] == [
        {
            "cluster": "gpu-east",
            "gpu_resource": "nvidia.com/gpu",
            "gpu_model": A100,
            "granted": 5,
            "ceiling": 8,
            "free": 3,
        }
    ]
    assert response.data["teams"] == ["vision"]


def test_a_department_admin_sees_their_departments_only(api, research, research_vision, lead):
    factories.DepartmentFactory(slug="sales")
    research.admins.add(lead)

    response = api.as_user(lead).get(URL)

    assert [d["slug"] for d in response.data["results"]] == ["research", "research-vision"]
    assert api.as_user(lead).get(f"{URL}sales/").status_code == 404


def test_the_usage_report_of_a_department_has_its_teams_only(
    api, admin, research, research_vision, team, other_team, lead, other_lead, cluster
):
    team.department = research_vision
    team.save()
    for t, user in [(team, lead), (other_team, other_lead)]:
        factories.QuotaGrantFactory(
            request__team=t,
            request__cluster=cluster,
            request__gpus=2,
            request__requested_by=user,
            granted_by=admin,
        )
    research.admins.add(other_lead)

    response = api.as_user(other_lead).get("/api/v1/usage-report/", {"department": "research"})

    assert response.status_code == 200
    assert {row["team"] for row in response.json()["rows"]} == {"vision"}


def test_the_usage_report_of_an_unknown_department_is_400_naming_department(api, lead):
    response = api.as_user(lead).get("/api/v1/usage-report/", {"department": "research"})

    assert response.status_code == 400
    assert list(response.data) == ["department"]
