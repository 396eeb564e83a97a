"""A cluster's allowed registries on its queueing page (admins): the form shows what the
cluster allows, saves a new list (audited, the cluster's reconcile asked for) and shows what
is wrong beside the field, changing nothing."""

import pytest

from clusters.models import Cluster
from tenants.models import AuditEvent, ClusterState
from tests.integration.pages.helpers import field_error_html, get_ok, messages_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def careful(cluster):
    cluster.allowed_registries = ["registry.example.com"]
    cluster.allow_all_registries = False
    cluster.save(update_fields=["allowed_registries", "allow_all_registries"])
    return cluster


def url(cluster) -> str:
    return f"/clusters/{cluster.name}/queueing/"


def registries(text: str, *, allow_all: bool = False) -> dict:
    body = {"form": "registries", "allowed_registries": text}
    if allow_all:
        body["allow_all_registries"] = "on"
    return body


def test_the_page_shows_the_registries_in_the_form(client_as, admin, careful):
    response = get_ok(client_as(admin), url(careful))

    form = response.context["registries_form"]
    assert form["allowed_registries"].value() == "registry.example.com"
    assert form["allow_all_registries"].value() is False
    html = response.content.decode()
    assert 'name="allowed_registries"' in html
    assert 'name="allow_all_registries"' in html


def test_an_admin_saves_a_list_one_a_line(client_as, admin, careful):
    response = client_as(admin).post(
        url(careful),
        registries("registry.example.com\r\nnvcr.io\r\n\r\nghcr.io/acme\r\n"),
        follow=True,
    )

    assert response.redirect_chain == [(f"{url(careful)}#registries", 302)]
    stored = Cluster.objects.get(pk=careful.pk)
    assert stored.allowed_registries == ["registry.example.com", "nvcr.io", "ghcr.io/acme"]
    assert stored.allow_all_registries is False
    assert (
        "now allows images from registry.example.com, nvcr.io, ghcr.io/acme"
        in (messages_text(response)[0])
    )
    event = AuditEvent.objects.get(action="cluster.settings_changed")
    assert event.before["allowed_registries"] == ["registry.example.com"]
    assert event.after["allowed_registries"] == stored.allowed_registries
    assert ClusterState.objects.get(cluster=careful).status == ClusterState.Status.PENDING
    # The quota mode is left alone.
    assert stored.quota_mode == "quota"


def test_an_admin_allows_every_registry(client_as, admin, careful):
    response = client_as(admin).post(
        url(careful), registries("registry.example.com", allow_all=True), follow=True
    )

    assert Cluster.objects.get(pk=careful.pk).allow_all_registries is True
    assert "now allows images from any registry" in messages_text(response)[0]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nvcr.io\nnvidia", "Not a registry: &#x27;nvidia&#x27;"),
        ("https://nvcr.io", "Not a registry"),
        ("\n".join(f"r{n}.example.com" for n in range(51)), "At most 50 registries"),
    ],
)
def test_a_bad_list_is_shown_beside_the_field_and_changes_nothing(
    client_as, admin, careful, text, says
):
    response = client_as(admin).post(url(careful), registries(text))

    assert response.status_code == 200
    assert says in field_error_html(response, "id_allowed_registries")
    # What was typed stays in the form, to be corrected.
    assert response.context["registries_form"]["allowed_registries"].value() == text
    assert Cluster.objects.get(pk=careful.pk).allowed_registries == ["registry.example.com"]
    assert not AuditEvent.objects.exists()
    assert not ClusterState.objects.filter(cluster=careful).exists()


@pytest.mark.parametrize("user_fixture", ["lead", "member"])
def test_only_admins_change_the_registries(client_as, request, admin, careful, user_fixture):
    body = registries("nvcr.io", allow_all=True)

    response = client_as(request.getfixturevalue(user_fixture)).post(url(careful), body)

    assert response.status_code == 403
    stored = Cluster.objects.get(pk=careful.pk)
    assert (stored.allowed_registries, stored.allow_all_registries) == (
        ["registry.example.com"],
        False,
    )
    # The same form is an admin's to post: the refusal was about who posted it.
    assert client_as(admin).post(url(careful), body).status_code == 302
    stored = Cluster.objects.get(pk=careful.pk)
    assert (stored.allowed_registries, stored.allow_all_registries) == (["nvcr.io"], True)
