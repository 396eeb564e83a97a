"""The corpus in the query parameters of every list and read endpoint, and in the path segments
that name an object: refused with a 4xx naming the parameter (a path segment: a JSON 404),
nothing written, never a server error.

A parameter is one of:

- ``choice`` (an enum, an ordering, a format, a container): every nasty string is refused;
- ``name`` (a cluster the answer depends on, a pod): every nasty string is refused;
- ``filter`` (a free-text filter: a team slug, a username, an action): text that is not text
  (control characters, over-long) is refused; printable text is a filter like any other and
  matches nothing (200), or is refused naming the parameter;
- ``number`` and ``date``: every corpus number or date and every non-number is refused;
- ``page`` and ``page_size``: DRF's own (a page it does not have is a 404; a page size it cannot
  read is the default): never a server error. Refusing them with 400 is web-hardening's part of
  issue 11.

In-process, on SQLite in the fast loop and on PostgreSQL in ``make test`` (where a NUL in a
filter would reach PostgreSQL, which cannot hold one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from urllib.parse import urlencode

import pytest

from tests.abuse import corpus
from tests.abuse.corpus import CONTROL, OVERLONG
from tests.abuse.harness import (
    BLANK,
    SENT_AS_TEXT,
    Outcome,
    api_client,
    json_body,
    refused,
    run_case,
)


@dataclass(frozen=True)
class Read:
    """A read endpoint and its query parameters, by kind; ``valid`` lists the corpus labels a
    parameter takes all the same (by why)."""

    name: str
    path: Callable[[dict], str]
    actor: str
    params: dict[str, str]
    valid: dict[str, set[str]] = field(default_factory=dict)
    # Parameters an answer may name instead (a start too early for the bucket: the bucket).
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name


PAGED = {"page": "page", "page_size": "page"}
QUOTA_FILTERS = {"team": "filter", "cluster": "filter", "gpu_resource": "filter"}
QUOTA_FILTERS |= {"state": "choice", "ordering": "choice"}
# No ordering and no start/end are "not given"; so is an empty or blank window or format.
NOT_GIVEN = {"ordering": BLANK, "start": BLANK, "end": BLANK, "bucket": {"empty"}}
NOT_GIVEN |= {"window": {"empty"}, "format": {"empty"}, "container": {"empty"}}
NOT_GIVEN |= {"cluster": {"empty"}, "pod": {"empty"}, "tail": {"empty", "string-empty"}}
NOT_GIVEN |= {"target_id": BLANK, "state": {"empty"}}
# Ids a bigint holds: an audit event's target may have any of them.
IDS = {"int32-max-plus-one", "int64-max"}
# Names a pod could have: they are asked of the cluster (here unreachable: a declared 502).
POD_NAMES = {"yaml-bool", "yaml-null", "path-kube-system", "path-default-namespace"}
# Date-times Django reads (12/31/2030 is one of its formats); without window=custom the
# window is a preset and they are not used (Prometheus, here unreachable: a declared 503).
DATE_TIMES = {"date-year-one", "date-last-day", "date-us-format"}

READS = [
    Read("teams", lambda w: "/api/v1/teams/", "lead", {"ordering": "choice", **PAGED}),
    Read(
        "members",
        lambda w: f"/api/v1/teams/{w['team'].slug}/members/",
        "lead",
        {"ordering": "choice", **PAGED},
    ),
    Read(
        "team-clusters",
        lambda w: f"/api/v1/teams/{w['team'].slug}/clusters/",
        "lead",
        {"ordering": "choice", **PAGED},
    ),
    Read(
        "queue-policies",
        lambda w: f"/api/v1/teams/{w['team'].slug}/queue-policies/",
        "lead",
        {"ordering": "choice", **PAGED},
    ),
    Read("clusters", lambda w: "/api/v1/clusters/", "lead", {"ordering": "choice", **PAGED}),
    Read("quota-requests", lambda w: "/api/v1/quota-requests/", "lead", QUOTA_FILTERS | PAGED),
    Read(
        "review-queue",
        lambda w: "/api/v1/quota-requests/review-queue/",
        "admin",
        QUOTA_FILTERS | PAGED,
    ),
    Read("quota-grants", lambda w: "/api/v1/quota-grants/", "lead", QUOTA_FILTERS | PAGED),
    Read(
        "audit-events",
        lambda w: "/api/v1/audit-events/",
        "lead",
        {"team": "filter", "action": "filter", "target_type": "filter", "target_id": "number"}
        | PAGED,
        valid={"target_id": IDS},
    ),
    Read(
        "jobs",
        lambda w: "/api/v1/jobs/",
        "member",
        {"team": "filter", "cluster": "filter", "user": "filter", "state": "choice"}
        | {"ordering": "choice"}
        | PAGED,
    ),
    Read("notifications", lambda w: "/api/v1/notifications/", "lead", PAGED),
    Read(
        "usage-report",
        lambda w: "/api/v1/usage-report/",
        "lead",
        {"start": "date", "end": "date", "bucket": "choice", "format": "choice"},
        names={"start": ("start", "bucket")},
    ),
    Read(
        "utilisation",
        lambda w: f"/api/v1/monitoring/teams/{w['team'].slug}/utilisation/",
        "lead",
        {"cluster": "name", "window": "choice", "start": "date", "end": "date"},
        valid={"start": DATE_TIMES, "end": DATE_TIMES},
    ),
    Read(
        "pods",
        lambda w: f"/api/v1/monitoring/teams/{w['team'].slug}/pods/",
        "lead",
        {"cluster": "name"},
    ),
    Read(
        "booking-calendar",
        lambda w: f"/api/v1/clusters/{w['cluster'].name}/calendar/",
        "lead",
        {"start": "date", "end": "date", "gpu_resource": "name", "gpu_model": "name"}
        | {"pending": "choice"},
        # No kind is the default kind, no model any model; "yes" is a boolean.
        valid={"gpu_resource": BLANK, "gpu_model": BLANK, "pending": {"yaml-bool"} | BLANK},
    ),
    Read(
        "earliest-window",
        # Valid figures to start from: the nasty value of a parameter replaces its own.
        lambda w: f"/api/v1/clusters/{w['cluster'].name}/earliest-window/?gpus=2&days=3",
        "lead",
        {"gpus": "number", "days": "number", "not_before": "date", "gpu_model": "name"},
        valid={"not_before": BLANK, "gpu_model": BLANK},
    ),
    Read(
        "job-logs",
        lambda w: f"/api/v1/jobs/{w['job'].pk}/logs/",
        "member",
        {"tail": "number", "container": "choice", "pod": "name", "format": "choice"},
        valid={"pod": POD_NAMES},
    ),
]


def _judge_filter(outcome: Outcome, what: str, response, *, key: str, nasty) -> None:
    """A free-text filter: text that is not text is refused; printable text filters."""
    if nasty.kind in (CONTROL, OVERLONG) or response.status_code != 200:
        refused(outcome, what, response, (key,))


def _judge_page(outcome: Outcome, what: str, response) -> None:
    outcome.check(
        response.status_code < 500 and isinstance(json_body(response), dict),
        f"{what}: answered {response.status_code} {response.content[:200]!r}",
    )


@pytest.mark.parametrize("read", READS, ids=str)
def test_every_nasty_query_parameter_is_refused_naming_it(read, world, in_process_requests):
    client = api_client(world, read.actor)
    path = read.path(world)
    outcome = Outcome()
    for key, kind in read.params.items():
        valid = NOT_GIVEN.get(key, set()) | read.valid.get(key, set())
        for nasty in SENT_AS_TEXT[kind]:
            if nasty.label in valid:
                continue
            # As a client sends it: UTF-8, a lone surrogate as the bytes CESU-8 gives it.
            query = urlencode({key: nasty.value}, errors="surrogatepass")
            call = partial(client.get, f"{path}{'&' if '?' in path else '?'}{query}")
            if kind == "filter":
                judge = partial(_judge_filter, key=key, nasty=nasty)
            elif kind == "page":
                judge = _judge_page
            else:
                judge = partial(refused, keys=read.names.get(key, (key,)))
            run_case(outcome, f"{key}={nasty}", call, judge)
    outcome.assert_none_failed()


# Paths naming one object, with {} where the nasty segment goes; GETs and writes.
OBJECT_PATHS = [
    ("get", "/api/v1/teams/{}/"),
    ("post", "/api/v1/teams/{}/archive/"),
    ("get", "/api/v1/teams/{}/members/"),
    ("get", "/api/v1/teams/vision/members/{}/"),
    ("patch", "/api/v1/teams/vision/members/{}/"),
    ("delete", "/api/v1/teams/vision/members/{}/"),
    ("get", "/api/v1/teams/{}/clusters/"),
    ("post", "/api/v1/teams/archived/clusters/{}/delete-namespace/"),
    ("get", "/api/v1/teams/{}/queue-policies/"),
    ("put", "/api/v1/teams/vision/queue-policies/{}/"),
    ("get", "/api/v1/clusters/{}/"),
    ("patch", "/api/v1/clusters/{}/"),
    ("get", "/api/v1/quota-requests/{}/"),
    ("post", "/api/v1/quota-requests/{}/approve/"),
    ("post", "/api/v1/quota-requests/{}/reject/"),
    ("post", "/api/v1/quota-requests/{}/cancel/"),
    ("get", "/api/v1/quota-grants/{}/"),
    ("post", "/api/v1/quota-grants/{}/revoke/"),
    ("post", "/api/v1/quota-grants/{}/shrink/"),
    ("get", "/api/v1/jobs/{}/"),
    ("post", "/api/v1/jobs/{}/cancel/"),
    ("get", "/api/v1/jobs/{}/logs/"),
    ("get", "/api/v1/jobs/{}/events/"),
    ("get", "/api/v1/audit-events/{}/"),
    ("get", "/api/v1/clusters/{}/calendar/"),
    ("get", "/api/v1/clusters/{}/earliest-window/"),
    ("get", "/api/v1/monitoring/teams/{}/utilisation/"),
    ("get", "/api/v1/monitoring/teams/{}/pods/"),
]


@pytest.mark.parametrize(("method", "template"), OBJECT_PATHS)
def test_every_nasty_path_segment_is_a_json_404(method, template, world, in_process_requests):
    client = api_client(world, "admin")
    outcome = Outcome()
    for nasty in corpus.PATH_SEGMENTS:
        path = template.format(nasty.value)
        call = partial(getattr(client, method), path, data={"note": "x", "role": "member"})
        run_case(outcome, f"{path[:80]} ({nasty})", call, partial(refused, keys=("detail",)))
    outcome.assert_none_failed()
