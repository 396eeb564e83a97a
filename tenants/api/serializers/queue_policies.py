"""A team's queue policy on a Kueue cluster: borrowing, lending and its fair-sharing weight."""

from decimal import Decimal

from rest_framework import serializers

from tenants.models import TeamQueuePolicy


class TeamQueuePolicySerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    # Null once the admin who set it is deleted.
    updated_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = TeamQueuePolicy
        fields = [
            "team",
            "cluster",
            "borrowing_limit",
            "lending_limit",
            "fair_sharing_weight",
            "updated_by",
            "updated_at",
        ]
        read_only_fields = fields


class TeamQueuePolicySetSerializer(serializers.Serializer):
    """Types only; tenants.queueing.team_queue_policy_set checks the ranges."""

    borrowing_limit = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="GPUs of each model the team may borrow beyond its quota; null: no limit.",
    )
    lending_limit = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="GPUs of its own quota of each model it may lend while idle; null: all.",
    )
    fair_sharing_weight = serializers.DecimalField(
        max_digits=7,
        decimal_places=3,
        required=False,
        default=Decimal(1),
        help_text="Its share of idle GPUs relative to other teams' weights (above 0, at most "
        "1000).",
    )
