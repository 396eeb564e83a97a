"""A grant's page: team members read it, admins shrink or revoke it."""

import datetime

import pytest

from tenants import quota
from tenants.models import QuotaGrant
from tests.integration.pages.helpers import field_error_html, get_ok, messages_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def grant(lead, team, make_grant):
    return make_grant(lead, team, gpus=6)


def test_member_reads_the_grant_and_its_history_without_forms(client_as, member, grant):
    html = get_ok(client_as(member), f"/grants/{grant.pk}/").content.decode()

    assert f"Grant #{grant.pk}: 6 × <code>nvidia.com/gpu</code> on gpu-east" in html
    assert "quota_grant.activated" in html
    assert "quota_request.created" in html
    assert "/revoke/" not in html
    assert "/shrink/" not in html


def test_admin_sees_shrink_and_revoke_forms(client_as, admin, grant):
    html = get_ok(client_as(admin), f"/grants/{grant.pk}/").content.decode()

    assert f'action="/grants/{grant.pk}/shrink/"' in html
    assert f'action="/grants/{grant.pk}/revoke/"' in html


def test_admin_shrinks_a_grant(client_as, admin, grant):
    until = grant.ends_on - datetime.timedelta(days=5)

    response = client_as(admin).post(
        f"/grants/{grant.pk}/shrink/",
        {"shrink-gpus": "2", "shrink-ends_on": until.isoformat(), "shrink-note": "Idle GPUs."},
        follow=True,
    )

    assert response.redirect_chain == [(f"/grants/{grant.pk}/", 302)]
    assert messages_text(response) == [
        f"Grant #{grant.pk} is now 2 × nvidia.com/gpu, {until.isoformat()}."
    ]
    grant.refresh_from_db()
    assert (grant.gpus, grant.ends_on) == (2, until)
    html = response.content.decode()
    assert "quota_grant.shrunk" in html
    assert "Idle GPUs." in html


@pytest.mark.parametrize(
    ("data", "field_id", "message"),
    [
        ({"shrink-gpus": "9"}, "id_shrink-gpus", "Can only shrink: the grant has 6 GPUs."),
        ({"shrink-gpus": "0"}, "id_shrink-gpus", "at least 1 (revoke to end it)"),
        ({"shrink-ends_on": "2999-01-01"}, "id_shrink-ends_on", "Can only end sooner"),
    ],
)
def test_bad_shrink_input_is_shown_beside_its_field(
    client_as, admin, grant, data, field_id, message
):
    response = client_as(admin).post(f"/grants/{grant.pk}/shrink/", data)

    assert response.status_code == 200
    assert message in field_error_html(response, field_id)
    grant.refresh_from_db()
    assert grant.gpus == 6


def test_shrinking_by_nothing_says_so_at_the_top_of_the_form(client_as, admin, grant):
    response = client_as(admin).post(f"/grants/{grant.pk}/shrink/", {"shrink-gpus": "6"})

    assert response.status_code == 200
    assert "Nothing to change: give fewer GPUs or an earlier end." in response.content.decode()
    assert response.context["shrink_form"].non_field_errors()


def test_admin_revokes_a_grant(client_as, admin, grant):
    response = client_as(admin).post(
        f"/grants/{grant.pk}/revoke/", {"revoke-note": "Project ended."}, follow=True
    )

    assert messages_text(response) == [f"Revoked grant #{grant.pk}."]
    grant.refresh_from_db()
    assert grant.state == QuotaGrant.State.REVOKED
    html = response.content.decode()
    assert "Revoked" in html
    assert f'action="/grants/{grant.pk}/revoke/"' not in html


@pytest.mark.parametrize("action", ["revoke", "shrink"])
def test_changing_an_ended_grant_shows_a_message_not_an_error(client_as, admin, grant, action):
    quota.quota_grant_revoke(actor=admin, grant=grant)

    response = client_as(admin).post(
        f"/grants/{grant.pk}/{action}/", {"shrink-gpus": "1"}, follow=True
    )

    assert response.status_code == 200
    verb = "revoke" if action == "revoke" else "change"
    assert messages_text(response) == [f"Cannot {verb} quota grant #{grant.pk}: it is revoked."]


@pytest.mark.parametrize("user", ["lead", "member"])
def test_team_members_cannot_revoke_or_shrink(request, client_as, grant, user):
    client = client_as(request.getfixturevalue(user))

    assert client.post(f"/grants/{grant.pk}/revoke/", {}).status_code == 403
    assert client.post(f"/grants/{grant.pk}/shrink/", {"shrink-gpus": "1"}).status_code == 403
    grant.refresh_from_db()
    assert (grant.state, grant.gpus) == ("active", 6)


def test_outsider_gets_404_for_a_grant(client_as, outsider, grant):
    assert client_as(outsider).get(f"/grants/{grant.pk}/").status_code == 404
