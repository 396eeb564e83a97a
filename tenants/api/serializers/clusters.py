"""Clusters: their capacity per GPU kind and model, and the settings admins change."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from clusters.models import (
    MAX_BORROWER_MIN_RUNTIME_SECONDS,
    MAX_FAIR_SHARE_HALF_LIFE_HOURS,
    MAX_PREEMPTION_GRACE_SECONDS,
    Cluster,
    QuotaMode,
)
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from core.fields import StringField
from tenants.cluster_settings import MAX_ALLOWED_REGISTRIES, MAX_REGISTRY_ENTRY_LENGTH


def cluster_named(name: str) -> Cluster:
    """The cluster of that name, or the field's error saying there is none."""
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise serializers.ValidationError(f"No cluster named {name!r}.")
    return cluster


class GpuKindCapacitySerializer(serializers.Serializer):
    resource_name = serializers.CharField(help_text=f"e.g. {DEFAULT_GPU_RESOURCE}")
    gpu_model = serializers.CharField()
    capacity = serializers.IntegerField(help_text="GPUs the portal may plan with.")
    plannable = serializers.IntegerField(help_text="Capacity times the overcommit ratio.")
    granted = serializers.IntegerField(help_text="GPUs active grants hold from today on.")
    free = serializers.IntegerField(help_text="Plannable minus granted.")


class GpuModelCapacitySerializer(serializers.Serializer):
    resource_name = serializers.CharField(help_text=f"e.g. {DEFAULT_GPU_RESOURCE}")
    gpu_model = serializers.CharField(help_text="As the cluster's GPU model node label names it.")
    capacity = serializers.IntegerField(help_text="GPUs of this model the portal may plan with.")
    plannable = serializers.IntegerField(help_text="Capacity times the overcommit ratio.")
    granted = serializers.IntegerField(help_text="GPUs active grants of this model hold.")
    free = serializers.IntegerField(help_text="Plannable minus granted.")
    nodes = serializers.IntegerField(help_text="Usable (Ready, schedulable) nodes of the model.")
    max_per_node = serializers.IntegerField(
        help_text="The most GPUs one node of the model offers: no job larger fits."
    )


def model_rows(summaries) -> list[dict]:
    return [
        {
            "resource_name": m.gpu_resource,
            "gpu_model": m.gpu_model,
            "capacity": m.capacity,
            "plannable": m.plannable,
            "granted": m.granted,
            "free": m.free,
            "nodes": m.nodes,
            "max_per_node": m.max_per_node,
        }
        for m in summaries
    ]


class ClusterSerializer(serializers.ModelSerializer):
    gpus = serializers.SerializerMethodField(help_text="Capacity per GPU kind.")
    gpu_models = serializers.SerializerMethodField(
        help_text="Capacity per GPU model of each kind (grants of a model count against both)."
    )
    allowed_registries = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Registries every container in the cluster's team namespaces may pull from: a "
        "host, or a path under one. Empty allows none unless allow_all_registries.",
    )

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "display_name",
            "overcommit_ratio",
            "quota_mode",
            "borrowers_share_by_weight",
            "fair_share_half_life_hours",
            "fair_share_usage_scale_gpu_hours",
            "borrower_min_runtime_seconds",
            "lender_wait_bound_seconds",
            "preemption_grace_seconds",
            "allowed_registries",
            "allow_all_registries",
            "gpus",
            "gpu_models",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(GpuModelCapacitySerializer(many=True))
    def get_gpu_models(self, cluster: Cluster) -> list[dict]:
        by_kind = self.context["model_capacity"]
        return model_rows(
            m
            for (cluster_id, _), models in by_kind.items()
            if cluster_id == cluster.pk
            for m in models
        )

    @extend_schema_field(GpuKindCapacitySerializer(many=True))
    def get_gpus(self, cluster: Cluster) -> list[dict]:
        # The view passes capacity_summaries() in the context and prefetches gpu_capacities.
        summaries = self.context["capacity"]
        rows = []
        for gpu in cluster.gpu_capacities.all():
            summary = summaries.get((cluster.pk, gpu.resource_name))
            plannable = summary.plannable if summary else 0
            granted = summary.granted if summary else 0
            rows.append(
                {
                    "resource_name": gpu.resource_name,
                    "gpu_model": gpu.gpu_model,
                    "capacity": gpu.capacity,
                    "plannable": plannable,
                    "granted": granted,
                    "free": plannable - granted,
                }
            )
        return rows


class TrueOrFalseField(serializers.BooleanField):
    """A JSON true or false (or the text "true" or "false", as a form sends it). DRF's
    ``BooleanField`` also reads 1, 0, "yes", "on", "t"...: a setting that opens a cluster to
    every registry is switched on by true only. Left out of a form's body, it is left out (DRF
    reads a missing checkbox as false)."""

    default_empty_html = empty
    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and data in ("true", "false"):
            return data == "true"
        self.fail("invalid")


class ClusterSettingsSerializer(serializers.Serializer):
    overcommit_ratio = serializers.DecimalField(
        max_digits=5,
        decimal_places=2,
        required=False,
        help_text="Guaranteed GPUs granted may reach capacity times this ratio.",
    )
    quota_mode = serializers.ChoiceField(
        choices=QuotaMode.choices,
        required=False,
        help_text="quota: a ResourceQuota per team. kueue: Kueue's queues per team (jobs wait "
        "instead of being refused, idle GPUs are borrowed), the ResourceQuota as ceiling. "
        "Switching moves every team on the cluster.",
    )

    allowed_registries = serializers.ListField(
        child=StringField(max_length=MAX_REGISTRY_ENTRY_LENGTH),
        max_length=MAX_ALLOWED_REGISTRIES,
        required=False,
        help_text="Registries every container in the cluster's team namespaces may pull from: "
        'a host, or a path under one (["nvcr.io", "registry.example.com/vision", '
        '"docker.io/library"]); the first component must be a host (with a "." or a port, or '
        f"localhost). Empty allows none unless allow_all_registries. At most "
        f"{MAX_ALLOWED_REGISTRIES}. Reaches the cluster's admission policies at once.",
    )
    allow_all_registries = TrueOrFalseField(
        required=False, help_text="Allow images from any registry, whatever the list says."
    )
    borrowers_share_by_weight = TrueOrFalseField(
        required=False,
        help_text="Kueue mode: borrowers of idle GPUs preempt one another until the borrowed "
        "GPUs are shared in proportion to the teams' fair-sharing weights (false: first come, "
        "first served; only a lender taking its GPUs back preempts a borrower).",
    )

    fair_share_half_life_hours = serializers.IntegerField(
        required=False,
        help_text="Kueue mode: a team's weight for borrowing counts for less the more its "
        "opportunistic jobs used lately, their GPU-hours halved every this many hours "
        f"(0: off, the weights alone; at most {MAX_FAIR_SHARE_HALF_LIFE_HOURS}).",
    )
    fair_share_usage_scale_gpu_hours = serializers.IntegerField(
        required=False,
        help_text="A team borrows with its weight / (1 + decayed GPU-hours / this); 1 or more.",
    )
    borrower_min_runtime_seconds = serializers.IntegerField(
        required=False,
        help_text="Kueue mode: an opportunistic job is not preempted before it has run this "
        "long, unless a lender's guaranteed job has waited longer than "
        f"lender_wait_bound_seconds (0: off; at most {MAX_BORROWER_MIN_RUNTIME_SECONDS}).",
    )
    lender_wait_bound_seconds = serializers.IntegerField(
        required=False,
        help_text="The longest a lender's guaranteed job waits for borrowers within their "
        "minimum run time (1 or more).",
    )
    preemption_grace_seconds = serializers.IntegerField(
        required=False,
        help_text="Kueue mode: seconds between SIGTERM and SIGKILL for a preempted "
        f"opportunistic job's containers (at most {MAX_PREEMPTION_GRACE_SECONDS}).",
    )

    def validate(self, data: dict) -> dict:
        if not data:
            raise serializers.ValidationError(f"Give one or more of {', '.join(self.fields)}.")
        return data
