"""``{% load gpujobs %}{% team_jobs team %}``: a team's jobs and the GPUs they hold, for the team
page. A template tag, so the tenants app needs no import of this one."""

from django import template

from gpujobs import selectors
from gpujobs.permissions import can_submit_jobs
from tenants.models import Membership

register = template.Library()

FINISHED_JOBS_SHOWN = 5
SUBMITTING_ROLES = {Membership.Role.LEAD.label, Membership.Role.MEMBER.label}


@register.inclusion_tag("gpujobs/_team_jobs.html", takes_context=True)
def team_jobs(context, team):
    """Every unfinished job of the team and its latest finished ones (one query), and whether
    the viewer may submit (from the role the team page already read, when it did)."""
    user = context["request"].user
    jobs = selectors.team_page_jobs(user, team=team, finished=FINISHED_JOBS_SHOWN)
    if "role" in context:
        can_submit = context["role"] in SUBMITTING_ROLES
    else:
        can_submit = can_submit_jobs(user, team)
    return {
        "team": team,
        "jobs": jobs,
        "in_use": selectors.gpus_in_use(jobs),
        "can_submit": can_submit,
    }
