"""The filter of sharing layouts, for the API's list and the pages."""

import django_filters

from sharing.models import LayoutRequest
from tenants.filtersets import TeamFilterSet


class LayoutFilter(TeamFilterSet):
    cluster = django_filters.CharFilter(
        field_name="cluster__name", label="Cluster", help_text="Cluster name."
    )
    state = django_filters.ChoiceFilter(choices=LayoutRequest.State.choices)
    kind = django_filters.ChoiceFilter(choices=LayoutRequest.Kind.choices)

    class Meta:
        model = LayoutRequest
        fields = ["team", "cluster", "state", "kind"]
