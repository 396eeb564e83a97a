"""The filters of the lists of requests, grants and audit events: one FilterSet per list, used by
the API (``DjangoFilterBackend``) and by the page, which renders the FilterSet's form.
Teams are named by slug and clusters by name."""

import django_filters
from django import forms
from django.db.models import QuerySet

from portal.params import BIGINT_MAX
from tenants.models import AuditEvent, QuotaGrant, QuotaRequest


class IntegerFilter(django_filters.NumberFilter):
    field_class = forms.IntegerField


class TeamFilterSet(django_filters.FilterSet):
    """A list of rows that belong to teams, filtered by ``?team=<slug>``.

    The API gives no ``teams``: any slug is taken, and one the user cannot see matches nothing,
    so an answer never tells whether a team exists. A page gives the teams the user can see: its
    form offers them as a select, and any other slug is an error on the form."""

    team = django_filters.CharFilter(field_name="team__slug", help_text="Team slug.")

    def __init__(self, data=None, queryset=None, *, request=None, prefix=None, teams=None):
        super().__init__(data, queryset, request=request, prefix=prefix)
        if teams is not None:
            offered = django_filters.ChoiceFilter(
                field_name="team__slug",
                label="Team",
                choices=list(teams.values_list("slug", "name")),
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


class QuotaRequestFilter(QuotaFilterSet):
    state = django_filters.ChoiceFilter(choices=QuotaRequest.State.choices)

    class Meta:
        model = QuotaRequest
        fields = ["team", "cluster", "state", "gpu_resource"]


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
