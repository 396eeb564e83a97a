"""Filtering and ordering for the API's lists (the filters themselves are in each app's
``filtersets``)."""

import functools

from django.http import QueryDict
from django_filters.constants import EMPTY_VALUES
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter


class PortalFilterBackend(DjangoFilterBackend):
    """``DjangoFilterBackend`` that skips building the FilterSet (its filters copied, a form
    class made, bound and cleaned: a millisecond a request, as long as the rest of a small page)
    when the query names none of its filters and the FilterSet is known to filter nothing then:
    the rows are the same, the FilterSet's work is not done for nothing. Any parameter that
    could be one of its filters' (its name, or its name and a suffix, as range widgets read)
    takes the FilterSet's own path, with its validation and 400s."""

    def filter_queryset(self, request, queryset, view):
        filterset_class = self.get_filterset_class(view, queryset)
        if (
            filterset_class is not None
            and not _names_a_filter(request.query_params, filterset_class)
            and absent_filters_do_nothing(filterset_class)
        ):
            return queryset
        return super().filter_queryset(request, queryset, view)


def _names_a_filter(params, filterset_class) -> bool:
    names = filterset_class.base_filters.keys()
    return any(key == name or key.startswith(f"{name}_") for key in params for name in names)


@functools.cache
def absent_filters_do_nothing(filterset_class) -> bool:
    """Whether the FilterSet, given none of its parameters, leaves a queryset as it is: bound to
    no data its form is valid with every value empty, and each filter is django-filter's own
    (those, method filters included, skip an empty value). Checked once per class, without a
    request: the API's FilterSets set up no filter from it (a ``TeamFilterSet``'s choice of
    teams is the pages', not the API's), and one whose filters differ from its declared ones
    once made is not taken."""
    filterset = filterset_class(
        data=QueryDict(), queryset=filterset_class._meta.model._default_manager.none()
    )
    if filterset.filters.keys() != filterset_class.base_filters.keys():
        return False
    if any(
        not type(f).filter.__module__.startswith("django_filters.")
        for f in filterset.filters.values()
    ):
        return False
    return filterset.is_valid() and all(
        value in EMPTY_VALUES for value in filterset.form.cleaned_data.values()
    )


class StableOrderingFilter(OrderingFilter):
    """Ordering that breaks ties on the primary key, so pages never repeat or skip rows, and
    refuses a field it cannot order by (DRF drops it silently: the list would look ordered)."""

    def remove_invalid_fields(self, queryset, fields, view, request):
        valid = super().remove_invalid_fields(queryset, fields, view, request)
        wanted = [field for field in fields if field]
        if len(valid) != len(wanted):
            offered = ", ".join(name for name, _ in self.get_valid_fields(queryset, view, {}))
            raise ValidationError({self.ordering_param: [f"Order by one of: {offered}."]})
        return valid

    def get_ordering(self, request, queryset, view):
        ordering = super().get_ordering(request, queryset, view)
        if not ordering:
            return ordering
        tie_breaker = "-pk" if ordering[0].startswith("-") else "pk"
        return [*ordering, tie_breaker]
