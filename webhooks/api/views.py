"""A team's webhooks and their deliveries over REST, under ``teams/{slug}/``: for the team's
leads and portal admins. A team the user may not see is a 404; one they see but whose webhooks
they may not manage (a member, a viewer), a 403. Bad input is a 400 naming the field."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission, IsAuthenticated

from tenants.api.views.base import TEAM_SLUG, TeamNestedViewSet
from webhooks import selectors, services
from webhooks.api import serializers as s
from webhooks.filtersets import DeliveryFilter
from webhooks.models import Delivery, Webhook
from webhooks.permissions import can_manage_webhooks


class ManagesTeamWebhooks(BasePermission):
    message = "Only the team's leads and portal admins manage its webhooks."

    def has_permission(self, request, view) -> bool:
        if getattr(view, "swagger_fake_view", False):
            return True
        return can_manage_webhooks(request.user, view.team)  # view.team: 404 when not visible


def _request_host(request) -> dict:
    return {"request_host": request.get_host(), "request_scheme": request.scheme}


@extend_schema_view(
    list=extend_schema(summary="Webhooks of a team you lead", parameters=[TEAM_SLUG]),
    retrieve=extend_schema(parameters=[TEAM_SLUG]),
    create=extend_schema(
        summary="Add a webhook (its secret is in this answer only)",
        parameters=[TEAM_SLUG],
        request=s.WebhookWriteSerializer,
        responses={201: s.WebhookWithSecretSerializer},
    ),
    partial_update=extend_schema(
        summary="Change a webhook",
        parameters=[TEAM_SLUG],
        request=s.WebhookChangeSerializer,
        responses=s.WebhookSerializer,
    ),
    destroy=extend_schema(summary="Delete a webhook and its deliveries", parameters=[TEAM_SLUG]),
)
class WebhookViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    TeamNestedViewSet,
):
    permission_classes = [IsAuthenticated, ManagesTeamWebhooks]
    serializer_class = s.WebhookSerializer
    action_serializers = {"create": s.WebhookWriteSerializer}
    lookup_value_regex = r"\d+"
    ordering_fields = ["name", "created_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Webhook.objects.none()
        return selectors.webhooks_of_team(self.team)

    def create(self, request, *args, **kwargs):
        data = self.validated(s.WebhookWriteSerializer)
        webhook = services.webhook_create(
            actor=request.user, team=self.team, **data, **_request_host(request)
        )
        return self.respond(webhook, s.WebhookWithSecretSerializer, status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        webhook = self.get_object()
        data = self.validated(s.WebhookChangeSerializer)
        webhook = services.webhook_update(
            actor=request.user, webhook=webhook, **data, **_request_host(request)
        )
        return self.respond(webhook)

    def perform_destroy(self, instance):
        services.webhook_delete(actor=self.request.user, webhook=instance)

    @extend_schema(
        summary="Send the webhook a test event now",
        parameters=[TEAM_SLUG],
        request=None,
        responses={202: s.DeliverySerializer},
    )
    @action(detail=True, methods=["post"])
    def test(self, request, *args, **kwargs):
        delivery = services.webhook_send_test(actor=request.user, webhook=self.get_object())
        return self.respond(delivery, s.DeliverySerializer, status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Give the webhook a new secret (in this answer only)",
        parameters=[TEAM_SLUG],
        request=None,
        responses=s.WebhookWithSecretSerializer,
    )
    @action(detail=True, methods=["post"], url_path="rotate-secret")
    def rotate_secret(self, request, *args, **kwargs):
        webhook = services.webhook_rotate_secret(actor=request.user, webhook=self.get_object())
        return self.respond(webhook, s.WebhookWithSecretSerializer)


@extend_schema_view(
    list=extend_schema(
        summary="Deliveries of a team's webhooks, newest first", parameters=[TEAM_SLUG]
    ),
    retrieve=extend_schema(parameters=[TEAM_SLUG]),
)
class DeliveryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TeamNestedViewSet):
    permission_classes = [IsAuthenticated, ManagesTeamWebhooks]
    serializer_class = s.DeliverySerializer
    filterset_class = DeliveryFilter
    lookup_value_regex = r"\d+"
    ordering_fields = ["created_at"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Delivery.objects.none()
        return selectors.deliveries_of_team(self.team)

    @extend_schema(
        summary="Send a delivery's body again, as a new delivery",
        parameters=[TEAM_SLUG],
        request=None,
        responses={202: s.DeliverySerializer},
    )
    @action(detail=True, methods=["post"])
    def redeliver(self, request, *args, **kwargs):
        again = services.delivery_redeliver(actor=request.user, delivery=self.get_object())
        return self.respond(again, status_code=status.HTTP_202_ACCEPTED)
