"""Reads of sharing layouts for the API and the pages, scoped as quota requests are: portal
admins see all; others the layouts of their teams and of the teams of the departments they
administer."""

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet
from django.utils import timezone

from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from sharing.models import LayoutRequest
from tenants.models import Membership, QuotaGrant, Team
from tenants.permissions import is_portal_admin
from tenants.selectors import administered_department_ids


def _scoped(queryset: QuerySet, user: User | AnonymousUser) -> QuerySet:
    if is_portal_admin(user):
        return queryset
    if not user.is_authenticated:
        return queryset.none()
    mine = Membership.objects.filter(user=user).values("team_id")
    departments = administered_department_ids(user)
    return queryset.filter(Q(team_id__in=mine) | Q(team__department_id__in=departments))


def layouts_visible_to(user: User | AnonymousUser) -> QuerySet[LayoutRequest]:
    return _scoped(LayoutRequest.objects.all(), user).select_related(
        "team", "cluster", "requested_by", "decided_by"
    )


def layouts_of_team(team: Team) -> QuerySet[LayoutRequest]:
    return LayoutRequest.objects.filter(team=team).select_related(
        "team", "cluster", "requested_by", "decided_by"
    )


def pending_layouts() -> QuerySet[LayoutRequest]:
    """The admins' queue of layouts, oldest first."""
    return (
        LayoutRequest.objects.filter(state=LayoutRequest.State.PENDING)
        .select_related("team", "cluster", "requested_by", "source_grant")
        .order_by("created_at", "pk")
    )


def convertible_grants(team: Team) -> QuerySet[QuotaGrant]:
    """The team's active grants of whole GPUs of one model that have started: what a layout
    may convert."""
    return (
        QuotaGrant.objects.filter(
            team=team,
            state=QuotaGrant.State.ACTIVE,
            gpu_resource=DEFAULT_GPU_RESOURCE,
            starts_on__lte=timezone.localdate(),
        )
        .exclude(gpu_model="")
        .select_related("cluster")
        .order_by("cluster__name", "gpu_model", "pk")
    )
