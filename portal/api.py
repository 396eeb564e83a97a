"""API-wide plumbing: turn domain errors into JSON responses with the field and the reason."""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal.params import page_number, whole_number
from tenants.errors import InvalidTransition


def exception_handler(exc, context):
    """Map service-layer errors to DRF's: 400 with per-field messages, 403, 409 for transitions."""
    if isinstance(exc, InvalidTransition):
        return Response(
            {"detail": str(exc), "state": [exc.current_state]}, status=status.HTTP_409_CONFLICT
        )
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            exc = ValidationError(detail=exc.message_dict)
        else:
            exc = ValidationError(detail={"non_field_errors": exc.messages})
    elif isinstance(exc, DjangoPermissionDenied):
        exc = PermissionDenied(detail=str(exc) or None)
    return drf_exception_handler(exc, context)


class PortalPagination(PageNumberPagination):
    """Pages of 50 by default; clients may ask for up to 1,000 rows with ``?page_size=``.
    A page size or page number out of range is a 400 naming it (DRF would quietly use the
    default size); a page past the end stays a 404."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw in (None, ""):
            return self.page_size
        return _checked(
            self.page_size_query_param, whole_number, raw, low=1, high=self.max_page_size
        )

    def get_page_number(self, request, paginator):
        raw = request.query_params.get(self.page_query_param)
        if raw in self.last_page_strings:
            return raw
        return _checked(self.page_query_param, page_number, raw)


def _checked(name: str, parse, raw, **bounds) -> int:
    try:
        return parse(raw, **bounds)
    except ValueError as error:
        raise ValidationError({name: [str(error)]}) from None
