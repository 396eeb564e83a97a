"""Query-string filters for the API's lists. Teams are named by slug and clusters by name."""

import django_filters
from django import forms
from rest_framework.filters import OrderingFilter

from tenants.models import AuditEvent, QuotaGrant, QuotaRequest


class StableOrderingFilter(OrderingFilter):
    """Ordering that breaks ties on the primary key, so pages never repeat or skip rows."""

    def get_ordering(self, request, queryset, view):
        ordering = super().get_ordering(request, queryset, view)
        if not ordering:
            return ordering
        tie_breaker = "-pk" if ordering[0].startswith("-") else "pk"
        return [*ordering, tie_breaker]


class IntegerFilter(django_filters.NumberFilter):
    field_class = forms.IntegerField


class QuotaRequestFilter(django_filters.FilterSet):
    team = django_filters.CharFilter(field_name="team__slug", help_text="Team slug.")
    cluster = django_filters.CharFilter(field_name="cluster__name", help_text="Cluster name.")
    state = django_filters.ChoiceFilter(choices=QuotaRequest.State.choices)
    gpu_resource = django_filters.CharFilter(help_text="GPU resource kind, e.g. nvidia.com/gpu.")

    class Meta:
        model = QuotaRequest
        fields = ["team", "cluster", "state", "gpu_resource"]


class QuotaGrantFilter(django_filters.FilterSet):
    team = django_filters.CharFilter(field_name="team__slug", help_text="Team slug.")
    cluster = django_filters.CharFilter(field_name="cluster__name", help_text="Cluster name.")
    state = django_filters.ChoiceFilter(choices=QuotaGrant.State.choices)
    gpu_resource = django_filters.CharFilter(help_text="GPU resource kind, e.g. nvidia.com/gpu.")

    class Meta:
        model = QuotaGrant
        fields = ["team", "cluster", "state", "gpu_resource"]


class AuditEventFilter(django_filters.FilterSet):
    team = django_filters.CharFilter(field_name="team__slug", help_text="Team slug.")
    action = django_filters.CharFilter(help_text="e.g. quota_request.approved")
    target_type = django_filters.CharFilter(help_text="e.g. QuotaRequest, QuotaGrant, Team")
    target_id = IntegerFilter(min_value=0)

    class Meta:
        model = AuditEvent
        fields = ["team", "action", "target_type", "target_id"]
