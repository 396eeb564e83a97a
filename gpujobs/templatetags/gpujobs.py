"""``{% load gpujobs %}{% team_jobs team %}``: a team's jobs and the GPUs they hold (and, on Kueue
clusters, its queue: admitted and waiting jobs, GPUs borrowed and lent), for the team page;
``{% cohort_usage cluster %}``: a Kueue cluster's cohort usage per team, for the cluster page.
Template tags, so the tenants and monitoring apps need no import of this one."""

from django import template

from gpujobs import queue_reads, selectors
from tenants.models import Membership
from workloads.permissions import can_run_workloads

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
        can_submit = can_run_workloads(user, team)
    return {
        "team": team,
        "jobs": jobs,
        "in_use": selectors.gpus_in_use(jobs),
        "can_submit": can_submit,
        "queues": queue_reads.team_queues(
            team=team, jobs=[j for j in jobs if not j.is_final], clusters=_clusters(context)
        ),
    }


def _clusters(context) -> list | None:
    """The team's clusters, when the team page has read them already."""
    states = context.get("cluster_states")
    return None if states is None else [state.cluster for state in states]


@register.inclusion_tag("gpujobs/_cohort_usage.html")
def cohort_usage(cluster):
    """The cluster's cohorts, per team and GPU model: own, in use, borrowed, lent, idle."""
    return {"usage": queue_reads.cohort_usage(cluster), "cluster": cluster}
