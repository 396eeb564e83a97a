"""``{% load member_limits %}{% team_member_limits team %}``: each member's limit on each
cluster beside their use now, and for the team's leads the form that sets one. A template tag,
so the team page (``tenants``) needs no import of this app."""

from django import template

from tenants.models import Membership
from workloads.member_limits import team_limits
from workloads.permissions import can_set_member_limits

register = template.Library()


@register.inclusion_tag("workloads/_member_limits.html", takes_context=True)
def team_member_limits(context, team, form=None):
    """The rows, a link to the form for a lead on the team page, the form itself (``form``)
    on the form's page."""
    if "role" in context and "is_admin" in context:
        # The team page read the viewer's role already.
        may_set = context["is_admin"] or context["role"] == Membership.Role.LEAD.label
    else:
        may_set = can_set_member_limits(context["request"].user, team)
    return {
        "team": team,
        "rows": team_limits(team),
        "may_set": may_set,
        "form": form if may_set else None,
        "csrf_token": context.get("csrf_token"),
    }
