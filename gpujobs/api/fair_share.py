"""``GET /api/v1/teams/{slug}/fair-share/``: the team's standing for idle GPUs on each of its
Kueue clusters (``gpujobs.fair_share_reads.team_fair_share``), as the team page shows it."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import Cluster
from gpujobs import fair_share_reads
from tenants.selectors import teams_visible_to


class BorrowerSerializer(serializers.Serializer):
    """A team as Kueue's fair sharing ranks it for an idle GPU."""

    team = serializers.CharField(
        source="name", help_text='Its slug, or "another team" where the caller may not see it.'
    )
    weight = serializers.DecimalField(max_digits=8, decimal_places=3)
    effective_weight = serializers.DecimalField(
        source="borrowing_weight",
        max_digits=8,
        decimal_places=3,
        help_text="What its opportunistic queue borrows with: weight / (1 + decayed use / "
        "scale); the weight itself where the cluster does not decay use.",
    )
    decayed_use_gpu_hours = serializers.IntegerField(
        source="decayed_use",
        allow_null=True,
        help_text="Opportunistic GPU-hours, each halved every half-life; null where the cluster "
        "does not decay use.",
    )
    borrowed_gpus = serializers.FloatField(source="borrowed")
    share = serializers.FloatField(help_text="GPUs borrowed now over the effective weight.")
    share_after_next = serializers.FloatField(
        source="share_after",
        help_text="The share once its first waiting job is admitted: Kueue admits the lowest.",
    )
    waiting_jobs = serializers.IntegerField(source="waiting")


class HistoryDaySerializer(serializers.Serializer):
    date = serializers.DateField()
    borrowed_gpu_hours = serializers.FloatField(source="gpu_hours")
    decayed_use_gpu_hours = serializers.FloatField(
        source="decayed_use", help_text="At the day's end (now, for today)."
    )


class ClusterFairShareSerializer(serializers.Serializer):
    cluster = serializers.CharField(source="cluster.name")
    half_life_hours = serializers.IntegerField(help_text="0: use is not decayed.")
    usage_scale_gpu_hours = serializers.IntegerField(source="scale_gpu_hours")
    team = BorrowerSerializer()
    rank = serializers.IntegerField(
        allow_null=True, help_text="Its place in line for the next idle GPU; null: none waits."
    )
    waiting_teams = serializers.IntegerField()
    next_gpu = serializers.CharField(source="sentence")
    line = BorrowerSerializer(many=True, help_text="The teams waiting, the next in line first.")
    history = HistoryDaySerializer(many=True, help_text="The last 30 days, today last.")


class TeamFairShareSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    clusters = ClusterFairShareSerializer(
        many=True, help_text="One per Kueue cluster the team is on, by name."
    )


@extend_schema(
    summary="A team's fair share of idle GPUs on each of its Kueue clusters: its weight, "
    "effective weight, decayed use, share, place in line and 30 days of history",
    parameters=[
        OpenApiParameter("cluster", str, description="Only this cluster (its name)."),
    ],
    responses={200: TeamFairShareSerializer},
)
class TeamFairShareView(APIView):
    """For everyone in the team (and admins); another team's is a 404. Other teams are named
    only for portal admins."""

    permission_classes = [IsAuthenticated]

    def get(self, request, team_slug: str):
        team = teams_visible_to(request.user).filter(slug=team_slug).first()
        if team is None:
            raise NotFound("No such team.")
        clusters = None
        if name := request.query_params.get("cluster"):
            clusters = list(Cluster.objects.filter(name=name))
            if not clusters:
                raise ValidationError({"cluster": f"No cluster is named {name!r}."})
        standings = fair_share_reads.team_fair_share(
            user=request.user, team=team, clusters=clusters
        )
        return Response(TeamFairShareSerializer({"team": team, "clusters": standings}).data)
