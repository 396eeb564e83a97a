"""The filters of the job list, used by the API and the job page: team by slug, cluster by name,
user by username."""

import django_filters

from gpujobs.models import GpuJob
from tenants.filtersets import TeamFilterSet


class GpuJobFilter(TeamFilterSet):
    cluster = django_filters.CharFilter(
        field_name="cluster__name", label="Cluster", help_text="Cluster name."
    )
    user = django_filters.CharFilter(
        field_name="submitted_by__username",
        label="Submitted by",
        help_text="Username of who submitted the job.",
    )
    state = django_filters.MultipleChoiceFilter(
        choices=GpuJob.State.choices, help_text="One or more states (repeat the parameter)."
    )

    class Meta:
        model = GpuJob
        fields = ["team", "cluster", "user", "state"]
