"""The filters of the service list, used by the API and the services page: team by slug,
cluster by name, state."""

import django_filters

from serving.models import InferenceService
from tenants.filtersets import TeamFilterSet


class InferenceServiceFilter(TeamFilterSet):
    cluster = django_filters.CharFilter(
        field_name="cluster__name", label="Cluster", help_text="Cluster name."
    )
    state = django_filters.MultipleChoiceFilter(
        choices=InferenceService.State.choices,
        help_text="One or more states (repeat the parameter).",
    )

    class Meta:
        model = InferenceService
        fields = ["team", "cluster", "state"]
