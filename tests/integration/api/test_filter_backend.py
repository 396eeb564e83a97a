"""The API's filter backend skips the FilterSet only where it would filter nothing: a query
naming none of its filters, on a FilterSet that then leaves the rows as they are."""

import django_filters
import pytest
from django.http import QueryDict
from django.urls import get_resolver

from tenants.api.filters import PortalFilterBackend, absent_filters_do_nothing
from tenants.filtersets import QuotaRequestFilter
from tenants.models import QuotaRequest

pytestmark = pytest.mark.django_db


def api_filtersets() -> set[type]:
    """The FilterSet of every API view that filters with the backend."""
    found = set()

    def walk(patterns):
        for pattern in patterns:
            if hasattr(pattern, "url_patterns"):
                walk(pattern.url_patterns)
                continue
            view = getattr(pattern.callback, "cls", None)
            backends = getattr(view, "filter_backends", ())
            if (
                view is not None
                and PortalFilterBackend in backends
                and getattr(view, "filterset_class", None)
            ):
                found.add(view.filterset_class)

    walk(get_resolver().url_patterns)
    return found


def test_every_api_filterset_is_skipped_only_where_it_filters_nothing():
    filtersets = api_filtersets()
    assert QuotaRequestFilter in filtersets
    assert len(filtersets) >= 4
    for filterset_class in filtersets:
        queryset = filterset_class._meta.model._default_manager.all()
        filtered = filterset_class(QueryDict(), queryset=queryset)
        assert filtered.is_valid(), filterset_class
        # Skipped: the FilterSet's own answer is the same query.
        assert absent_filters_do_nothing(filterset_class), filterset_class
        assert str(filtered.qs.query) == str(queryset.query), filterset_class


class FilterByDefault(django_filters.CharFilter):
    def filter(self, qs, value):
        return qs.filter(state=value or "pending")


class DefaultingFilter(django_filters.FilterSet):
    state = FilterByDefault()

    class Meta:
        model = QuotaRequest
        fields = []


class RequiredFilter(django_filters.FilterSet):
    state = django_filters.CharFilter(required=True)

    class Meta:
        model = QuotaRequest
        fields = []


class MethodFilter(django_filters.FilterSet):
    state = django_filters.CharFilter(method="by_state")

    class Meta:
        model = QuotaRequest
        fields = []

    def by_state(self, queryset, name, value):
        return queryset.filter(state=value)


def test_a_filterset_that_filters_or_refuses_without_its_parameters_is_not_skipped():
    assert not absent_filters_do_nothing(DefaultingFilter)
    assert not absent_filters_do_nothing(RequiredFilter)
    assert absent_filters_do_nothing(MethodFilter)  # django-filter skips an empty value


def test_a_filter_parameter_still_filters_and_a_bad_one_is_still_refused(
    api, admin, pending_request, other_pending_request
):
    client = api.as_user(admin)

    everything = client.get("/api/v1/quota-requests/").json()
    one_team = client.get(
        "/api/v1/quota-requests/", {"team": pending_request.team.slug, "page_size": 5}
    ).json()
    refused = client.get("/api/v1/quota-requests/", {"state": "no-such-state"})

    assert everything["count"] == 2
    assert [row["id"] for row in one_team["results"]] == [pending_request.id]
    assert refused.status_code == 400
    assert "state" in refused.json()
