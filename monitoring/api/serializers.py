"""What the monitoring API sends. Read-only: every figure is computed by ``dashboards``,
``metrics`` and ``usage``."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from monitoring.models import Notification


class WindowSerializer(serializers.Serializer):
    label = serializers.CharField(help_text="1h, 6h, 24h, 7d or custom.")
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class PodUsageSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    pod = serializers.CharField()
    gpus = serializers.IntegerField(
        help_text="GPU units the pod holds now: whole GPUs, MIG slices and replicas of a shared "
        "GPU, one each."
    )
    gpu_equivalents = serializers.FloatField(
        help_text="What the pod holds as GPU equivalents: a MIG slice as its share of a GPU "
        "(1g.10gb on an A100: 1/7), a replica of a shared GPU as 1/replicas."
    )
    gpus_described = serializers.CharField(
        help_text='What the pod holds in words, e.g. "2 GPUs" or "1 × 1g.10gb slice (1/7 GPU)".'
    )
    average_utilisation = serializers.FloatField(
        allow_null=True,
        help_text="Average utilisation of its GPUs over the cluster's idle window, in %; null "
        "while the pod is younger than the window.",
    )
    idle = serializers.BooleanField(help_text="Average under the cluster's idle threshold.")


class PodSeriesSerializer(serializers.Serializer):
    pod = serializers.CharField()
    points = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
        help_text="[unix seconds, utilisation in % or null] pairs, one per step.",
    )


class TeamUtilisationSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField(source="cluster.name")
    window = WindowSerializer()
    step_seconds = serializers.IntegerField(source="step")
    gpus_granted = serializers.IntegerField(
        help_text="GPU units the team's grants on the cluster give it today (a MIG slice or a "
        "shared GPU's replica counts one)."
    )
    gpu_equivalents_granted = serializers.FloatField(
        help_text="The same grants as GPU equivalents (a slice or a replica as its share of a "
        "GPU): what the pods' gpu_equivalents add up against."
    )
    series = PodSeriesSerializer(many=True, help_text="Average utilisation per pod.")
    pods = PodUsageSerializer(many=True, help_text="Pods holding GPUs now.")


class TeamPodsSerializer(serializers.Serializer):
    team = serializers.CharField()
    cluster = serializers.CharField()
    idle_threshold_percent = serializers.IntegerField()
    idle_window_minutes = serializers.IntegerField()
    pods = PodUsageSerializer(many=True)


class UsageRowSerializer(serializers.Serializer):
    team = serializers.CharField(source="team_slug")
    team_name = serializers.CharField()
    cluster = serializers.CharField()
    period_start = serializers.DateTimeField(source="period.start")
    period_end = serializers.DateTimeField(source="period.end")
    granted_gpu_hours = serializers.FloatField(
        help_text="GPU-hours the team's grants allowed, as GPU equivalents (a MIG slice or a "
        "shared GPU's replica as its share of a GPU), like held_gpu_hours."
    )
    held_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="GPU-hours the team's pods held, as GPU equivalents."
    )
    used_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="Held GPU-hours weighted by utilisation."
    )
    utilisation_percent = serializers.FloatField(allow_null=True)
    budget_gpu_hours = serializers.SerializerMethodField(
        help_text="The team's budget (its monthly one first, of every model first); null: none."
    )
    budget_spent_gpu_hours = serializers.SerializerMethodField(
        help_text="What the period spent of that budget on all the team's clusters (GPU "
        "equivalents); null: no budget, or Prometheus could not say."
    )

    def _budget(self, row) -> tuple[float | None, float | None]:
        budgets = self.context.get("budgets", {})
        return budgets.get((row.team_slug, row.period.start), (None, None))

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_budget_gpu_hours(self, row) -> float | None:
        return self._budget(row)[0]

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_budget_spent_gpu_hours(self, row) -> float | None:
        return self._budget(row)[1]


class UsageReportSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    bucket = serializers.CharField()
    rows = UsageRowSerializer(many=True)


class NotificationSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = Notification
        fields = ["id", "kind", "team", "subject", "body", "link", "created_at", "read_at"]
        read_only_fields = fields


class NotificationsReadSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
        required=False,
        allow_empty=False,
        max_length=1000,
        help_text="Your notifications to mark read; leave out to mark all of them read.",
    )


class NotificationsMarkedSerializer(serializers.Serializer):
    marked = serializers.IntegerField(help_text="How many were unread and are read now.")
