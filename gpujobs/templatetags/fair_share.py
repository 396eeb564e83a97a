"""``{% load fair_share %}{% team_fair_share team %}``: the team's standing for idle GPUs on
each of its Kueue clusters, for the team page; ``{% job_fair_share job %}``: the same for the
cluster of a waiting opportunistic job, for its page. Template tags, so the tenants app needs
no import of this one. The section loads the chart scripts itself on the team page, which
charts nothing else; the job page loads them in its head for its own charts."""

from django import template

from clusters.vocabulary import OPPORTUNISTIC
from gpujobs import fair_share_reads
from gpujobs.fair_share_reads import WAITING_STATES

register = template.Library()


@register.inclusion_tag("gpujobs/_fair_share.html", takes_context=True)
def team_fair_share(context, team):
    """A section per Kueue cluster of the team (none without one)."""
    states = context.get("cluster_states")
    clusters = None if states is None else [state.cluster for state in states]
    return {
        "team": team,
        "standings": fair_share_reads.team_fair_share(
            user=context["request"].user, team=team, clusters=clusters
        ),
        "heading": "Fair share of idle GPUs",
        "load_chart_scripts": True,
    }


@register.inclusion_tag("gpujobs/_fair_share.html", takes_context=True)
def job_fair_share(context, job):
    """For an opportunistic job waiting on a Kueue cluster: its team's standing there."""
    standings = []
    if job.priority == OPPORTUNISTIC and job.state in WAITING_STATES:
        standings = fair_share_reads.team_fair_share(
            user=context["request"].user, team=job.team, clusters=[job.cluster]
        )
    return {
        "team": job.team,
        "standings": standings,
        "heading": "Its team's turn for an idle GPU",
        "load_chart_scripts": False,
    }
