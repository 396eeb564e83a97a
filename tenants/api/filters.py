"""Ordering for the API's lists (the filters themselves are in each app's ``filtersets``)."""

from rest_framework.filters import OrderingFilter


class StableOrderingFilter(OrderingFilter):
    """Ordering that breaks ties on the primary key, so pages never repeat or skip rows."""

    def get_ordering(self, request, queryset, view):
        ordering = super().get_ordering(request, queryset, view)
        if not ordering:
            return ordering
        tie_breaker = "-pk" if ordering[0].startswith("-") else "pk"
        return [*ordering, tie_breaker]
