"""Quota requests and the review queue."""

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action

from core.rows import RowListMixin
from tenants import quota, selectors
from tenants.api.serializers.quota_grants import QuotaGrantSerializer
from tenants.api.serializers.quota_requests import (
    DecisionNoteSerializer,
    QuotaRequestApproveSerializer,
    QuotaRequestCreateSerializer,
    QuotaRequestSerializer,
)
from tenants.api.serializers.review import ReviewQueueItemSerializer
from tenants.api.views.base import PortalViewSet
from tenants.filtersets import QuotaRequestFilter


@extend_schema_view(
    list=extend_schema(summary="Quota requests of your teams (admins: all)"),
    create=extend_schema(
        summary="Ask for GPU quota for a team you lead",
        request=QuotaRequestCreateSerializer,
        responses={201: QuotaRequestSerializer},
    ),
)
class QuotaRequestViewSet(
    RowListMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, PortalViewSet
):
    serializer_class = QuotaRequestSerializer
    action_serializers = {
        "create": QuotaRequestCreateSerializer,
        "approve": QuotaRequestApproveSerializer,
        "reject": DecisionNoteSerializer,
        "review_queue": ReviewQueueItemSerializer,
    }
    filterset_class = QuotaRequestFilter
    ordering_fields = ["created_at"]
    lookup_value_regex = r"\d+"
    admin_actions = {
        "approve": "approve or reject quota requests",
        "reject": "approve or reject quota requests",
        "review_queue": "see the review queue",
    }
    # Department admins too, for their departments' teams within the ceilings (``ceilings``).
    reviewer_actions = {"approve", "reject", "review_queue"}

    def get_queryset(self):
        if self.action == "review_queue":
            return selectors.review_queue_of(self.request.user)
        return selectors.quota_requests_visible_to(self.request.user)

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if self.action == "review_queue":
            context["capacity"] = selectors.capacity_summaries()
            context["model_capacity"] = selectors.model_capacity_summaries()
        return context

    def create(self, request, *args, **kwargs):
        data = self.validated(QuotaRequestCreateSerializer)
        quota_request = quota.quota_request_create(requested_by=request.user, **data)
        return self.respond(quota_request, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Approve, optionally for fewer GPUs or a shorter period (admins; department "
        "admins within their ceiling)",
        request=QuotaRequestApproveSerializer,
        responses={
            201: OpenApiResponse(QuotaGrantSerializer, description="The grant it created."),
        },
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        quota_request = self.get_object()
        data = self.validated(QuotaRequestApproveSerializer)
        grant = quota.quota_request_approve(
            reviewer=request.user, quota_request=quota_request, **data
        )
        return self.respond(grant, QuotaGrantSerializer, status.HTTP_201_CREATED)

    @extend_schema(
        summary="Reject with a note (admins; department admins within their ceiling)",
        request=DecisionNoteSerializer,
        responses=QuotaRequestSerializer,
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        quota_request = self.get_object()
        data = self.validated(DecisionNoteSerializer)
        quota_request = quota.quota_request_reject(
            reviewer=request.user, quota_request=quota_request, note=data["note"]
        )
        return self.respond(quota_request)

    @extend_schema(
        summary="Withdraw a pending request (its requester or a team lead)",
        request=None,
        responses=QuotaRequestSerializer,
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        quota_request = quota.quota_request_cancel(
            actor=request.user, quota_request=self.get_object()
        )
        return self.respond(quota_request)

    @extend_schema(
        summary="Pending requests, oldest first, with their cluster's capacity (admins; "
        "department admins: their teams', each saying whether they may decide it)",
        responses=ReviewQueueItemSerializer(many=True),
    )
    @action(detail=False, methods=["get"], url_path="review-queue")
    def review_queue(self, request):
        return self.list(request)
