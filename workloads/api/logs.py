"""What every workload's API shares about logs and events: the ``tail``, ``container`` and
``pod`` parameters (a 400 naming the parameter for a bad value), the answers' shapes
(``LogSerializer``'s, ``WorkloadEventSerializer``'s) and the ``events`` action."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from core.params import whole_number
from workloads.api.serializers import WorkloadEventSerializer
from workloads.cluster_reads import DEFAULT_TAIL_LINES, MAX_TAIL_LINES, LogResult, WorkloadEvent
from workloads.specs import DNS_SUBDOMAIN_RE

TAIL = OpenApiParameter(
    "tail", int, description=f"Last N lines (default 100, at most {MAX_TAIL_LINES})."
)


def container_parameter(containers: Iterable[str], *, description: str) -> OpenApiParameter:
    """``?container=`` in the schema: one of the workload's ``containers``."""
    return OpenApiParameter("container", str, enum=list(containers), description=description)


def _int_param(request, name: str, default: int, *, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        return whole_number(raw, low=low, high=high)
    except ValueError as error:
        raise ValidationError({name: [str(error)]}) from None


def log_tail(request) -> int:
    """``?tail=``: how many of the log's last lines (the default when not given), else a 400."""
    return _int_param(
        request,
        "tail",
        DEFAULT_TAIL_LINES,
        low=0,
        high=MAX_TAIL_LINES,
    )


def log_container(request, *, containers, default: str) -> str:
    """``?container=``: one of the workload's ``containers`` (``default`` when not given)."""
    container = request.query_params.get("container") or default
    if container not in containers:
        raise ValidationError({"container": [f"Must be one of: {', '.join(containers)}."]})
    return container


def log_answer(result: LogResult, *, tail: int) -> Response:
    """A log read (``LogSerializer``'s shape)."""
    return Response(
        {
            "pod": result.pod,
            "container": result.container,
            "tail": tail,
            "log": result.text,
            "detail": result.detail,
        }
    )


def log_pod(request) -> str | None:
    """``?pod=``: one of the workload's pods by name (None: the newest), else a 400."""
    pod = request.query_params.get("pod") or None
    if pod is not None and (len(pod) > 253 or not DNS_SUBDOMAIN_RE.match(pod)):
        raise ValidationError({"pod": ["Not a pod name (a DNS subdomain)."]})
    return pod


def events_answer(events: list[WorkloadEvent]) -> Response:
    """Events about a workload's objects (``WorkloadEventSerializer``'s shape), oldest first."""
    return Response(WorkloadEventSerializer([e.__dict__ for e in events], many=True).data)


def events_action(summary: str) -> Callable:
    """Makes a viewset's method its ``events`` action: ``GET .../{id}/events/``, unpaginated and
    unfiltered, reading the cluster, answered in ``WorkloadEventSerializer``'s shape."""

    def decorate(method: Callable) -> Callable:
        route = action(
            detail=True,
            methods=["get"],
            pagination_class=None,
            filter_backends=[],
            reads_cluster=True,
        )
        schema = extend_schema(summary=summary, responses=WorkloadEventSerializer(many=True))
        return schema(route(method))

    return decorate
