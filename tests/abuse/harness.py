"""How the corpus suites send a case and judge the answer: refused with a 4xx whose JSON names
the field, nothing written, no server error.

"Nothing written" is checked on the SQL itself: a case may not run one INSERT, UPDATE or DELETE
(reading every table before and after each of thousands of cases costs more than the cases).
Each case runs in a savepoint rolled back after it, so every case starts from the same world
and one that was wrongly accepted leaves nothing behind for the next.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.abuse import corpus
from tests.tokens import api_token, auth_headers

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "COPY", "TRUNCATE")


def writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"][:120] for q in queries if q["sql"].lstrip().upper().startswith(WRITES)]


def api_client(world: dict, actor: str) -> APIClient:
    """A client with ``world[actor]``'s API token (none for ``"anonymous"``)."""
    client = APIClient()
    if actor != "anonymous":
        headers = auth_headers(api_token(world[actor]))
        client.credentials(**{"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
    return client


def json_body(response):
    try:
        return json.loads(response.content or b"null")
    except ValueError:
        return None


@dataclass
class Outcome:
    """The failures of one test's cases, reported together."""

    failures: list[str] = field(default_factory=list)
    cases: int = 0

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            self.failures.append(message[:400])

    def assert_none_failed(self) -> None:
        assert self.failures == [], (
            f"{len(self.failures)} of {self.cases} cases failed:\n" + "\n".join(self.failures)
        )


def names(body, keys: tuple[str, ...]) -> bool:
    """Whether an error body names one of ``keys`` (any JSON object when ``keys`` is empty)."""
    return isinstance(body, dict) and (not keys or any(key in body for key in keys))


def refused(outcome: Outcome, what: str, response, keys: tuple[str, ...]) -> None:
    outcome.check(
        400 <= response.status_code < 500,
        f"{what}: answered {response.status_code} {response.content[:200]!r}",
    )
    body = json_body(response)
    outcome.check(
        names(body, keys), f"{what}: the answer does not name {' or '.join(keys)}: {body!r}"
    )


def run_case(
    outcome: Outcome, what: str, call: Callable, judge: Callable[[Outcome, str, object], None]
) -> None:
    """Send one case in a savepoint; ``judge`` checks the answer; nothing may be written."""
    outcome.cases += 1
    # The connection keeps the last 9,000 queries: a full log would capture none.
    connection.queries_log.clear()
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        try:
            response = call()
        except Exception as error:  # the test client re-raises a view's exception: a 500
            outcome.failures.append(f"{what}: raised {type(error).__name__}: {error}"[:400])
        else:
            judge(outcome, what, response)
            written = writes(queries)
            outcome.check(not written, f"{what}: wrote {written}")
        transaction.set_rollback(True)


# --- the corpus as sent in a query string or a form, where every value is text ----------------


def _reads_as_whole_number(value: str) -> bool:
    """``int()`` reads other scripts' digits too (٣٤ is 34): such a value is a number."""
    try:
        int(value)
    except ValueError:
        return False
    return True


NUMBER_STRINGS = [corpus.Nasty(n.label, str(n.value)) for n in corpus.NUMBERS]
NOT_NUMBERS = [n for n in corpus.STRINGS if not _reads_as_whole_number(n.value)]
DATE_STRINGS = [corpus.Nasty(n.label, str(n.value)) for n in corpus.DATES]
# Blank values: a parameter left out.
BLANK = {"empty", "spaces", "no-break-space", "ideographic-space", "string-empty"}
BLANK |= {"string-space", "date-empty-string"}

# What a parameter of each kind is sent, by kind.
SENT_AS_TEXT = {
    "choice": corpus.STRINGS,
    "name": corpus.STRINGS,
    "filter": corpus.STRINGS,
    "number": NUMBER_STRINGS + NOT_NUMBERS,
    # Strings with a "-" may read as a date-time's offset or range: the dates say what fails.
    "date": DATE_STRINGS
    + [n for n in corpus.STRINGS if n.kind != corpus.PRINTABLE or "-" not in n.value],
    "page": NUMBER_STRINGS + corpus.STRINGS,
}
