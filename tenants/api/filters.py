"""Ordering for the API's lists (the filters themselves are in each app's ``filtersets``)."""

from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter


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
