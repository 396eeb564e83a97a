"""``{% load gpujobs %}{% team_jobs team %}``: a team's jobs and the GPUs they hold (and, on Kueue
clusters, its queue: admitted and waiting jobs, GPUs borrowed and lent), for the team page;
``{% cohort_usage cluster %}``: a Kueue cluster's cohort usage per team, for the cluster page.
Template tags, so the tenants and monitoring apps need no import of this one."""

from django import template

from clusters.models import QuotaMode
from gpujobs import queue_reads, selectors
from gpujobs.observe import ACTIVE_STATES
from tenants.models import Membership
from workloads import queueing
from workloads.permissions import can_run_workloads

register = template.Library()

# A team page shows this many of the team's newest unfinished jobs and of its finished ones:
# a team with a thousand jobs waiting gets the same page as one with ten (the counts above the
# table, and the job list, have them all).
UNFINISHED_JOBS_SHOWN = 50
FINISHED_JOBS_SHOWN = 5
SUBMITTING_ROLES = {Membership.Role.LEAD.label, Membership.Role.MEMBER.label}


@register.inclusion_tag("gpujobs/_team_jobs.html", takes_context=True)
def team_jobs(context, team):
    """The team's newest unfinished jobs and its latest finished ones (one query), the GPUs and
    jobs of all its unfinished ones (one), and whether the viewer may submit (from the role the
    team page already read, when it did)."""
    user = context["request"].user
    jobs = selectors.team_page_jobs(
        user, team=team, unfinished=UNFINISHED_JOBS_SHOWN, finished=FINISHED_JOBS_SHOWN
    )
    in_use = selectors.gpus_in_use(user, team=team)
    unfinished = [j for j in jobs if not j.is_final]
    unfinished_shown = len(unfinished)
    unfinished_in_all = sum(row["jobs"] for row in in_use)
    clusters = _clusters(context)
    on_kueue = clusters is None or any(queueing.kueue_mode(c) for c in clusters)
    if unfinished_in_all > unfinished_shown and on_kueue:
        # The Kueue queues count every waiting job, not the page's newest: read those (one
        # query, on a team page with more unfinished jobs than it shows).
        unfinished = list(
            selectors.jobs_visible_to(user).filter(
                team=team, state__in=ACTIVE_STATES, cluster__quota_mode=QuotaMode.KUEUE
            )
        )
    if "role" in context:
        can_submit = context["role"] in SUBMITTING_ROLES
    else:
        can_submit = can_run_workloads(user, team)
    return {
        "team": team,
        "jobs": jobs,
        "in_use": in_use,
        "unfinished_shown": unfinished_shown,
        # A queue's waiting table shows as many, in Kueue's order.
        "jobs_shown": UNFINISHED_JOBS_SHOWN,
        "waiting_slice": f":{UNFINISHED_JOBS_SHOWN}",
        "unfinished_in_all": unfinished_in_all,
        "can_submit": can_submit,
        "queues": queue_reads.team_queues(team=team, jobs=unfinished, clusters=clusters),
    }


def _clusters(context) -> list | None:
    """The team's clusters, when the team page has read them already."""
    states = context.get("cluster_states")
    return None if states is None else [state.cluster for state in states]


@register.inclusion_tag("gpujobs/_cohort_usage.html")
def cohort_usage(cluster):
    """The cluster's cohorts, per team and GPU model: own, in use, borrowed, lent, idle."""
    return {"usage": queue_reads.cohort_usage(cluster), "cluster": cluster}
