"""Quota grants: revoking, shrinking, and a preview of either."""

import datetime

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins
from rest_framework.decorators import action

from core.rows import RowListMixin
from tenants import impact, quota, selectors
from tenants.api.serializers.quota_grants import (
    GrantImpactQuerySerializer,
    GrantImpactSerializer,
    QuotaGrantSerializer,
    QuotaGrantShrinkSerializer,
)
from tenants.api.serializers.quota_requests import DecisionNoteSerializer
from tenants.api.views.base import PortalViewSet
from tenants.filtersets import QuotaGrantFilter


@extend_schema_view(
    list=extend_schema(summary="Quota grants of your teams (admins: all)"),
)
class QuotaGrantViewSet(RowListMixin, mixins.RetrieveModelMixin, PortalViewSet):
    serializer_class = QuotaGrantSerializer
    action_serializers = {
        "revoke": DecisionNoteSerializer,
        "shrink": QuotaGrantShrinkSerializer,
    }
    filterset_class = QuotaGrantFilter
    ordering_fields = ["created_at", "starts_on", "ends_on"]
    lookup_value_regex = r"\d+"
    admin_actions = {"revoke": "revoke grants", "shrink": "shrink grants"}

    def get_queryset(self):
        return selectors.quota_grants_visible_to(self.request.user)

    @extend_schema(
        summary="End an active grant now (admins)",
        request=DecisionNoteSerializer,
        responses=QuotaGrantSerializer,
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        grant = self.get_object()
        data = self.validated(DecisionNoteSerializer)
        grant = quota.quota_grant_revoke(actor=request.user, grant=grant, note=data["note"])
        return self.respond(grant)

    @extend_schema(
        summary="Preview what shrinking or revoking the grant would do (a dry run)",
        description="The team's quota after the change against what its running jobs and "
        "services hold now, the work that would then be over quota (the newest first until the "
        "team fits) and what happens to it. Changes nothing.",
        parameters=[
            OpenApiParameter(
                "gpus",
                int,
                OpenApiParameter.QUERY,
                required=False,
                description="The grant's GPUs after the change, at most its GPUs now; 0 (or "
                "neither parameter) previews revoking it.",
            ),
            OpenApiParameter(
                "ends_on",
                datetime.date,
                OpenApiParameter.QUERY,
                required=False,
                description="An earlier last day; one before today previews ending it now.",
            ),
        ],
        request=None,
        responses=GrantImpactSerializer,
    )
    @action(detail=True, methods=["get"])
    def impact(self, request, pk=None):
        grant = self.get_object()
        query = GrantImpactQuerySerializer(data=request.query_params, context={"grant": grant})
        query.is_valid(raise_exception=True)
        gpus, ends_on = query.validated_data.get("gpus"), query.validated_data.get("ends_on")
        today = timezone.localdate()
        after = (
            impact.gpus_after_shrink(grant=grant, gpus=gpus, ends_on=ends_on, today=today)
            if gpus is not None or ends_on is not None
            else 0
        )
        preview = impact.grant_change_impact(grant=grant, new_gpus=after, today=today)
        return self.respond(preview, GrantImpactSerializer)

    @extend_schema(
        summary="Reduce an active grant's GPUs or end it sooner (admins)",
        request=QuotaGrantShrinkSerializer,
        responses=QuotaGrantSerializer,
    )
    @action(detail=True, methods=["post"])
    def shrink(self, request, pk=None):
        grant = self.get_object()
        data = self.validated(QuotaGrantShrinkSerializer)
        grant = quota.quota_grant_shrink(actor=request.user, grant=grant, **data)
        return self.respond(grant)
