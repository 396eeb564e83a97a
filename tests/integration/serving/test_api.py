"""The service API's rules, without a cluster: who may deploy and change a service, what a
service may ask for and which field a bad value is named under, how much quota each action
needs (with the arithmetic when it does not fit, jobs and services counted together), what each
state allows, and that another team's service is a 404 on every route. Nothing is enqueued (the
test's transaction never commits), so no worker or cluster is involved; tests/integration/
serving/test_devcluster_services.py follows the same actions onto the cluster."""

import pytest

from serving.models import InferenceService, Revision
from tenants.models import AuditEvent
from tests import factories
from tests.integration.serving.api import deploy, deploy_body, grant_gpus

pytestmark = pytest.mark.django_db


@pytest.fixture
def grant(team, cluster, lead, admin):
    return grant_gpus(team, cluster, gpus=4, lead=lead, admin=admin)


@pytest.fixture
def other_grant(other_team, cluster, other_lead, admin):
    return grant_gpus(other_team, cluster, gpus=4, lead=other_lead, admin=admin)


@pytest.fixture
def service(api, member, grant) -> dict:
    return deploy(api, member)


def post(api, user, service_id, action, body=None):
    return api.as_user(user).post(f"/api/v1/services/{service_id}/{action}/", body or {})


def revisions(service_id) -> dict[int, Revision]:
    return {r.number: r for r in Revision.objects.filter(service_id=service_id).order_by("number")}


# --- deploy --------------------------------------------------------------------------------------


def test_member_deploys_a_service_with_a_sidecar(api, member, grant):
    data = deploy(api, member)

    assert data["name"] == "llm"
    assert (data["team"], data["cluster"], data["state"]) == ("vision", "gpu-east", "active")
    assert data["rollout"] == "none"
    assert data["endpoint"] == "llm.vision.svc:8000"
    assert data["hostname"] == ""  # no Gateway API on this cluster: no route
    assert data["gpus_held"] == 2
    assert data["traffic"] == [{"revision": 1, "weight": 100, "replicas": 2, "share": 100.0}]
    (revision,) = data["revisions"]
    assert (revision["number"], revision["role"], revision["replicas"]) == (1, "stable", 2)
    assert revision["sidecar"]["image"] == "registry.example.com/vision/tokenizer:1.0"
    assert revision["probe_path"] == "/healthz"
    event = AuditEvent.objects.get(action=AuditEvent.Action.SERVICE_DEPLOYED)
    assert event.after["revisions"][0]["replicas"] == 2


def test_viewer_may_not_deploy(api, viewer, grant):
    response = api.as_user(viewer).post("/api/v1/services/", deploy_body())

    assert response.status_code == 403
    assert not InferenceService.objects.exists()


def test_another_teams_slug_reads_as_no_such_team(api, other_lead, grant):
    response = api.as_user(other_lead).post("/api/v1/services/", deploy_body())

    assert response.status_code == 400
    assert set(response.data) == {"team"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"replicas": 0}, "replicas"),
        ({"replicas": -2}, "replicas"),
        ({"port": 0}, "port"),
        ({"port": 70000}, "port"),
        ({"probe_path": "healthz"}, "probe_path"),
        ({"sidecar": {"image": "registry.example.com/vision/tokenizer:1.0", "gpus": 1}}, "sidecar"),
        ({"name": "Not_A_Label"}, "name"),
        ({"gpus": 0}, "gpus"),
        ({"image": "UPPER/Case"}, "image"),
        ({"probe": "grpc"}, "probe"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, member, grant, overrides, field):
    response = api.as_user(member).post("/api/v1/services/", deploy_body(**overrides))

    assert response.status_code == 400
    assert list(response.data) == [field], response.data
    assert not InferenceService.objects.exists()


def test_every_bad_field_is_named_in_one_answer(api, member, grant):
    response = api.as_user(member).post(
        "/api/v1/services/", deploy_body(replicas=0, port=99999, probe_path="x")
    )

    assert response.status_code == 400
    assert set(response.data) == {"replicas", "port", "probe_path"}


def test_a_body_that_is_not_an_object_is_a_400(api, member, grant):
    response = api.as_user(member).post("/api/v1/services/", ["llm"])

    assert response.status_code == 400


def test_a_registry_the_cluster_does_not_allow_is_named_for_the_sidecar_too(
    api, member, grant, cluster
):
    cluster.allowed_registries = ["registry.example.com"]
    cluster.allow_all_registries = False
    cluster.save()

    response = api.as_user(member).post(
        "/api/v1/services/", deploy_body(sidecar={"image": "busybox:1.36"})
    )

    assert response.status_code == 400
    assert list(response.data) == ["sidecar"]
    assert "does not allow" in response.data["sidecar"][0]


def test_a_service_beyond_the_quota_is_refused_with_the_arithmetic(api, member, grant):
    response = api.as_user(member).post("/api/v1/services/", deploy_body(replicas=3, gpus=2))

    assert response.status_code == 400
    (message,) = response.data["replicas"]
    assert "has 4 × nvidia.com/gpu on cluster gpu-east, 0 held by its unfinished jobs" in message
    assert "this service's 3 replicas × 2 GPUs ask for 6, exceeding it by 2" in message


def test_jobs_and_services_count_against_one_quota(api, member, grant, team, cluster):
    factories.GpuJobFactory(team=team, cluster=cluster, gpus=3)

    response = api.as_user(member).post("/api/v1/services/", deploy_body(replicas=2))

    assert response.status_code == 400
    assert "3 held by its unfinished jobs, so 1 left" in response.data["replicas"][0]


def test_a_job_beyond_what_services_leave_is_refused_naming_them(api, member, service):
    response = api.as_user(member).post(
        "/api/v1/jobs/",
        {
            "team": "vision",
            "cluster": "gpu-east",
            "name": "train",
            "image": "registry.example.com/vision/trainer:1.4",
            "gpus": 3,
        },
    )

    assert response.status_code == 400
    assert (
        "2 held (0 by its unfinished jobs, 2 by its services), so 2 left"
        in (response.data["gpus"][0])
    )


def test_a_name_taken_on_the_cluster_is_refused(api, member, service):
    response = api.as_user(member).post("/api/v1/services/", deploy_body(replicas=1))

    assert response.status_code == 400
    assert list(response.data) == ["name"]


# --- new revisions and traffic -------------------------------------------------------------------


def test_a_canary_at_ten_percent_takes_ten_percent(api, member, service, cluster):
    cluster.gateway_api = True
    cluster.save()

    response = post(
        api,
        member,
        service["id"],
        "canary",
        {"image": "registry.example.com/vision/llm-server:2.2", "weight": 10},
    )

    assert response.status_code == 200, response.data
    assert response.data["rollout"] == "canary"
    assert [(t["revision"], t["weight"], t["share"]) for t in response.data["traffic"]] == [
        (1, 90, 90.0),
        (2, 10, 10.0),
    ]
    canary = revisions(service["id"])[2]
    assert (canary.role, canary.replicas, canary.image) == (
        "candidate",
        1,
        "registry.example.com/vision/llm-server:2.2",
    )
    assert canary.sidecar == revisions(service["id"])[1].sidecar  # kept from r1
    assert "Canary r2 takes 10%" in response.data["progress"]


def test_without_the_gateway_api_the_canary_share_is_what_replicas_give(api, member, service):
    response = post(api, member, service["id"], "canary", {"weight": 10, "gpus": 1})

    assert response.status_code == 200
    assert [(t["replicas"], t["share"]) for t in response.data["traffic"]] == [
        (2, 66.7),
        (1, 33.3),
    ]
    assert response.data["routing"] == "replicas"


@pytest.mark.parametrize("weight", [0, 100, -5, "ten"])
def test_a_canary_weight_out_of_range_is_named(api, member, service, weight):
    response = post(api, member, service["id"], "canary", {"weight": weight})

    assert response.status_code == 400
    assert list(response.data) == ["weight"]


def test_a_canary_that_does_not_fit_is_refused_up_front(api, member, service):
    response = post(api, member, service["id"], "canary", {"weight": 10, "gpus": 3})

    assert response.status_code == 400
    (message,) = response.data["weight"]
    assert "2 held (0 by its unfinished jobs, 2 by its services), so 2 left" in message
    assert "the canary at 10% with 1 replica × 3 GPUs" in message
    assert "asks for 3, exceeding it by 1" in message
    assert set(revisions(service["id"])) == {1}


def test_traffic_weights_that_do_not_add_up_to_100_are_named(api, member, service):
    post(api, member, service["id"], "canary", {"weight": 10})

    response = post(
        api,
        member,
        service["id"],
        "traffic",
        {"split": [{"revision": 1, "weight": 80}, {"revision": 2, "weight": 10}]},
    )

    assert response.status_code == 400
    assert list(response.data) == ["split"]
    assert "add up to 90%" in response.data["split"][0]


def test_the_canary_goes_to_25_then_50_percent(api, member, service, cluster):
    cluster.gateway_api = True
    cluster.save()
    post(api, member, service["id"], "canary", {"weight": 10})

    for weight in (25, 50):
        response = post(
            api,
            member,
            service["id"],
            "traffic",
            {"split": [{"revision": 1, "weight": 100 - weight}, {"revision": 2, "weight": weight}]},
        )
        assert response.status_code == 200, response.data
        assert [t["weight"] for t in response.data["traffic"]] == [100 - weight, weight]


def test_promote_makes_the_canary_stable_with_the_stables_replicas(api, member, service):
    post(api, member, service["id"], "canary", {"weight": 10})

    response = post(api, member, service["id"], "promote")

    assert response.status_code == 200
    assert response.data["rollout"] == "none"
    rows = revisions(service["id"])
    assert (rows[1].role, rows[2].role) == ("retired", "stable")
    assert (rows[2].weight, rows[2].replicas) == (100, 2)


def test_rollback_retires_the_canary(api, member, service):
    post(api, member, service["id"], "canary", {"weight": 10})

    response = post(api, member, service["id"], "rollback")

    assert response.status_code == 200
    rows = revisions(service["id"])
    assert (rows[1].role, rows[1].weight, rows[2].role) == ("stable", 100, "retired")


def test_an_update_rolls_out_and_takes_over_once_ready(api, member, service):
    from serving import services

    response = post(api, member, service["id"], "update", {"image": "registry.example.com/v/x:3"})

    assert response.status_code == 200
    assert response.data["rollout"] == "rolling"
    candidate = revisions(service["id"])[2]
    assert (candidate.weight, candidate.replicas) == (0, 2)
    assert services.rollout_finish(service_id=service["id"]) is False  # not ready yet
    Revision.objects.filter(pk=candidate.pk).update(ready_replicas=2)
    assert services.rollout_finish(service_id=service["id"]) is True
    rows = revisions(service["id"])
    assert (rows[1].role, rows[2].role) == ("retired", "stable")


def test_rollback_without_a_rollout_rolls_the_earlier_revision_out_again(api, member, service):
    post(api, member, service["id"], "canary", {"weight": 10, "image": "registry.example.com/v:2"})
    post(api, member, service["id"], "promote")

    response = post(api, member, service["id"], "rollback", {"revision": 1})

    assert response.status_code == 200
    assert response.data["rollout"] == "rolling"
    rows = revisions(service["id"])
    assert (rows[1].role, rows[1].weight, rows[2].role) == ("candidate", 0, "stable")


def test_an_ab_test_keeps_two_named_variants(api, member, service, cluster):
    cluster.gateway_api = True
    cluster.save()

    response = post(
        api,
        member,
        service["id"],
        "ab-test",
        {
            "image": "registry.example.com/vision/llm-server:2.2-int8",
            "variants": [{"name": "fp16", "weight": 60}, {"name": "int8", "weight": 40}],
            "replicas": 1,
        },
    )

    assert response.status_code == 200, response.data
    assert response.data["rollout"] == "ab_test"
    rows = revisions(service["id"])
    assert [(r.variant, r.weight) for r in rows.values()] == [("fp16", 60), ("int8", 40)]
    promoted = post(api, member, service["id"], "promote", {"variant": "int8"})
    assert promoted.status_code == 200
    rows = revisions(service["id"])
    assert (rows[1].role, rows[2].role, rows[2].variant) == ("retired", "stable", "")


def test_variants_whose_weights_do_not_add_up_are_named(api, member, service):
    response = post(
        api,
        member,
        service["id"],
        "ab-test",
        {"variants": [{"name": "a", "weight": 60}, {"name": "b", "weight": 60}]},
    )

    assert response.status_code == 400
    assert list(response.data) == ["variants"]


def test_a_second_canary_while_one_runs_is_a_409(api, member, service):
    post(api, member, service["id"], "canary", {"weight": 10})

    response = post(api, member, service["id"], "canary", {"weight": 20})

    assert response.status_code == 409
    assert response.data["state"] == ["canary"]


def test_promote_without_a_candidate_is_a_409(api, member, service):
    assert post(api, member, service["id"], "promote").status_code == 409


# --- scale, stop, delete ------------------------------------------------------------------------


def test_a_scale_up_beyond_the_quota_is_refused_with_the_arithmetic(api, member, service):
    response = post(api, member, service["id"], "scale", {"replicas": 5})

    assert response.status_code == 400
    (message,) = response.data["replicas"]
    assert "so 2 left; scaling r1 from 2 to 5 replicas × 1 GPU asks for 3, exceeding it by 1" in (
        message
    )
    assert revisions(service["id"])[1].replicas == 2


@pytest.mark.parametrize("replicas", [0, -1])
def test_zero_or_negative_replicas_are_named(api, member, service, replicas):
    response = post(api, member, service["id"], "scale", {"replicas": replicas})

    assert response.status_code == 400
    assert list(response.data) == ["replicas"]


def test_scale_within_the_quota(api, member, service):
    response = post(api, member, service["id"], "scale", {"replicas": 4})

    assert response.status_code == 200
    assert response.data["gpus_held"] == 4


def test_stop_frees_the_gpus_and_scaling_starts_it_again(api, member, service):
    stopped = post(api, member, service["id"], "stop")

    assert stopped.status_code == 200
    assert (stopped.data["state"], stopped.data["gpus_held"]) == ("stopped", 0)
    again = post(api, member, service["id"], "scale", {"replicas": 1})
    assert (again.data["state"], again.data["gpus_held"]) == ("active", 1)


def test_delete_marks_the_service_deleting(api, member, service):
    response = api.as_user(member).delete(f"/api/v1/services/{service['id']}/")

    assert response.status_code == 202
    assert response.data["state"] == "deleting"
    assert post(api, member, service["id"], "scale", {"replicas": 1}).status_code == 409


def test_a_deleting_service_holds_no_quota_for_new_work(api, member, service):
    api.as_user(member).delete(f"/api/v1/services/{service['id']}/")

    assert deploy(api, member, name="llm-2", replicas=4)["gpus_held"] == 4


def test_viewer_may_read_but_not_change(api, viewer, service):
    assert api.as_user(viewer).get(f"/api/v1/services/{service['id']}/").status_code == 200
    assert post(api, viewer, service["id"], "scale", {"replicas": 1}).status_code == 403
    assert api.as_user(viewer).delete(f"/api/v1/services/{service['id']}/").status_code == 403


def test_admin_may_change_any_team_service(api, admin, service):
    assert post(api, admin, service["id"], "stop").status_code == 200


# --- another team -------------------------------------------------------------------------------

ROUTES = [
    ("get", ""),
    ("delete", ""),
    ("post", "update/"),
    ("post", "canary/"),
    ("post", "ab-test/"),
    ("post", "traffic/"),
    ("post", "promote/"),
    ("post", "rollback/"),
    ("post", "scale/"),
    ("post", "stop/"),
    ("get", "logs/"),
    ("get", "events/"),
]


@pytest.mark.parametrize(("method", "route"), ROUTES)
def test_another_teams_service_is_a_404_on_every_route(api, other_lead, service, method, route):
    client = api.as_user(other_lead)

    response = getattr(client, method)(f"/api/v1/services/{service['id']}/{route}", {})

    assert response.status_code == 404
    assert InferenceService.objects.get(pk=service["id"]).state == "active"


def test_lists_only_the_users_teams_services(api, member, other_lead, service, other_grant):
    deploy(api, other_lead, team="speech", name="asr", replicas=1)

    mine = api.as_user(member).get("/api/v1/services/")
    theirs = api.as_user(other_lead).get("/api/v1/services/", {"team": "vision"})

    assert [s["name"] for s in mine.data["results"]] == ["llm"]
    assert theirs.data["results"] == []


def test_the_list_filters_by_state(api, member, service):
    post(api, member, service["id"], "stop")

    assert api.as_user(member).get("/api/v1/services/", {"state": "active"}).data["count"] == 0
    assert api.as_user(member).get("/api/v1/services/", {"state": "stopped"}).data["count"] == 1


def test_in_kueue_mode_a_service_is_not_queued_but_held_to_the_teams_own_quota(
    api, member, grant, cluster
):
    cluster.quota_mode = "kueue"
    cluster.save()

    response = api.as_user(member).post("/api/v1/services/", deploy_body(replicas=5))

    assert response.status_code == 400
    assert "ask for 5, exceeding it by 1" in response.data["replicas"][0]
    assert deploy(api, member, replicas=4)["gpus_held"] == 4


def test_a_namespace_someone_else_made_takes_no_service(api, member, grant, team, cluster):
    factories.TeamClusterFactory(team=team, cluster=cluster, namespace_owned=False)

    response = api.as_user(member).post("/api/v1/services/", deploy_body())

    assert response.status_code == 400
    assert "so the portal runs no service in it" in response.data["cluster"][0]


def test_with_the_gateway_api_a_service_answers_for_its_hostname_in_the_teams_domain(
    api, member, grant, cluster
):
    cluster.gateway_api = True
    cluster.apps_domain = "apps.acme.io"
    cluster.save()

    assert deploy(api, member)["hostname"] == "llm.vision.apps.acme.io"


@pytest.mark.parametrize("pod", ["Not_A_Pod!", "a" * 254])
def test_a_replica_log_for_a_name_no_pod_can_have_is_a_400_naming_pod(api, member, service, pod):
    """As for a job's log: refused before the cluster is asked."""
    response = api.as_user(member).get(f"/api/v1/services/{service['id']}/logs/?pod={pod}")

    assert response.status_code == 400
    assert list(response.json()) == ["pod"]
