"""Query-string filters for the job list: team by slug, cluster by name, user by username."""

import django_filters

from gpujobs.models import GpuJob


class GpuJobFilter(django_filters.FilterSet):
    team = django_filters.CharFilter(field_name="team__slug", help_text="Team slug.")
    cluster = django_filters.CharFilter(field_name="cluster__name", help_text="Cluster name.")
    user = django_filters.CharFilter(
        field_name="submitted_by__username", help_text="Username of who submitted the job."
    )
    state = django_filters.MultipleChoiceFilter(
        choices=GpuJob.State.choices, help_text="One or more states (repeat the parameter)."
    )

    class Meta:
        model = GpuJob
        fields = ["team", "cluster", "user", "state"]
