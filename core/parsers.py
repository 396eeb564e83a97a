"""The API's request parsers: DRF's, refusing a body whose strings are not text (``core.text``)
with a 400 naming the top-level field that holds them, before any serializer sees it, so that no
endpoint can forget."""

from __future__ import annotations

from collections.abc import Mapping

from django.http import QueryDict
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.settings import api_settings

from core.text import MAX_DEPTH, first_problem


def check_text(data) -> None:
    if isinstance(data, QueryDict):
        fields = [(key, data.getlist(key)) for key in data]
    elif isinstance(data, Mapping):
        fields = list(data.items())
    else:
        fields = [(api_settings.NON_FIELD_ERRORS_KEY, data)]
    if problem := first_problem(fields):
        name, why = problem
        raise ValidationError({name or api_settings.NON_FIELD_ERRORS_KEY: [why]})


class TextJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels.") from None
        check_text(data)
        return data


class TextFormParser(FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        check_text(data)
        return data


class TextMultiPartParser(MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):
        result = super().parse(stream, media_type, parser_context)
        # Django reads a body without a single boundary as no parts: it is not a form.
        if not result.data and not result.files:
            raise ParseError("Multipart form parse error - no parts in the body.")
        check_text(result.data)
        return result
