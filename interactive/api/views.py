"""REST views for sessions under /api/v1/sessions/: another team's session is a 404; the body of
a new session becomes a ``SessionRequest`` in its serializer; the changes are services'."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from interactive import selectors, services
from interactive.api import serializers as s


@extend_schema_view(
    list=extend_schema(summary="Sessions of your teams (admins: all)"),
    retrieve=extend_schema(summary="A session: its state, where to open it, and its idleness"),
    create=extend_schema(
        summary="Start a session (a JupyterLab server with your home volume)",
        description="Refused with 400 naming the field: an image from a registry the cluster "
        "does not allow (`image`), a lifetime over the team's maximum "
        "(`max_lifetime_hours`), a first home volume larger than the team's storage quota "
        "leaves (`home_gib`), GPUs the team's quota cannot give under quota only (`gpus`). "
        "Leads and members may start sessions; viewers may not (403).",
        request=s.SessionCreateSerializer,
        responses={201: s.SessionSerializer},
    ),
)
class SessionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = s.SessionSerializer
    permission_classes = [IsAuthenticated]
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        return selectors.sessions_visible_to(self.request.user).order_by("-created_at", "-id")

    def get_serializer_class(self):
        if self.action == "create":
            return s.SessionCreateSerializer
        return s.SessionSerializer

    def create(self, request, *args, **kwargs):
        serializer = s.SessionCreateSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        session = services.session_start(user=request.user, **serializer.validated_data)
        return Response(
            s.SessionSerializer(self.get_queryset().get(pk=session.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        summary="Stop a session: its server ends, its home volume is kept",
        request=None,
        responses=s.SessionSerializer,
    )
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        session = services.session_stop(actor=request.user, session=self.get_object())
        return Response(s.SessionSerializer(self.get_queryset().get(pk=session.pk)).data)

    @extend_schema(
        summary="Resume a stopped session: a new run with the same home volume",
        request=None,
        responses=s.SessionSerializer,
    )
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        session = services.session_resume(user=request.user, session=self.get_object())
        return Response(s.SessionSerializer(self.get_queryset().get(pk=session.pk)).data)
