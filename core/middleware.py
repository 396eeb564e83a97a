"""Middleware of the portal's own."""

from urllib.parse import unquote, unquote_to_bytes

from django.http import HttpResponseBadRequest, HttpResponseNotFound, JsonResponse

from core.text import first_problem, text_problem

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# A query parameter is a filter, a date, a number or a name: none is longer than this.
MAX_QUERY_VALUE_LENGTH = 1_000


def _not_utf8(query_string: str) -> tuple[str, str] | None:
    """Django reads bytes that are not UTF-8 as U+FFFD: a parameter whose bytes were not text
    would filter by replacement characters. (A WSGI string holds the raw bytes as Latin-1.)"""
    for pair in query_string.split("&"):
        key, _, value = pair.partition("=")
        try:
            unquote_to_bytes(value.encode("latin-1")).decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return unquote(key), "Not UTF-8 text."
    return None


def _overlong(query) -> tuple[str, str] | None:
    for key in query:
        if any(len(value) > MAX_QUERY_VALUE_LENGTH for value in query.getlist(key)):
            return key, f"At most {MAX_QUERY_VALUE_LENGTH:,} characters."
    return None


class RefuseUntextualInput:
    """Query strings, and the forms pages post, hold only text (``core.text``): otherwise a
    400 naming the parameter, before any view, filter or form sees it (a NUL in a filter would
    reach PostgreSQL, which cannot take it). A path that is not text is a 404. JSON under
    /api/; plain text elsewhere. The API's bodies are checked by its parsers
    (``core.parsers``)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        api = request.path.startswith("/api/")
        if text_problem(request.path_info):
            # No slug, name or id holds a control character: nothing is there to find (and a
            # NUL would reach PostgreSQL, which cannot compare it).
            if api:
                return JsonResponse({"detail": "Not found."}, status=404)
            return HttpResponseNotFound("Not found.", content_type="text/plain")
        problem = first_problem((k, request.GET.getlist(k)) for k in request.GET)
        if problem is None:
            problem = _overlong(request.GET) or _not_utf8(request.META.get("QUERY_STRING", ""))
        if problem is None and not api and request.content_type in FORM_TYPES:
            problem = first_problem((k, request.POST.getlist(k)) for k in request.POST)
        if problem is None:
            return self.get_response(request)
        name, why = problem
        if api:
            return JsonResponse({name or "non_field_errors": [why]}, status=400)
        return HttpResponseBadRequest(f"{name or 'A parameter'}: {why}", content_type="text/plain")
