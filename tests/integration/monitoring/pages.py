"""Reading monitoring pages in tests: who is a member, whose namespace is the portal's, and the
figures a page embeds."""

from __future__ import annotations

import json
import re

from monitoring import figures
from tenants.models import Membership, TeamCluster
from tests import factories


def member_of(team, username, role=Membership.Role.MEMBER):
    user = factories.UserFactory(username=username)
    factories.MembershipFactory(team=team, user=user, role=role)
    return user


def portal_namespace(team, cluster):
    """Record the team's namespace on the cluster as the portal's, as a reconcile pass that
    found it so would: these tests make namespaces by hand, and monitoring reads a team's
    namespace only once the portal owns it."""
    return factories.TeamClusterFactory(
        team=team, cluster=cluster, status=TeamCluster.Status.IN_SYNC, namespace_owned=True
    )


def figure_on_page(response, key: str) -> dict | None:
    """The Plotly figure a page embeds for chart ``key`` (None when it shows a message)."""
    match = re.search(
        rf'<script id="figure-{re.escape(key)}" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    return json.loads(match.group(1)) if match else None


def chart_values(response, key: str) -> dict:
    figure = figure_on_page(response, key)
    return figures.last_values(figure) if figure else {}
