"""Shapes of the session API's JSON. A new session's fields are checked by
``SessionRequest.read`` (the one place the API, the page and the CLI share); the team's and the
cluster's rules are ``interactive.admission``'s. The server's token is never in any of them."""

from __future__ import annotations

from collections.abc import Mapping

from rest_framework import serializers
from rest_framework.settings import api_settings

from interactive import admission, culling_view
from interactive.models import InteractiveSession, policy_for
from interactive.specs import SessionRequest
from workloads.api.serializers import TeamClusterFields


class SessionSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    max_lifetime_hours = serializers.SerializerMethodField()
    home_gib = serializers.SerializerMethodField()
    url = serializers.CharField(source="path", read_only=True, help_text="Open it here.")
    stop_reason = serializers.CharField(
        read_only=True,
        help_text="Why its last run stopped: owner, idle, lifetime or admin; empty while active.",
    )
    ends_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the run reaches its lifetime."
    )
    idle = serializers.SerializerMethodField(
        help_text="Whether it is idle, since when, when it is stopped for it, and why."
    )

    class Meta:
        model = InteractiveSession
        fields = [
            "id",
            "name",
            "team",
            "cluster",
            "owner",
            "image",
            "gpus",
            "gpu_resource",
            "gpu_model",
            "cpu_cores",
            "memory_gib",
            "max_lifetime_hours",
            "home_gib",
            "state",
            "reason",
            "message",
            "run",
            "queue_name",
            "node",
            "url",
            "created_at",
            "started_at",
            "ends_at",
            "stopped_at",
            "stop_reason",
            "last_activity_at",
            "idle",
        ]
        read_only_fields = fields

    def get_max_lifetime_hours(self, session) -> int:
        return session.max_lifetime_seconds // 3600

    def get_home_gib(self, session) -> int | None:
        if hasattr(session, "home_size_gib"):  # selected with it (``sessions_visible_to``)
            return session.home_size_gib
        home = admission.home_volume_of(
            team=session.team, cluster=session.cluster, owner=session.owner
        )
        return home.size_gib if home else None

    def get_idle(self, session) -> dict | None:
        return culling_view.idle_summary(session)


class SessionCreateSerializer(TeamClusterFields):
    """A new session: its team and cluster, looked up here, and its own fields (see
    ``SessionRequest``). Validated data: ``team``, ``cluster`` and ``request``."""

    name = serializers.CharField(help_text="A short name for people.")
    image = serializers.CharField(
        required=False, help_text="Empty: the portal's default JupyterLab image."
    )
    gpus = serializers.IntegerField(required=False, help_text="0 (default) for a CPU session.")
    gpu_resource = serializers.CharField(required=False)
    gpu_model = serializers.CharField(required=False)
    cpu_cores = serializers.DecimalField(max_digits=7, decimal_places=2, required=False)
    memory_gib = serializers.DecimalField(max_digits=8, decimal_places=2, required=False)
    max_lifetime_hours = serializers.IntegerField(
        required=False, help_text="At most the team's maximum."
    )
    home_gib = serializers.IntegerField(
        required=False, help_text="Your home volume's size, the first time (then it is kept)."
    )

    def to_internal_value(self, data):
        if not isinstance(data, Mapping):
            raise serializers.ValidationError(
                {api_settings.NON_FIELD_ERRORS_KEY: ["Send a JSON object."]}
            )
        errors: dict = {}
        values = self.read_team_and_cluster(data, errors)
        team, cluster = values.get("team"), values.get("cluster")
        request, shape_errors = SessionRequest.read(
            data,
            team_max_lifetime_hours=policy_for(team).max_lifetime_hours if team else None,
        )
        user = self.context["request"].user
        refusals = (
            admission.session_refusals(team=team, cluster=cluster, owner=user, request=request)
            if team is not None and cluster is not None
            else {}
        )
        for key, message in {**refusals, **shape_errors}.items():
            errors[key] = [message]
        if errors:
            raise serializers.ValidationError(errors)
        return {"team": team, "cluster": cluster, "request": request}
