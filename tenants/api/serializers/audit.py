"""The audit trail: state changes, who made them and why."""

from rest_framework import serializers

from tenants.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    # Null: done by the portal itself (a task, a command), or by a user since deleted.
    actor = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    # Null: about no team (a cluster's or a department's settings), or a team since deleted.
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created_at",
            "actor",
            "team",
            "action",
            "target_type",
            "target_id",
            "before",
            "after",
            "note",
        ]
        read_only_fields = fields
