"""API-wide plumbing: the one map from errors to HTTP answers, and pagination.

Views and services raise; ``exception_handler`` (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``) turns
what they raise into the answer, for every API view alike:

* ``InvalidTransition``: 409 ``{"detail", "state": [current state]}``;
* ``NamespaceNotConfirmed``: 409 ``{"detail"}`` (a team's namespace on the cluster is not
  confirmed as the portal's, so nothing is read from it);
* Django's ``ValidationError``: 400, field name -> list of messages (``non_field_errors`` for
  none); Django's ``PermissionDenied``: 403 ``{"detail"}``;
* ``PrometheusError``: 503 ``{"detail", "reason"}`` with ``Retry-After``;
* ``KubeError``: 503 ``{"detail"}`` with ``Retry-After`` when it is worth retrying (the cluster
  is unreachable, busy or changing), else 502 ``{"detail"}`` (the cluster refused or failed);
* the database unreachable (an ``OperationalError`` or ``InterfaceError``: restarting, down,
  out of connections): 503 ``{"detail"}`` with ``Retry-After``;
* anything else DRF knows (its own 400, 401, 403, 404, 405, ...) as DRF answers it.

``core.openapi`` declares the same answers in the API's description.
"""

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from django.views import defaults
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from clusters.kube import KubeError
from core.params import page_number, whole_number
from monitoring.metrics import NamespaceNotConfirmed, unavailable_message
from monitoring.prometheus import PrometheusError
from tenants.errors import InvalidTransition

logger = logging.getLogger(__name__)

# How long a client should wait before asking again after a 503.
RETRY_AFTER_SECONDS = 30


def exception_handler(exc, context):
    """The HTTP answer for an error an API view let out (see the module's docstring)."""
    if isinstance(exc, InvalidTransition):
        return Response(
            {"detail": str(exc), "state": [exc.current_state]}, status=status.HTTP_409_CONFLICT
        )
    if isinstance(exc, NamespaceNotConfirmed):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, PrometheusError):
        return _unavailable({"detail": unavailable_message(exc), "reason": exc.reason})
    if isinstance(exc, KubeError):
        if exc.transient:
            return _unavailable({"detail": str(exc)})
        return Response({"detail": str(exc)}, status=status.HTTP_502_BAD_GATEWAY)
    if isinstance(exc, OperationalError | InterfaceError):
        logger.error("The database is unreachable: %s", exc)
        return _unavailable({"detail": "The portal's database cannot be reached; try again."})
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            exc = ValidationError(detail=exc.message_dict)
        else:
            exc = ValidationError(detail={"non_field_errors": exc.messages})
    elif isinstance(exc, DjangoPermissionDenied):
        exc = PermissionDenied(detail=str(exc) or None)
    return drf_exception_handler(exc, context)


def _unavailable(body: dict) -> Response:
    response = Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


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


def bad_request(request, exception):
    """Django's 400 handler (a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, a malformed request):
    JSON on an API path, like the API; a body too large is a 413."""
    if not request.path.startswith("/api/"):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return JsonResponse(
            {"detail": f"The request body is larger than the {limit:,} bytes the API takes."},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    return JsonResponse({"detail": "Bad request."}, status=status.HTTP_400_BAD_REQUEST)


def not_found(request, exception):
    """Django's 404 handler: an API path that matches no route answers JSON, like the API."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
    return defaults.page_not_found(request, exception)
