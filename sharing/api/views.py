"""Sharing layouts over REST: a lead asks, admins approve or reject, everyone who sees the team
follows the layout's progress. Scoped as quota requests: another team's layout is a 404."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action

from sharing import selectors, services
from sharing.api.serializers import (
    LayoutCreateSerializer,
    LayoutDecisionSerializer,
    LayoutSerializer,
)
from sharing.filtersets import LayoutFilter
from sharing.models import LayoutRequest
from tenants.api.views.base import PortalViewSet


@extend_schema_view(
    list=extend_schema(summary="Sharing layouts of your teams (admins: all)"),
    retrieve=extend_schema(summary="A sharing layout and how far the cluster followed"),
    create=extend_schema(
        summary="Ask to turn whole GPUs of a grant into MIG slices or shared GPUs",
        request=LayoutCreateSerializer,
        responses={201: LayoutSerializer},
    ),
)
class LayoutViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, PortalViewSet
):
    serializer_class = LayoutSerializer
    action_serializers = {
        "create": LayoutCreateSerializer,
        "approve": LayoutDecisionSerializer,
        "reject": LayoutDecisionSerializer,
    }
    filterset_class = LayoutFilter
    ordering_fields = ["created_at"]
    lookup_value_regex = r"\d+"
    admin_actions = {
        "approve": "approve or reject sharing layouts",
        "reject": "approve or reject sharing layouts",
    }

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return LayoutRequest.objects.none()
        return selectors.layouts_visible_to(self.request.user)

    def create(self, request, *args, **kwargs):
        data = self.validated(LayoutCreateSerializer)
        layout = services.layout_create(requested_by=request.user, **data)
        return self.respond(layout, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Approve: the portal then changes the nodes (admins)",
        request=LayoutDecisionSerializer,
        responses=LayoutSerializer,
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        data = self.validated(LayoutDecisionSerializer)
        layout = services.layout_approve(
            reviewer=request.user, layout=self.get_object(), note=data["note"]
        )
        return self.respond(layout)

    @extend_schema(
        summary="Reject with a note (admins)",
        request=LayoutDecisionSerializer,
        responses=LayoutSerializer,
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        data = self.validated(LayoutDecisionSerializer)
        layout = services.layout_reject(
            reviewer=request.user, layout=self.get_object(), note=data["note"]
        )
        return self.respond(layout)

    @extend_schema(
        summary="Withdraw a pending layout request (its requester or a team lead)",
        request=None,
        responses=LayoutSerializer,
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        layout = services.layout_cancel(actor=request.user, layout=self.get_object())
        return self.respond(layout)
