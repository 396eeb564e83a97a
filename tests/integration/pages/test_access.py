"""Who may open which page: sign-in, team visibility (404, never a leak), roles (403)."""

import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse

from tests import factories
from tests.factories import PASSWORD
from tests.integration.pages.helpers import get_ok

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    ["/", "/teams/vision/", "/teams/vision/requests/new/", "/review/", "/grants/1/", "/audit/"],
)
def test_every_page_sends_an_anonymous_visitor_to_sign_in(client, team, url):
    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.parametrize(
    "url",
    [
        "/requests/1/cancel/",
        "/requests/1/approve/",
        "/requests/1/reject/",
        "/grants/1/revoke/",
        "/grants/1/shrink/",
    ],
)
def test_every_action_sends_an_anonymous_visitor_to_sign_in(client, url):
    response = client.post(url)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_lead_signs_in_with_a_password_and_lands_on_their_teams(client, lead):
    page = get_ok(client, reverse("login"))
    assert 'name="csrfmiddlewaretoken"' in page.content.decode()

    response = client.post(
        reverse("login"), {"username": "lena-lead", "password": PASSWORD}, follow=True
    )

    assert response.redirect_chain[-1][0] == reverse("home")
    assert "Vision" in response.content.decode()


def test_wrong_password_shows_an_error_and_does_not_sign_in(client, lead):
    response = client.post(reverse("login"), {"username": "lena-lead", "password": "nope"})

    assert response.status_code == 200
    assert "enter a correct username and password" in response.content.decode()
    assert client.get("/").status_code == 302


def test_sign_out_is_a_post_form_with_csrf(client_as, lead):
    html = get_ok(client_as(lead), "/").content.decode()

    form = re.search(r'<form method="post" action="/logout/">(.*?)</form>', html, re.S)
    assert form is not None
    assert "csrfmiddlewaretoken" in form.group(1)


def test_home_lists_only_the_users_teams_with_their_role(client_as, lead, other_team):
    html = get_ok(client_as(lead), "/").content.decode()

    assert "/teams/vision/" in html
    assert "Lead" in html
    assert "/teams/speech/" not in html
    assert "Review queue" not in html


def test_home_shows_each_teams_active_grants(client_as, lead, team, make_grant):
    make_grant(lead, team, gpus=3)
    make_grant(lead, team, gpus=2)

    html = get_ok(client_as(lead), "/").content.decode()

    assert "<strong>5</strong> × nvidia.com/gpu" in html


def test_admin_home_lists_every_team_and_links_the_review_queue(
    client_as, admin, lead, team, other_team, make_request
):
    make_request(lead, team)

    html = get_ok(client_as(admin), "/").content.decode()

    assert "/teams/vision/" in html
    assert "/teams/speech/" in html
    assert 'href="/review/"' in html
    assert "1 quota request waiting for a decision" in html


def test_user_without_teams_is_told_so(client_as, outsider):
    html = get_ok(client_as(outsider), "/").content.decode()

    assert "not a member of any team" in html


def test_an_admin_without_teams_is_told_how_to_make_them(client_as, db):
    admin = factories.AdminFactory(username="first-admin")

    html = get_ok(client_as(admin), "/").content.decode()

    assert "not a member of any team" not in html
    assert "POST /api/v1/teams/" in html
    assert 'href="/django-admin/tenants/team/"' in html


@pytest.mark.parametrize("url", ["/teams/vision/", "/teams/vision/requests/new/"])
def test_lead_of_another_team_gets_404_for_team_pages(client_as, other_lead, team, url):
    assert client_as(other_lead).get(url).status_code == 404


def test_outsider_gets_404_for_a_team_page(client_as, outsider, team):
    response = client_as(outsider).get("/teams/vision/")

    assert response.status_code == 404
    assert "nothing you can see" in response.content.decode()


def test_lead_of_another_team_gets_404_for_requests_and_grants(
    client_as, other_lead, lead, team, make_request, make_grant
):
    pending = make_request(lead, team)
    grant = make_grant(lead, team)
    client = client_as(other_lead)

    assert client.get(f"/grants/{grant.pk}/").status_code == 404
    for action in ("cancel", "approve", "reject"):
        assert client.post(f"/requests/{pending.pk}/{action}/").status_code == 404
    for action in ("revoke", "shrink"):
        assert client.post(f"/grants/{grant.pk}/{action}/").status_code == 404
    pending.refresh_from_db()
    assert pending.state == "pending"


@pytest.mark.parametrize("user", ["member", "viewer"])
def test_members_and_viewers_cannot_request_quota(request, client_as, cluster, team, user):
    client = client_as(request.getfixturevalue(user))

    assert "Request quota" not in get_ok(client, "/teams/vision/").content.decode()
    assert client.get("/teams/vision/requests/new/").status_code == 403
    response = client.post(
        "/teams/vision/requests/new/",
        {
            "cluster": cluster.pk,
            "gpu_resource": "nvidia.com/gpu",
            "gpus": 1,
            "starts_on": "2099-01-01",
            "justification": "Please",
        },
    )
    assert response.status_code == 403
    assert "Only leads of vision" in response.content.decode()
    assert not team.quotarequest_set.exists()


@pytest.mark.parametrize("user", ["lead", "member", "outsider"])
def test_review_queue_is_for_admins_only(request, client_as, admin, user):
    assert client_as(request.getfixturevalue(user)).get("/review/").status_code == 403
    assert client_as(admin).get("/review/").status_code == 200


def test_nav_links_the_review_queue_only_for_admins(client_as, admin, lead):
    assert 'href="/review/"' not in get_ok(client_as(lead), "/audit/").content.decode()
    assert 'href="/review/"' in get_ok(client_as(admin), "/audit/").content.decode()


def test_lead_cannot_approve_or_reject_their_own_request(client_as, lead, team, make_request):
    quota_request = make_request(lead, team)
    client = client_as(lead)

    approve = client.post(f"/requests/{quota_request.pk}/approve/", {})
    reject = client.post(
        f"/requests/{quota_request.pk}/reject/", {f"reject-{quota_request.pk}-note": "x"}
    )

    assert approve.status_code == 403
    assert reject.status_code == 403
    quota_request.refresh_from_db()
    assert quota_request.state == "pending"


def test_admin_who_filed_a_request_cannot_approve_it(client_as, admin, team, make_request):
    quota_request = make_request(admin, team)
    client = client_as(admin)

    queue = get_ok(client, "/review/").content.decode()
    response = client.post(f"/requests/{quota_request.pk}/approve/", {})

    assert "another admin must decide it" in queue
    assert f'action="/requests/{quota_request.pk}/approve/"' not in queue
    assert response.status_code == 403
    assert "cannot decide on a quota request you made yourself" in response.content.decode()


ASSET_URL = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)


def test_pages_load_no_assets_from_other_hosts(
    client_as, admin, lead, team, make_grant, make_request
):
    grant = make_grant(lead, team)
    make_request(lead, team)
    urls = [
        "/",
        "/teams/vision/",
        "/teams/vision/requests/new/",
        "/review/",
        f"/grants/{grant.pk}/",
        "/audit/",
    ]

    pages = [get_ok(client_as(admin), url).content.decode() for url in urls]
    pages.append(get_ok(client_as(lead), "/teams/vision/requests/new/").content.decode())
    pages.append(get_ok(Client(), reverse("login")).content.decode())

    for url, html in zip([*urls, "new (lead)", "login"], pages, strict=True):
        assert not ASSET_URL.search(html), url
        assert "/static/css/portal.css" in html
        assert "/static/django_htmx/htmx-2.min.js" in html


def test_htmx_and_the_stylesheet_are_local_static_files():
    for path in ("django_htmx/htmx-2.min.js", "css/portal.css", "img/favicon.svg"):
        assert finders.find(path), path


def test_pages_carry_a_content_security_policy_without_inline_script(client_as, lead):
    response = client_as(lead).get("/")

    policy = response["Content-Security-Policy"]
    directives = dict(part.strip().partition(" ")[::2] for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert "frame-ancestors 'none'" in policy
