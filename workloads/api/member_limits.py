"""A team's member limits over REST, under ``teams/{team_slug}/member-limits/``: what each
member may hold at once on a cluster (``workloads.member_limits``), with what they hold now.

Anyone who sees the team reads them; its leads and portal admins set and lift them. A team the
user may not see is a 404; one they see but may not change, a 403, both before the body is read.
Bad input is a 400 naming the field."""

from django.contrib.auth.models import User
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.response import Response

from clusters.models import Cluster
from tenants.api.views.base import TEAM_SLUG, TeamNestedViewSet
from workloads import member_limits
from workloads.models import MAX_LIMIT, MemberLimit
from workloads.permissions import can_set_member_limits

LIMIT_ID = OpenApiParameter("id", int, OpenApiParameter.PATH, description="The limit's id.")


class MemberUseSerializer(serializers.Serializer):
    gpus = serializers.IntegerField(help_text="GPUs the member's jobs and sessions hold now.")
    running = serializers.IntegerField(help_text="The member's unfinished jobs and sessions.")


class MemberLimitSerializer(serializers.ModelSerializer):
    """What a member may hold at once on a cluster (null: no limit of that), and what they hold
    now."""

    user = serializers.SlugRelatedField(
        slug_field="username", read_only=True, help_text="The member's username."
    )
    cluster = serializers.SlugRelatedField(
        slug_field="name", read_only=True, help_text="Cluster name."
    )
    set_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="Who set it last (null once their account is deleted).",
    )
    # The view sets ``use`` on each row (``member_limits.member_use``).
    use = MemberUseSerializer(read_only=True, help_text="What the member holds now.")

    class Meta:
        model = MemberLimit
        fields = [
            "id",
            "user",
            "cluster",
            "max_gpus",
            "max_running",
            "set_by",
            "updated_at",
            "use",
        ]
        read_only_fields = fields


def _limit_field(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=MAX_LIMIT,
        help_text=help_text,
    )


class MemberLimitSetSerializer(serializers.Serializer):
    """Types and lookups only; ``member_limits.member_limit_set`` checks that the user is a
    member and that a limit is given."""

    user = serializers.CharField(help_text="The member's username.")
    cluster = serializers.CharField(help_text="Cluster name.")
    max_gpus = _limit_field("GPUs the member's jobs and sessions may hold at once; null: no limit.")
    max_running = _limit_field(
        "Jobs and sessions the member may have unfinished at once; null: no limit."
    )

    def validate_user(self, value: str) -> User:
        user = User.objects.filter(username=value).first()
        if user is None:
            raise serializers.ValidationError(f"No user named {value!r}.")
        return user

    def validate_cluster(self, value: str) -> Cluster:
        cluster = Cluster.objects.filter(name=value).first()
        if cluster is None:
            raise serializers.ValidationError(f"No cluster named {value!r}.")
        return cluster


class SetsMemberLimits(BasePermission):
    """Reading needs the team to be visible (else 404); changing, a lead of it or a portal
    admin (the service checks again)."""

    message = "Only the team's leads and portal admins set its members' limits."

    def has_permission(self, request, view) -> bool:
        if getattr(view, "swagger_fake_view", False):
            return True
        team = view.team  # 404 when not visible
        return request.method in SAFE_METHODS or can_set_member_limits(request.user, team)


@extend_schema_view(
    list=extend_schema(
        summary="Each member's limit on each cluster, with what they hold now",
        parameters=[TEAM_SLUG],
    ),
    retrieve=extend_schema(parameters=[TEAM_SLUG, LIMIT_ID]),
    create=extend_schema(
        summary="Set a member's limit on a cluster, or change it (leads, admins)",
        parameters=[TEAM_SLUG],
        request=MemberLimitSetSerializer,
        responses={200: MemberLimitSerializer},
    ),
    destroy=extend_schema(
        summary="Lift a member's limit (leads, admins)",
        parameters=[TEAM_SLUG, LIMIT_ID],
        responses={204: None},
    ),
)
class MemberLimitViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TeamNestedViewSet
):
    """What each member of the team may hold at once on a cluster: GPUs and unfinished jobs
    and sessions, set by the team's leads. A member under their limit can still wait for the
    team's quota. Setting a limit that exists changes it (200 either way)."""

    permission_classes = [IsAuthenticated, SetsMemberLimits]
    serializer_class = MemberLimitSerializer
    action_serializers = {"create": MemberLimitSetSerializer}
    lookup_value_regex = r"\d+"
    ordering_fields = ["updated_at"]
    http_method_names = ["get", "post", "delete", "head", "options"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return MemberLimit.objects.none()
        return (
            MemberLimit.objects.filter(team=self.team)
            .select_related("user", "cluster", "set_by")
            .order_by("user__username", "cluster__name")
        )

    def _with_use(self, limit: MemberLimit) -> MemberLimit:
        limit.use = member_limits.member_use(team=self.team, cluster=limit.cluster, user=limit.user)
        return limit

    def list(self, request, *args, **kwargs):
        # Each row's use is counted on its own (the workload apps' counters, a query each), for
        # the page's rows only: a team has a handful of limits.
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        rows = [self._with_use(limit) for limit in page]
        return self.get_paginated_response(self.get_serializer(rows, many=True).data)

    def retrieve(self, request, *args, **kwargs):
        return self.respond(self._with_use(self.get_object()))

    def create(self, request, *args, **kwargs):
        data = self.validated(MemberLimitSetSerializer)
        limit = member_limits.member_limit_set(actor=request.user, team=self.team, **data)
        return self.respond(self._with_use(limit))

    def destroy(self, request, *args, **kwargs):
        member_limits.member_limit_remove(actor=request.user, limit=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
