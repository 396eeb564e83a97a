"""The service pages without a cluster: the deploy form and its errors beside the fields, the
list, the service page with its revisions, traffic and the routing it says, the action forms
and their refusals, and another team's service as a 404 on every page."""

import pytest

from serving.models import InferenceService, Revision
from tests.integration.pages.helpers import field_error_html, get_ok, messages_text
from tests.integration.serving.api import deploy, grant_gpus

pytestmark = pytest.mark.django_db


@pytest.fixture
def grant(team, cluster, lead, admin):
    return grant_gpus(team, cluster, gpus=4, lead=lead, admin=admin)


@pytest.fixture
def service(api, member, grant) -> InferenceService:
    return InferenceService.objects.get(pk=deploy(api, member)["id"])


FORM = {
    "name": "llm",
    "image": "registry.example.com/vision/llm-server:2.1",
    "command": "python\n-m\nserve\n",
    "env": "MODEL=llama\n",
    "gpus": "1",
    "gpu_model": "",
    "replicas": "2",
    "port": "8000",
    "probe": "http",
    "probe_path": "/healthz",
    "sidecar_image": "registry.example.com/vision/tokenizer:1.0",
    "sidecar_env": "MODE=tokenize\n",
}


def test_member_deploys_through_the_form_and_lands_on_the_service(
    client_as, member, team, cluster, grant
):
    response = client_as(member).post(
        "/services/new/", {**FORM, "team": team.pk, "cluster": cluster.pk}
    )

    service = InferenceService.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/services/{service.pk}/"
    revision = service.revisions.get()
    assert revision.command == ["python", "-m", "serve"]
    assert revision.sidecar["env"] == [{"name": "MODE", "value": "tokenize"}]


@pytest.mark.parametrize(
    ("field", "value", "field_id"),
    [
        ("replicas", "0", "id_replicas"),
        ("port", "70000", "id_port"),
        ("probe_path", "healthz", "id_probe_path"),
    ],
)
def test_bad_input_is_an_error_beside_its_field(
    client_as, member, team, cluster, grant, field, value, field_id
):
    response = client_as(member).post(
        "/services/new/", {**FORM, field: value, "team": team.pk, "cluster": cluster.pk}
    )

    assert response.status_code == 200
    assert field_error_html(response, field_id)
    assert not InferenceService.objects.exists()


def test_a_service_beyond_the_quota_is_refused_beside_replicas(
    client_as, member, team, cluster, grant
):
    response = client_as(member).post(
        "/services/new/", {**FORM, "replicas": "5", "team": team.pk, "cluster": cluster.pk}
    )

    assert "exceeding it by 1" in field_error_html(response, "id_replicas")


def test_the_service_page_shows_revisions_traffic_and_how_it_is_split(client_as, member, service):
    page = get_ok(client_as(member), f"/services/{service.pk}/").content.decode()

    assert 'data-testid="revision-r1"' in page
    assert "approximated by replica counts behind one Service" in page
    assert 'data-testid="revision-form"' in page
    assert f"/services/{service.pk}/gpus/" in page


def test_with_the_gateway_api_the_page_says_the_shares_are_exact(
    client_as, member, service, cluster
):
    cluster.gateway_api = True
    cluster.save()

    live = get_ok(client_as(member), f"/services/{service.pk}/live/").content.decode()

    assert "split by the HTTPRoute&#x27;s backend weights" in live


def test_a_viewer_sees_the_service_without_the_action_forms(client_as, viewer, service):
    page = get_ok(client_as(viewer), f"/services/{service.pk}/").content.decode()

    assert 'data-testid="revision-form"' not in page
    assert 'data-testid="delete-service"' not in page


def test_a_canary_through_the_form_then_promote(client_as, member, service):
    client = client_as(member)

    response = client.post(
        f"/services/{service.pk}/revisions/",
        {
            "image": "registry.example.com/vision/llm-server:2.2",
            "gpus": "1",
            "port": "8000",
            "probe": "http",
            "probe_path": "/healthz",
            "how": "canary",
            "weight": "10",
        },
        follow=True,
    )

    assert messages_text(response) == ["Started a canary at 10%."]
    assert service.revisions.get(number=2).weight == 10
    promoted = client.post(f"/services/{service.pk}/promote/", follow=True)
    assert messages_text(promoted) == ["Promoted: it takes all the traffic."]
    assert service.revisions.get(number=2).role == Revision.Role.STABLE


def test_a_canary_weight_of_100_is_an_error_on_the_form(client_as, member, service):
    response = client_as(member).post(
        f"/services/{service.pk}/revisions/",
        {
            "image": "registry.example.com/x:2",
            "gpus": "1",
            "port": "8000",
            "probe": "tcp",
            "how": "canary",
            "weight": "100",
        },
    )

    assert response.status_code == 200
    assert field_error_html(response, "id_weight")
    assert service.revisions.count() == 1


def test_a_scale_beyond_the_quota_is_an_error_on_the_scale_form(client_as, member, service):
    response = client_as(member).post(
        f"/services/{service.pk}/scale/", {"replicas": "9", "revision": "1"}
    )

    assert response.status_code == 200
    assert "exceeding it by 5" in field_error_html(response, "id_replicas")


def test_stop_and_delete_through_the_page(client_as, member, service):
    client = client_as(member)

    client.post(f"/services/{service.pk}/stop/")
    assert InferenceService.objects.get(pk=service.pk).state == "stopped"
    client.post(f"/services/{service.pk}/delete/")
    assert InferenceService.objects.get(pk=service.pk).state == "deleting"


@pytest.mark.parametrize(
    ("method", "route"),
    [
        ("get", ""),
        ("get", "live/"),
        ("get", "logs/"),
        ("get", "events/"),
        ("get", "gpus/"),
        ("post", "revisions/"),
        ("post", "traffic/"),
        ("post", "promote/"),
        ("post", "rollback/"),
        ("post", "scale/"),
        ("post", "stop/"),
        ("post", "delete/"),
    ],
)
def test_another_teams_service_is_a_404_on_every_page(
    client_as, other_lead, service, method, route
):
    response = getattr(client_as(other_lead), method)(f"/services/{service.pk}/{route}")

    assert response.status_code == 404
    assert InferenceService.objects.get(pk=service.pk).state == "active"


def test_the_list_shows_the_teams_services(client_as, member, other_lead, service):
    assert "llm" in get_ok(client_as(member), "/services/").content.decode()
    assert (
        f"/services/{service.pk}/"
        not in get_ok(client_as(other_lead), "/services/").content.decode()
    )


def test_the_gpu_charts_need_a_prometheus(client_as, member, service):
    fragment = get_ok(client_as(member), f"/services/{service.pk}/gpus/").content.decode()

    assert "has no Prometheus URL" in fragment


def test_a_page_number_the_list_does_not_have_is_refused_not_replaced(client_as, member, service):
    """As on the jobs list (one list page serves both): a bad number is a 400 naming
    ``page``, a page past the end a 404, never page 1 in their place."""
    client = client_as(member)

    bad = client.get("/services/?page=first")
    past = client.get("/services/?page=99")

    assert bad.status_code == 400
    assert past.status_code == 404
