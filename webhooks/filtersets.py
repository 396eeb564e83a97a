"""The filter of a team's webhook deliveries, for the API's list and the page."""

import django_filters

from core.params import BIGINT_MAX
from tenants.filtersets import IntegerFilter
from webhooks.models import Delivery


class DeliveryFilter(django_filters.FilterSet):
    webhook = IntegerFilter(
        field_name="webhook_id", min_value=1, max_value=BIGINT_MAX, help_text="A webhook's id."
    )
    status = django_filters.ChoiceFilter(choices=Delivery.Status.choices)
    event = django_filters.CharFilter(max_length=50, help_text="An event kind.")

    class Meta:
        model = Delivery
        fields = ["webhook", "status", "event"]
