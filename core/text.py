"""What the portal takes as text, from a JSON body, a form or a query string alike: printable
characters, tabs and line breaks, in strings of a sane length, nested to a sane depth.

Refused: control characters (escape sequences for terminals and logs; NUL, which PostgreSQL
cannot store), format characters that hide or reorder text (bidi overrides, zero-width spaces:
"Trojan Source"), line and paragraph separators, lone surrogates (which no database or JSON
encoder takes), non-characters, and numbers too large for a float. Joiners stay, as emoji and
some scripts need them. Each field's own rules (grammar, length, range) are its own.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping

# Deeper than any body the API takes (a job's preprocessing container is three levels down).
MAX_DEPTH = 16
# Longer than any field the portal takes (an environment variable's value: 32,768 characters).
MAX_STRING_LENGTH = 65_536
ALLOWED_CONTROL = {"\t", "\n", "\r"}
# Zero-width joiners: emoji sequences and some scripts' words need them.
ALLOWED_FORMAT = {"\u200c", "\u200d"}
# Tag characters: flag emoji of regions (England, Scotland, Wales) are spelled with them.
EMOJI_TAGS = range(0xE0020, 0xE0080)


def _is_noncharacter(code: int) -> bool:
    return 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE


def text_problem(value: str) -> str | None:
    """Why ``value`` is not text the portal takes, or None."""
    if len(value) > MAX_STRING_LENGTH:
        return f"At most {MAX_STRING_LENGTH:,} characters."
    for position, char in enumerate(value):
        if char in ALLOWED_CONTROL:
            continue
        code, category = ord(char), unicodedata.category(char)
        if (
            category in ("Cc", "Cs", "Zl", "Zp")
            or (category == "Cf" and char not in ALLOWED_FORMAT and code not in EMOJI_TAGS)
            or _is_noncharacter(code)
        ):
            name = unicodedata.name(char, "a control or format character")
            return (
                f"Character {position + 1} is U+{code:04X} ({name}): only printable text, "
                "tabs and line breaks are taken."
            )
    return None


def value_problem(value, depth: int = 1) -> str | None:
    """Why a parsed value (a string, number, list or mapping, at any depth) is not one the
    portal takes, or None."""
    if depth > MAX_DEPTH:
        return f"Nested deeper than {MAX_DEPTH} levels."
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "A number too large to hold."
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = [(None, item) for item in value]
    else:
        return None
    for key, item in items:
        if isinstance(key, str) and (problem := text_problem(key)):
            return f"A key: {problem}"
        if problem := value_problem(item, depth + 1):
            return problem
    return None


def first_problem(fields) -> tuple[str | None, str] | None:
    """The first field of ``fields`` (``(name, value)`` pairs) whose name or value is not text:
    ``(name, why)``, with no name when the name itself is the problem; None when all are."""
    for key, value in fields:
        if not isinstance(key, str) or text_problem(key):
            return None, "A field's name is not text."
        if problem := value_problem(value):
            return key, problem
    return None
