"""Numbers and page numbers from query strings, checked against their range: a value out of it
is the client's mistake, answered 400 naming the parameter (the API) or a 400 page (the pages),
never quietly replaced by a default and never passed on to the database."""

import re

from django.core.exceptions import BadRequest
from django.core.paginator import EmptyPage, Page, Paginator
from django.http import Http404

# PostgreSQL's bigint: the largest id or count a query may carry.
BIGINT_MAX = 2**63 - 1
_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,20}")


def whole_number(raw: str, *, low: int, high: int) -> int:
    """``raw`` as an integer from ``low`` to ``high``; ``ValueError`` with the sentence to show."""
    message = f"Must be a whole number from {low} to {high}."
    # ASCII digits only: int() would also take "1_000", "٣" and other spellings no client means.
    if not _WHOLE_NUMBER.fullmatch(raw.strip()):
        raise ValueError(message)
    value = int(raw)
    if not low <= value <= high:
        raise ValueError(message)
    return value


def page_number(raw: str | None) -> int:
    """The page asked for: 1 when not given, else a whole number from 1 (a page past the end
    is no input error: it is a page that does not exist, a 404)."""
    if raw in (None, ""):
        return 1
    return whole_number(raw, low=1, high=BIGINT_MAX)


def page_of(request, rows, per_page: int) -> Page:
    """The page of ``rows`` that ``?page=`` names, for a page of the portal: ``BadRequest``
    (400) for a page number out of range, 404 for a page past the end."""
    try:
        number = page_number(request.GET.get("page"))
    except ValueError as error:
        raise BadRequest(f"page: {error}") from None
    try:
        return Paginator(rows, per_page).page(number)
    except EmptyPage:
        raise Http404(f"There is no page {number}.") from None
