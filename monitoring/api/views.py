"""Monitoring over REST. Teams are found among those the user may see (another team's slug is
a 404); the namespace queried is that team's slug, once confirmed as the portal's for the team
(``NamespaceNotConfirmed`` otherwise). Prometheus trouble raises ``PrometheusError``. The API's
one exception handler (``portal.api``) answers them with a 409 and a 503 with its reason."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from monitoring import dashboards, metrics, selectors, usage
from monitoring.api import serializers as s
from monitoring.forms import UsageReportForm, WindowForm
from monitoring.notifications import notifications_mark_read
from monitoring.prometheus import PrometheusNotConfigured
from tenants.selectors import teams_visible_to

CLUSTER = OpenApiParameter(
    "cluster", str, description="Cluster name (default: where the team has grants)."
)
WINDOW = OpenApiParameter("window", str, enum=["1h", "6h", "24h", "7d", "custom"])
START = OpenApiParameter("start", str, description="ISO 8601 (window=custom).")
END = OpenApiParameter("end", str, description="ISO 8601 (window=custom; default now).")


class MetricsAPIView(APIView):
    permission_classes = [IsAuthenticated]
    reads_team_namespace = True

    def team_and_cluster(self, slug: str, *, form=None):
        """The team (404 when not one of the user's), then the query string (400 when ``form``
        refuses it), then the cluster: bad input is a 400 before any cluster is asked."""
        team = get_object_or_404(teams_visible_to(self.request.user), slug=slug)
        if form is not None and form.is_bound and not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        clusters = selectors.team_clusters(team)
        wanted = self.request.query_params.get("cluster")
        cluster = next((c for c in clusters if c.name == wanted), None)
        if wanted and cluster is None:
            raise ValidationError({"cluster": [f"No cluster {wanted!r} with metrics."]})
        cluster = cluster or (clusters[0] if clusters else None)
        if cluster is None:
            raise PrometheusNotConfigured("No cluster has a Prometheus URL set.")
        return team, cluster


class TeamUtilisationView(MetricsAPIView):
    @extend_schema(
        summary="A team's GPU utilisation per pod over a window, and its pods holding GPUs",
        parameters=[CLUSTER, WINDOW, START, END],
        responses=s.TeamUtilisationSerializer,
    )
    def get(self, request, slug: str):
        form = WindowForm(request.query_params or None)
        team, cluster = self.team_and_cluster(slug, form=form)
        series = dashboards.team_series(team=team, cluster=cluster, window=form.window_value)
        return Response(s.TeamUtilisationSerializer(series).data)


class TeamPodsView(MetricsAPIView):
    @extend_schema(
        summary="A team's pods holding GPUs now, with the idle verdict",
        parameters=[CLUSTER],
        responses=s.TeamPodsSerializer,
    )
    def get(self, request, slug: str):
        team, cluster = self.team_and_cluster(slug)
        pods = metrics.team_pod_usage(team=team, cluster=cluster)
        data = {
            "team": team.slug,
            "cluster": cluster.name,
            "idle_threshold_percent": cluster.idle_utilization_percent,
            "idle_window_minutes": cluster.idle_window_minutes,
            "pods": pods,
        }
        return Response(s.TeamPodsSerializer(data).data)


class CsvRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, str):
            return data.encode()
        # Errors stay readable: the first message of each field, one per line.
        return "\n".join(f"{key}: {value}" for key, value in (data or {}).items()).encode()


class UsageReportView(MetricsAPIView):
    reads_team_namespace = False  # past hours of every visible team, not one namespace
    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(
        summary="GPU-hours granted, held and used per team, cluster and period",
        description="Teams are those you may see. `start` and `end` are dates (both included) "
        "or ISO 8601 date-times (end excluded); default: this month so far. `?format=csv` "
        "answers in CSV.",
        parameters=[
            OpenApiParameter("start", str),
            OpenApiParameter("end", str),
            OpenApiParameter("bucket", str, enum=["day", "week", "month", "total"]),
            OpenApiParameter(
                "department",
                str,
                description="A department's slug: only its teams, nested departments' included.",
            ),
        ],
        responses=s.UsageReportSerializer,
    )
    def get(self, request):
        params = request.query_params.copy()
        params.pop("format", None)
        form = UsageReportForm(params, user=request.user)
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        report = usage.usage_report(user=request.user, strict=True, **form.cleaned_data)
        if request.accepted_renderer.format == "csv":
            response = Response(report.csv(), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = 'attachment; filename="gpu-usage.csv"'
            return response
        return Response(s.UsageReportSerializer(report, context={"budgets": report.budgets}).data)


class NotificationListView(generics.ListAPIView):
    """Your notifications, newest first."""

    serializer_class = s.NotificationSerializer
    permission_classes = [IsAuthenticated]
    filter_backends = []

    def get_queryset(self):
        return selectors.notifications_for(self.request.user).order_by("-created_at", "-id")


class NotificationsReadView(APIView):
    """Mark your notifications read, as the notifications page does."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Mark your notifications read (all, or those named by id)",
        request=s.NotificationsReadSerializer,
        responses=s.NotificationsMarkedSerializer,
    )
    def post(self, request):
        serializer = s.NotificationsReadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        marked = notifications_mark_read(
            user=request.user, ids=serializer.validated_data.get("ids")
        )
        return Response({"marked": marked})
