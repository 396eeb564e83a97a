"""The API's OpenAPI description: the error answers of ``portal.api.exception_handler``, declared
once and added to every operation that can give them.

Views declare their successful answers (and may override an error's description); the schema
class adds the errors from what the operation is:

* 400 for every operation: any query string may hold what is not text
  (``core.middleware``), besides the body, filters, ordering, pagination and parameters an
  operation takes;
* 401 for views that need a signed-in user, and 403 where such a user may still be refused (a
  write, or an action in the view's ``admin_actions``);
* 404 when the path names an object (another team's is a 404 too, never a 403), and on a
  paginated list (a page that does not exist);
* 409 for an action on one object (a state change the object's state may not allow), and for
  views that read a team's namespace (``reads_team_namespace``: not confirmed as the portal's);
* 502 for views that read the cluster (``reads_cluster``); 503 for every operation, as any may
  find the database away (besides the cluster or Prometheus, for those that read them).
"""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


class ErrorSerializer(serializers.Serializer):
    """Every error answer but 400's."""

    detail = serializers.CharField(help_text="What went wrong, in words that can be shown.")
    state = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="409: the object's current state.",
    )
    reason = serializers.CharField(
        required=False,
        help_text="503 from Prometheus: not_configured, unreachable, timeout, query_error or "
        "error.",
    )


ERROR_RESPONSES = {
    400: OpenApiResponse(
        OpenApiTypes.OBJECT,
        description="Field name -> list of messages (non_field_errors for none).",
    ),
    401: OpenApiResponse(ErrorSerializer, description="No credentials, or unknown ones."),
    403: OpenApiResponse(ErrorSerializer, description="Visible to you, but not yours to do."),
    404: OpenApiResponse(ErrorSerializer, description="Not found, or not visible to you."),
    409: OpenApiResponse(
        ErrorSerializer,
        description="The object's state does not allow it (see `state`), or the team's namespace "
        "on the cluster is not confirmed as the portal's, so nothing is read from it.",
    ),
    502: OpenApiResponse(ErrorSerializer, description="The cluster refused or failed."),
    503: OpenApiResponse(
        ErrorSerializer,
        description="The portal's database, the cluster or Prometheus is unreachable, slow or "
        "busy: try again after Retry-After seconds.",
    ),
}


class PortalAutoSchema(AutoSchema):
    """drf-spectacular's schema, with the errors each operation can answer added to the answers
    its view declares (a view's own declaration of an error wins)."""

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code in self.error_statuses():
            if str(code) not in responses:
                responses[str(code)] = self._get_response_for_code(
                    ERROR_RESPONSES[code], str(code), direction=direction
                )
        return responses

    def error_statuses(self) -> list[int]:
        view = self.view
        signed_in = any(issubclass(p, IsAuthenticated) for p in view.permission_classes)
        action = getattr(view, "action", None)
        statuses = [400]
        if signed_in:
            statuses.append(401)
            if self.method in WRITE_METHODS or action in getattr(view, "admin_actions", {}):
                statuses.append(403)
        if "{" in self.path or self._paginated():
            statuses.append(404)
        if (self.method == "POST" and getattr(view, "detail", False)) or getattr(
            view, "reads_team_namespace", False
        ):
            statuses.append(409)
        if getattr(view, "reads_cluster", False):
            statuses.append(502)
        # Any operation may find the database away (restarting, out of connections).
        statuses.append(503)
        return statuses

    def _paginated(self) -> bool:
        """A paginated list: a page that does not exist is a 404."""
        return self._is_list_view() and self._get_paginator() is not None
