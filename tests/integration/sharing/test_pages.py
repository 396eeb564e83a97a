"""The sharing layout pages: a lead's form previews what a layout makes and asks for it; the
team's list shows state and progress; admins review pending layouts with what they change."""

import datetime

import pytest
from django.urls import reverse

from sharing.models import LayoutRequest
from tests.integration.pages.helpers import get_ok, messages_text
from tests.integration.sharing.conftest import A100

pytestmark = pytest.mark.django_db


def form_data(grant, today, **overrides):
    return {
        "source_grant": grant.pk,
        "gpus": 2,
        "kind": "mig",
        "mig_profile": "1g.10gb",
        "replicas": "",
        "ends_on": (today + datetime.timedelta(days=7)).isoformat(),
        "justification": "Notebooks.",
        **overrides,
    }


def test_the_form_previews_what_the_layout_becomes(client_as, lead, team, a100_grant, today):
    url = reverse("sharing-layout-new", args=[team.slug])

    page = get_ok(
        client_as(lead),
        url + "?" + "&".join(f"{k}={v}" for k, v in form_data(a100_grant, today).items()),
    )

    until = (today + datetime.timedelta(days=7)).isoformat()
    assert f"2 × {A100} → 14 × nvidia.com/mig-1g.10gb until {until}" in page.content.decode()


def test_a_lead_asks_from_the_form(client_as, lead, team, a100_grant, today):
    client = client_as(lead)
    response = client.post(
        reverse("sharing-layout-new", args=[team.slug]), form_data(a100_grant, today), follow=True
    )

    layout = LayoutRequest.objects.get()
    assert layout.slices == 14
    assert any(f"sharing layout #{layout.pk}" in m for m in messages_text(response))
    assert "Pending" in response.content.decode()


def test_a_bad_profile_is_an_error_beside_the_field(client_as, lead, team, a100_grant, today):
    response = client_as(lead).post(
        reverse("sharing-layout-new", args=[team.slug]),
        form_data(a100_grant, today, kind="shared", mig_profile="", replicas=""),
    )

    assert response.status_code == 200
    assert "replicas" in response.context["form"].errors
    assert not LayoutRequest.objects.exists()


def test_members_see_the_list_but_not_the_form_and_others_get_a_404(
    client_as, member, other_lead, team, pending_layout
):
    listing = get_ok(client_as(member), reverse("sharing-layout-list", args=[team.slug]))
    assert f"#{pending_layout.pk}" in listing.content.decode()
    new = reverse("sharing-layout-new", args=[team.slug])
    assert client_as(member).get(new).status_code == 403
    assert (
        client_as(other_lead).get(reverse("sharing-layout-list", args=[team.slug])).status_code
        == 404
    )


def test_the_review_shows_what_changes_and_says_when_the_cluster_cannot_be_read(
    client_as, admin, pending_layout
):
    page = get_ok(client_as(admin), reverse("sharing-review")).content.decode()

    assert f"2 of grant #{pending_layout.source_grant_id}'s 4 whole {A100} become" in page
    assert "14 × nvidia.com/mig-1g.10gb" in page
    assert "Cannot read cluster gpu-east now" in page  # no kubeconfig: said, not a 500


def test_an_admin_approves_from_the_review(client_as, admin, pending_layout, monkeypatch):
    from sharing import services

    monkeypatch.setattr(services, "send_task", lambda *a, **k: None)
    response = client_as(admin).post(
        reverse("sharing-layout-decide", args=[pending_layout.pk]),
        {f"l{pending_layout.pk}-note": "Go.", "decision": "approve"},
    )

    assert response.status_code == 302
    pending_layout.refresh_from_db()
    assert pending_layout.state == LayoutRequest.State.APPROVED


def test_rejecting_without_a_note_shows_the_error_on_the_review(client_as, admin, pending_layout):
    response = client_as(admin).post(
        reverse("sharing-layout-decide", args=[pending_layout.pk]),
        {f"l{pending_layout.pk}-note": "", "decision": "reject"},
    )

    assert response.status_code == 200
    assert "Tell the team why" in response.content.decode()
    pending_layout.refresh_from_db()
    assert pending_layout.state == LayoutRequest.State.PENDING


def test_leads_cannot_see_the_review(client_as, lead):
    assert client_as(lead).get(reverse("sharing-review")).status_code == 403
