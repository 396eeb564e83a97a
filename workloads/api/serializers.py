"""Shapes of JSON every workload's API shares: an environment variable, a new workload's team
and cluster, a container's log, an event about a workload's objects."""

from collections.abc import Mapping

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from clusters.models import Cluster
from tenants.models import Team
from tenants.selectors import teams_visible_to


class EnvVarSerializer(serializers.Serializer):
    name = serializers.CharField(trim_whitespace=False)
    value = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, default=""
    )


class TeamClusterFields(serializers.Serializer):
    """A new workload's team (by slug) and cluster (by name), for the create serializers of
    every workload app (``gpujobs.api``, ``serving.api``): ``read_request`` looks them up, then
    the app's ``admission`` reads the rest of the body."""

    team = serializers.SlugRelatedField(
        slug_field="slug", queryset=Team.objects.none(), help_text="Team slug."
    )
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), help_text="Cluster name."
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        user = request.user if request is not None else None
        # Only teams the user can see: another team's slug reads as "does not exist".
        self.fields["team"].queryset = teams_visible_to(user) if user else Team.objects.none()

    def read_request(self, data: Mapping, errors: dict, *, parse, key: str) -> dict:
        """``team`` and ``cluster`` as found, and under ``key`` what ``parse`` (the app's
        ``admission.parse_*_request``) makes of ``data`` for them; each bad field is named in
        ``errors``."""
        values = self.read_team_and_cluster(data, errors)
        try:
            values[key] = parse(data, team=values.get("team"), cluster=values.get("cluster"))
        except DjangoValidationError as error:
            errors.update(error.message_dict)
        return values

    def read_team_and_cluster(self, data: Mapping, errors: dict) -> dict:
        """``team`` and ``cluster`` as found (each bad one named in ``errors``)."""
        values = {}
        for name in ("team", "cluster"):
            field = self.fields[name]
            try:
                values[name] = field.run_validation(field.get_value(data))
            except serializers.ValidationError as error:
                errors[name] = error.detail
        return values


class LogSerializer(serializers.Serializer):
    pod = serializers.CharField(allow_null=True)
    container = serializers.CharField()
    tail = serializers.IntegerField()
    log = serializers.CharField(allow_blank=True)
    detail = serializers.CharField(allow_blank=True)


class WorkloadEventSerializer(serializers.Serializer):
    time = serializers.DateTimeField(allow_null=True)
    type = serializers.CharField()
    reason = serializers.CharField()
    object = serializers.CharField()
    message = serializers.CharField(allow_blank=True)
    count = serializers.IntegerField()
