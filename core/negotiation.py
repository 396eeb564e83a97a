"""The API's content negotiation, in a module of its own: DRF reads it from the settings when
``rest_framework.views`` is imported, which ``portal.api``'s own imports do."""

from django.http import Http404
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation


class PortalContentNegotiation(DefaultContentNegotiation):
    """``?format=`` naming no format the view offers is a 400 naming ``format`` (DRF: a 404)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except Http404:
            offered = ", ".join(renderer.format for renderer in renderers)
            error = {self.settings.URL_FORMAT_OVERRIDE: [f"One of: {offered}."]}
            raise ValidationError(error) from None
