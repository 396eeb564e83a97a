"""The filters of the lists of requests, grants and audit events: one FilterSet per list, used by
the API (``DjangoFilterBackend``) and by the page, which renders the FilterSet's form.
Teams are named by slug and clusters by name."""

import datetime

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils import timezone

from core.params import BIGINT_MAX
from tenants.models import AuditEvent, QuotaGrant, QuotaRequest


class IntegerFilter(django_filters.NumberFilter):
    field_class = forms.IntegerField


# The most teams a page's filter offers as a select; past it the page asks for a slug, so that
# the page's size does not grow with the number of teams (an admin sees every team).
MAX_TEAM_CHOICES = 100


class TeamFilterSet(django_filters.FilterSet):
    """A list of rows that belong to teams, filtered by ``?team=<slug>``.

    The API gives no ``teams``: any slug is taken, and one the user cannot see matches nothing,
    so an answer never tells whether a team exists. A page gives the teams the user can see: its
    form offers them as a select (up to ``MAX_TEAM_CHOICES``; more, and it takes a slug as the
    API does), and any other slug is an error on the form."""

    team = django_filters.CharFilter(field_name="team__slug", help_text="Team slug.")

    def __init__(self, data=None, queryset=None, *, request=None, prefix=None, teams=None):
        super().__init__(data, queryset, request=request, prefix=prefix)
        choices = None
        if teams is not None:
            choices = list(teams.values_list("slug", "name")[: MAX_TEAM_CHOICES + 1])
        if choices is not None and len(choices) <= MAX_TEAM_CHOICES:
            offered = django_filters.ChoiceFilter(
                field_name="team__slug",
                label="Team",
                choices=choices,
                empty_label="All teams",
            )
            offered.model, offered.parent = self.queryset.model, self
            self.filters["team"] = offered

    def page_rows(self) -> QuerySet:
        """What a page lists: the filtered rows, or none while the form shows errors (rather
        than rows that look filtered and are not)."""
        return self.qs if self.is_valid() else self.queryset.none()


class QuotaFilterSet(TeamFilterSet):
    """Requests and grants: by team, cluster and GPU kind."""

    cluster = django_filters.CharFilter(
        field_name="cluster__name", label="Cluster", help_text="Cluster name."
    )
    gpu_resource = django_filters.CharFilter(
        label="GPU kind", help_text="GPU resource kind, e.g. nvidia.com/gpu."
    )


# Days back a filter by age may reach (a century: anything older is no request's).
MAX_AGE_DAYS = 36_500


class QuotaRequestFilter(QuotaFilterSet):
    """Requests: also by GPU model and by age (the review queue's "waiting at least N days")."""

    state = django_filters.ChoiceFilter(choices=QuotaRequest.State.choices)
    gpu_model = django_filters.CharFilter(
        label="GPU model", help_text="GPU model, e.g. NVIDIA-H100-80GB-HBM3."
    )
    min_age_days = IntegerFilter(
        label="At least days old",
        method="filter_min_age_days",
        min_value=0,
        max_value=MAX_AGE_DAYS,
        help_text="Only requests made at least this many days ago.",
    )

    class Meta:
        model = QuotaRequest
        fields = ["team", "cluster", "state", "gpu_resource", "gpu_model", "min_age_days"]

    def filter_min_age_days(self, queryset: QuerySet, name: str, value: int | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.filter(created_at__lte=timezone.now() - datetime.timedelta(days=value))


class QuotaGrantFilter(QuotaFilterSet):
    state = django_filters.ChoiceFilter(choices=QuotaGrant.State.choices)

    class Meta:
        model = QuotaGrant
        fields = ["team", "cluster", "state", "gpu_resource"]


class AuditEventFilter(TeamFilterSet):
    action = django_filters.CharFilter(help_text="e.g. quota_request.approved")
    target_type = django_filters.CharFilter(help_text="e.g. QuotaRequest, QuotaGrant, Team")
    # Its column's range: a larger id is no audit event's.
    target_id = IntegerFilter(min_value=0, max_value=BIGINT_MAX)

    class Meta:
        model = AuditEvent
        fields = ["team", "action", "target_type", "target_id"]
