"""Pages whose rows only accumulate show a page of them: the home page's teams (an admin sees
every team) and a team's ended grants."""

import pytest

from tests import factories
from tests.integration.pages.helpers import get_ok

pytestmark = pytest.mark.django_db

HOME_PAGE_SIZE = 50
ENDED_GRANTS_SHOWN = 50


def test_home_shows_an_admin_a_page_of_teams(client_as, admin):
    factories.TeamFactory.create_batch(HOME_PAGE_SIZE + 1)
    client = client_as(admin)

    first = get_ok(client, "/")
    second = get_ok(client, "/?page=2")

    assert len(first.context["rows"]) == HOME_PAGE_SIZE
    assert len(second.context["rows"]) == 1
    assert 'href="?page=2"' in first.content.decode()


def test_team_page_shows_the_newest_ended_grants(client_as, lead, team, cluster, admin):
    ended = [
        factories.QuotaGrantFactory(
            request__team=team, request__cluster=cluster, granted_by=admin, state="expired"
        )
        for _ in range(ENDED_GRANTS_SHOWN + 1)
    ]
    active = factories.QuotaGrantFactory(
        request__team=team, request__cluster=cluster, granted_by=admin
    )

    response = get_ok(client_as(lead), f"/teams/{team.slug}/")

    shown = {grant.pk for grant in response.context["ended_grants"]}
    assert shown == {grant.pk for grant in ended[1:]}
    assert [grant.pk for grant in response.context["active_grants"]] == [active.pk]
