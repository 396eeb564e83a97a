"""The audit trail."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins

from core.rows import RowListMixin
from tenants import selectors
from tenants.api.filters import PortalFilterBackend
from tenants.api.serializers.audit import AuditEventSerializer
from tenants.api.views.base import PortalViewSet
from tenants.filtersets import AuditEventFilter


@extend_schema_view(
    list=extend_schema(summary="State changes of your teams, newest first (admins: all)"),
)
class AuditEventViewSet(RowListMixin, mixins.RetrieveModelMixin, PortalViewSet):
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter
    filter_backends = [PortalFilterBackend]  # newest first, always
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        return selectors.audit_events_visible_to(self.request.user)
