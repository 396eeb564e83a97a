"""The hand-written corpus of nasty inputs (``corpus``) against every write endpoint of the
API: each one is refused with a 4xx whose JSON body names the field, nothing is written (every
table of the portal reads the same before and after), and nothing is a server error.

Each case changes one field of a body that is otherwise valid (``test_each_valid_body_is_
accepted`` proves it, so a refusal is the field's), or sends one whole raw body. Which strings
a field must refuse depends on what it is (see ``corpus``): an identifier refuses them all; free
text keeps printable metacharacters verbatim (``test_free_text_keeps_metacharacters_verbatim``)
and refuses control characters and over-long values.

In-process, on SQLite in the fast loop and on PostgreSQL in ``make test``: the answers are the
portal's; the 10 MB bodies also go through a real server in
``tests/integration/test_big_bodies.py``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import pytest
from django.db import transaction

from tests.abuse import corpus
from tests.abuse.corpus import CONTROL, MULTILINE, OVERLONG, PRINTABLE, Nasty
from tests.abuse.harness import Outcome, api_client, json_body, refused, run_case

# --- what each kind of field must refuse -----------------------------------------------------


def _numeric(value) -> bool:
    """Whether a string reads as a number."""
    try:
        float(str(value).strip())
    except ValueError:
        return False
    return True


NOT_NUMBERS = [n for n in corpus.STRINGS if not _numeric(n.value)]
NON_NUMERIC_TYPES = [n for n in corpus.WRONG_TYPES if not isinstance(n.value, int | float)]
NUMBERS = corpus.NUMBERS + NOT_NUMBERS + NON_NUMERIC_TYPES

KINDS = {
    # slugs, usernames, names of clusters and resources, image references, enum values
    "id": corpus.STRINGS + corpus.WRONG_TYPES,
    # free text on one line (a team's name): any printable text
    "line": [n for n in corpus.STRINGS if n.kind in (MULTILINE, CONTROL, OVERLONG)]
    + corpus.WRONG_TYPES,
    # free text on several lines (a justification, a note)
    "text": [n for n in corpus.STRINGS if n.kind in (CONTROL, OVERLONG)] + corpus.WRONG_TYPES,
    "number": NUMBERS,
    "date": corpus.DATES + NOT_NUMBERS + corpus.WRONG_TYPES,
    # a list of ids
    "ids": [Nasty(f"list-of-{n.label}", [n.value], n.kind) for n in corpus.NUMBERS + NOT_NUMBERS]
    + [Nasty("list-empty", []), Nasty("list-too-long", list(range(1, 10_002)))]
    + [n for n in corpus.WRONG_TYPES if not isinstance(n.value, list)],
    # a list of strings, one per argument: never one shell string
    "strings": [Nasty(f"list-of-{n.label}", [n.value], n.kind) for n in corpus.CONTROL_TEXT]
    + [Nasty("list-too-long", ["a"] * 10_000)]
    + [n for n in corpus.STRINGS if n.kind == PRINTABLE][:20]
    + [n for n in corpus.WRONG_TYPES if not isinstance(n.value, list)],
    # a list of registry entries (a host, or a path under one): every string as an entry, and
    # entries that are no strings
    "registries": [Nasty(f"list-of-{n.label}", [n.value], n.kind) for n in corpus.STRINGS]
    + [Nasty(f"list-of-{n.label}", [n.value]) for n in [*corpus.WRONG_TYPES, corpus.NULL]]
    + [Nasty("list-too-long", ["registry.example.com"] * 10_000)]
    + [Nasty("list-of-51", [f"r{i}.example.com" for i in range(51)])]
    + [Nasty("entry-too-long", ["a" * 250 + ".example.com"])]
    + [Nasty("url", ["https://nvcr.io"]), Nasty("docker-hub-path", ["nvidia"])]
    + [Nasty("upper-case-path", ["nvcr.io/NVIDIA"]), Nasty("entry-with-tag", ["nvcr.io/x:1"])]
    + corpus.WRONG_TYPES
    + [corpus.NULL],
    # true or false, and nothing that merely reads as one (1, "yes", "on")
    "bool": corpus.STRINGS
    + [n for n in corpus.NUMBERS + corpus.WRONG_TYPES if not isinstance(n.value, bool)]
    + [Nasty("string-true-upper", "True"), Nasty("string-one", "1"), Nasty("string-on", "on")]
    + [corpus.NULL],
}

# Values the corpus holds that are valid for some fields, by why.
BLANK = {"empty", "spaces", "no-break-space", "ideographic-space"}  # optional: "not given"
BLANK_NUMBER = BLANK | {"string-empty", "string-space"}
DNS_LABELS = {"yaml-bool", "yaml-null"}  # "yes" and "null" are names like any other
TRIMMED_SLUG = {"padded"}  # "  vision  " is team vision, as DRF trims text
FRACTIONS = {"float-fraction", "string-fraction", "type-float"}  # amounts take two decimals


@dataclass(frozen=True)
class Field:
    """A field of a body: its kind (which corpus values it must refuse), the corpus values it
    takes all the same (by label), and the keys an answer may name it by."""

    kind: str
    valid: frozenset[str] = frozenset()
    names: tuple[str, ...] = ()

    def refuses(self) -> list[Nasty]:
        return [n for n in KINDS[self.kind] if n.label not in self.valid]


def F(kind: str, *valid: str | set[str], names: tuple[str, ...] = ()) -> Field:
    labels: set[str] = set()
    for item in valid:
        labels |= {item} if isinstance(item, str) else item
    return Field(kind, frozenset(labels), names)


@dataclass(frozen=True)
class Endpoint:
    """One write endpoint: how to call it, a valid body, and its fields.

    ``fields`` maps a field (``a.b`` nested, ``a.0.b`` in a list, ``annotations.<key>``) to
    what it is; the answer must name its first part (``a``) unless the field says otherwise."""

    name: str
    method: str
    path: Callable[[dict], str]
    actor: str
    body: Callable[[dict], dict]
    fields: dict[str, Field]
    # Every field is optional: an empty body is a valid one.
    optional_body: bool = False

    def __str__(self) -> str:
        return self.name


def _job(w):
    return {
        "team": w["team"].slug,
        "cluster": w["cluster"].name,
        "name": "train-1",
        "image": "registry.example.com/ml/trainer:1.0",
        "command": ["python", "train.py"],
        "args": ["--epochs", "1"],
        "env": [{"name": "MODE", "value": "fast"}],
        "gpus": 1,
        "gpu_resource": "nvidia.com/gpu",
        "cpu_cores": "2",
        "memory_gib": "8",
        "max_runtime_seconds": 3600,
        "backoff_limit": 1,
        "preprocess": {"image": "registry.example.com/ml/prep:1.0", "mode": "before"},
        "annotations": {"example.com/purpose": "training"},
    }


# Job names are for people (letters, digits, spaces, '.', '_', '-'); they name no namespace.
JOB_NAMES = {"promql-or", "yaml-hex", "path-kube-system", "path-default-namespace"}
JOB_NAMES |= {"upper-case", "padded"} | DNS_LABELS
ENV_NAMES = {"sql-underscore", "shell-option", "shell-dash-rf", "yaml-document", "yaml-end"}
ENV_NAMES |= {"path-dot-dot", "path-dot", "path-kube-system", "path-default-namespace"}
ENV_NAMES |= {"upper-case"} | DNS_LABELS
# A date far ahead is a date: bounding how far ahead quota may be planned is the part of issue
# 11 that makes "every date ... reject out-of-range values" (web-hardening).
FAR_END = {"date-last-day"}
NAMESPACE_NAMES = {"path-kube-system", "path-default-namespace"}
# A first component in upper case is a registry host to the container runtime (VISION/x is
# pulled from host vision), and an empty list allows no registry.
REGISTRY_ENTRIES = {"list-of-upper-case", "list-of-yaml-hex", "type-empty-list"}
NOTE = F("text")

ENDPOINTS = [
    Endpoint(
        "team-create",
        "post",
        lambda w: "/api/v1/teams/",
        "admin",
        lambda w: {"slug": "new-team", "name": "New team", "description": "What it does."},
        {"slug": F("id", DNS_LABELS), "name": F("line"), "description": F("text")},
    ),
    Endpoint(
        "membership-set",
        "post",
        lambda w: f"/api/v1/teams/{w['team'].slug}/members/",
        "admin",
        lambda w: {"username": w["outsider"].username, "role": "member"},
        {"username": F("id"), "role": F("id")},
    ),
    Endpoint(
        "membership-role",
        "patch",
        lambda w: f"/api/v1/teams/{w['team'].slug}/members/{w['member'].username}/",
        "admin",
        lambda w: {"role": "viewer"},
        {"role": F("id")},
    ),
    Endpoint(
        "team-archive",
        "post",
        lambda w: f"/api/v1/teams/{w['team'].slug}/archive/",
        "admin",
        lambda w: {"note": "Project ended."},
        {"note": NOTE},
        optional_body=True,
    ),
    Endpoint(
        "namespace-delete",
        "post",
        lambda w: (
            f"/api/v1/teams/{w['archived'].slug}/clusters/{w['cluster'].name}/delete-namespace/"
        ),
        "admin",
        lambda w: {"confirm": w["archived"].slug},
        {"confirm": F("id")},
    ),
    Endpoint(
        "cluster-overcommit",
        "patch",
        lambda w: f"/api/v1/clusters/{w['cluster'].name}/",
        "admin",
        lambda w: {"overcommit_ratio": "1.50"},
        {"overcommit_ratio": F("number", FRACTIONS)},
    ),
    Endpoint(
        "cluster-borrowing",
        "patch",
        lambda w: f"/api/v1/clusters/{w['cluster'].name}/",
        "admin",
        lambda w: {"borrowers_share_by_weight": True},
        {"borrowers_share_by_weight": F("bool")},
    ),
    Endpoint(
        "cluster-registries",
        "patch",
        lambda w: f"/api/v1/clusters/{w['cluster'].name}/",
        "admin",
        lambda w: {
            "allowed_registries": ["registry.example.com", "nvcr.io"],
            "allow_all_registries": False,
        },
        {
            "allowed_registries": F("registries", REGISTRY_ENTRIES),
            "allow_all_registries": F("bool"),
        },
    ),
    Endpoint(
        "queue-policy",
        "put",
        lambda w: f"/api/v1/teams/{w['team'].slug}/queue-policies/{w['cluster'].name}/",
        "admin",
        lambda w: {"borrowing_limit": 2, "lending_limit": 1, "fair_sharing_weight": "1.5"},
        {
            # No limit is null (or blank, as a form sends it); 0 GPUs is a limit.
            "borrowing_limit": F("number", BLANK_NUMBER, "type-zero"),
            "lending_limit": F("number", BLANK_NUMBER, "type-zero"),
            "fair_sharing_weight": F("number", FRACTIONS),
        },
        optional_body=True,
    ),
    Endpoint(
        "member-limit-set",
        "post",
        lambda w: f"/api/v1/teams/{w['team'].slug}/member-limits/",
        "lead",
        lambda w: {
            "user": w["member"].username,
            "cluster": w["cluster"].name,
            "max_gpus": 4,
            "max_running": 2,
        },
        {
            "user": F("id", TRIMMED_SLUG),
            "cluster": F("id", TRIMMED_SLUG),
            # No limit is null (or blank); 0 is a limit.
            "max_gpus": F("number", BLANK_NUMBER, "type-zero"),
            "max_running": F("number", BLANK_NUMBER, "type-zero"),
        },
    ),
    Endpoint(
        "quota-request",
        "post",
        lambda w: "/api/v1/quota-requests/",
        "lead",
        lambda w: {
            "team": w["team"].slug,
            "cluster": w["cluster"].name,
            "gpu_resource": "nvidia.com/gpu",
            "gpus": 2,
            "cpu_cores": "8",
            "memory_gib": 64,
            "starts_on": str(w["today"]),
            "ends_on": str(w["in_a_month"]),
            "justification": "Fine-tuning.",
        },
        {
            "team": F("id", TRIMMED_SLUG),
            "cluster": F("id"),
            "gpu_resource": F("id"),
            "gpus": F("number"),
            "cpu_cores": F("number", FRACTIONS, BLANK_NUMBER),
            "memory_gib": F("number", BLANK_NUMBER, "type-zero"),
            # A start after the end is named on the end.
            "starts_on": F("date", BLANK, "date-empty-string", names=("starts_on", "ends_on")),
            "ends_on": F("date", BLANK, "date-empty-string", FAR_END),
            "justification": F("text"),
        },
    ),
    Endpoint(
        "quota-approve",
        "post",
        lambda w: f"/api/v1/quota-requests/{w['pending'].pk}/approve/",
        "admin",
        lambda w: {"gpus": 1, "ends_on": str(w["pending"].ends_on), "note": "Approved."},
        {"gpus": F("number"), "ends_on": F("date", FAR_END), "note": NOTE},
        optional_body=True,
    ),
    Endpoint(
        "quota-reject",
        "post",
        lambda w: f"/api/v1/quota-requests/{w['pending'].pk}/reject/",
        "admin",
        lambda w: {"note": "No capacity."},
        {"note": NOTE},
    ),
    Endpoint(
        "grant-shrink",
        "post",
        lambda w: f"/api/v1/quota-grants/{w['grant'].pk}/shrink/",
        "admin",
        lambda w: {"gpus": 2, "ends_on": str(w["in_a_week"]), "note": "Shrunk."},
        {"gpus": F("number"), "ends_on": F("date", FAR_END), "note": NOTE},
    ),
    Endpoint(
        "grant-revoke",
        "post",
        lambda w: f"/api/v1/quota-grants/{w['grant'].pk}/revoke/",
        "admin",
        lambda w: {"note": "Revoked."},
        {"note": NOTE},
        optional_body=True,
    ),
    Endpoint(
        "job-submit",
        "post",
        lambda w: "/api/v1/jobs/",
        "member",
        _job,
        {
            "team": F("id"),
            "cluster": F("id"),
            "name": F("id", JOB_NAMES),
            "image": F("id"),
            "command": F("strings"),
            "args": F("strings"),
            "env.0.name": F("id", ENV_NAMES),
            "env.0.value": F("text"),
            "gpus": F("number"),
            "gpu_resource": F("id", BLANK),
            "gpu_model": F("id", BLANK),
            "cpu_cores": F("number", FRACTIONS, "string-empty", "empty"),
            "memory_gib": F("number", FRACTIONS, "string-empty", "empty"),
            "max_runtime_seconds": F("number"),
            "backoff_limit": F("number", "type-zero"),
            "preprocess.image": F("id"),
            "preprocess.mode": F("id", "empty"),
            "preprocess.cpu_cores": F("number", FRACTIONS, "string-empty", "empty"),
            "annotations.example.com/purpose": F("text"),
        },
    ),
    Endpoint(
        "department-create",
        "post",
        lambda w: "/api/v1/departments/",
        "admin",
        lambda w: {"slug": "new-department", "name": "New department"},
        # A department names no namespace: "default" and "kube-system" are names like any other.
        {"slug": F("id", DNS_LABELS, NAMESPACE_NAMES), "name": F("line")},
    ),
    Endpoint(
        "department-ceiling",
        "put",
        lambda w: f"/api/v1/departments/{w['department'].slug}/ceilings/",
        "admin",
        lambda w: {"cluster": w["cluster"].name, "gpu_model": "NVIDIA-A100-SXM4-80GB", "gpus": 8},
        # A ceiling of 0 GPUs is a ceiling; null removes it.
        {"cluster": F("id"), "gpu_model": F("id"), "gpus": F("number", "type-zero", "type-null")},
    ),
    Endpoint(
        "team-department",
        "put",
        lambda w: f"/api/v1/teams/{w['other_team'].slug}/department/",
        "admin",
        lambda w: {"department": w["department"].slug},
        # Null or blank: in no department.
        {"department": F("id", BLANK, "type-null", "string-empty")},
    ),
    Endpoint(
        "notifications-read",
        "post",
        lambda w: "/api/v1/notifications/read/",
        "lead",
        lambda w: {"ids": [w["notification"].pk]},
        # Ids a bigint holds are ids (of no notification: nothing is marked).
        {"ids": F("ids", "list-of-int32-max-plus-one", "list-of-int64-max")},
        optional_body=True,
    ),
    Endpoint(
        "token",
        "post",
        lambda w: "/api/v1/auth/token/",
        "anonymous",
        lambda w: {
            "username": w["lead"].username,
            "password": "correct-horse-battery",
            "scope": "read-only",
        },
        # Wrong credentials are one error for both fields: which one was wrong is not told.
        {
            "username": F("id", names=("username", "non_field_errors")),
            "password": F("id", names=("password", "non_field_errors")),
            "scope": F("id"),
        },
    ),
]


def with_value(body: dict, path: str, value) -> dict:
    """``body`` with the field at ``path`` set to ``value``: ``a``, ``a.b`` (a nested object,
    or a key of a mapping such as annotations, which may hold dots) or ``a.0.b`` (in a list)."""
    body = copy.deepcopy(body)
    head, _, rest = path.partition(".")
    if not rest:
        body[head] = value
        return body
    container = body[head]
    if isinstance(container, list):
        index, _, name = rest.partition(".")
        container[int(index)][name] = value
    else:
        container[rest] = value
    return body


def send(client, endpoint: Endpoint, path: str, body):
    return getattr(client, endpoint.method)(
        path, data=json.dumps(body), content_type="application/json"
    )


def send_raw(client, endpoint: Endpoint, path: str, raw: corpus.RawBody):
    return getattr(client, endpoint.method)(path, data=raw.content, content_type=raw.content_type)


# Bodies that hold no field the endpoint reads (nothing, or keys that are no field of it): an
# endpoint whose fields are all optional takes them as "no note", as DRF ignores unknown keys.
NO_FIELDS = {"empty-json", "form-garbage"}


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_each_valid_body_is_accepted(endpoint, world, in_process_requests):
    client = api_client(world, endpoint.actor)

    response = send(client, endpoint, endpoint.path(world), endpoint.body(world))

    assert 200 <= response.status_code < 300, response.content[:500]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_every_nasty_field_value_is_refused_naming_the_field(endpoint, world, in_process_requests):
    client = api_client(world, endpoint.actor)
    path, valid = endpoint.path(world), endpoint.body(world)
    outcome = Outcome()
    for name, spec in endpoint.fields.items():
        keys = spec.names or (name.partition(".")[0],)
        judge = partial(refused, keys=keys)
        for nasty in spec.refuses():
            call = partial(send, client, endpoint, path, with_value(valid, name, nasty.value))
            run_case(outcome, f"{name}={nasty}", call, judge)
    outcome.assert_none_failed()


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_every_nasty_body_is_refused(endpoint, world, in_process_requests):
    client = api_client(world, endpoint.actor)
    path = endpoint.path(world)
    outcome = Outcome()
    for raw in corpus.BODIES:
        if endpoint.optional_body and raw.label in NO_FIELDS:
            continue
        call = partial(send_raw, client, endpoint, path, raw)
        run_case(outcome, str(raw), call, partial(refused, keys=()))
    outcome.assert_none_failed()


# Free text, and where it comes back in the answer: (endpoint, field, answer key).
FREE_TEXT = [
    ("team-create", "name", "name"),
    ("team-create", "description", "description"),
    ("quota-request", "justification", "justification"),
    ("job-submit", "env.0.value", "env"),
    ("job-submit", "annotations.example.com/purpose", "annotations"),
]


@pytest.mark.parametrize(("endpoint_name", "field", "key"), FREE_TEXT)
def test_free_text_keeps_metacharacters_verbatim(
    endpoint_name, field, key, world, in_process_requests
):
    """SQL, shell, PromQL, YAML and markup in free text are text: kept as given (surrounding
    blanks aside), never run. Blank values are left out: a required text may not be blank."""
    endpoint = next(e for e in ENDPOINTS if e.name == endpoint_name)
    client = api_client(world, endpoint.actor)
    path, valid = endpoint.path(world), endpoint.body(world)
    kinds = (PRINTABLE,) if endpoint.fields[field].kind == "line" else (PRINTABLE, MULTILINE)
    outcome = Outcome()
    for nasty in corpus.STRINGS:
        if nasty.kind not in kinds or not nasty.value.strip():
            continue
        outcome.cases += 1
        with transaction.atomic():
            response = send(client, endpoint, path, with_value(valid, field, nasty.value))
            body = json_body(response)
            outcome.check(
                response.status_code in (200, 201),
                f"{field}={nasty}: answered {response.status_code} {body!r}",
            )
            if response.status_code in (200, 201):
                stored = _echoed(body[key], field)
                outcome.check(
                    stored in (nasty.value, nasty.value.strip()),
                    f"{field}={nasty}: kept as {stored!r}",
                )
            transaction.set_rollback(True)
    outcome.assert_none_failed()


def _echoed(value, field: str):
    if field.startswith("env."):
        return value[0]["value"]
    if field.startswith("annotations."):
        return value[field.partition(".")[2]]
    return value
