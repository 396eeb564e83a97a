"""Validators shared by every app."""

import re
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

# Kubernetes DNS-1123 label: what a namespace name (made from a team's slug) must be.
DNS1123_LABEL_MAX_LENGTH = 63
dns1123_label_validator = RegexValidator(
    regex=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z",
    message=(
        "Must be a Kubernetes DNS-1123 label: lower-case letters, digits and '-', "
        "starting and ending with a letter or digit."
    ),
    code="dns1123_label",
)

# Namespaces no team may have: Kubernetes' own, and the one the portal itself runs in.
RESERVED_NAMESPACES = ("default",)
RESERVED_NAMESPACE_PREFIXES = ("kube-",)


def validate_namespace_not_reserved(name: str) -> None:
    """A team's slug becomes its namespace: Kubernetes' own namespaces (``default``,
    ``kube-*``) and the portal's (``PORTAL_NAMESPACE``) are never a team's."""
    if name in RESERVED_NAMESPACES or name.startswith(RESERVED_NAMESPACE_PREFIXES):
        raise ValidationError(
            f"{name!r} is one of Kubernetes' own namespaces (default, kube-*); choose another.",
            code="reserved_namespace",
        )
    if name == settings.PORTAL_NAMESPACE:
        raise ValidationError(
            f"{name!r} is the namespace the portal itself runs in; choose another.",
            code="reserved_namespace",
        )


# A Kubernetes extended resource name such as nvidia.com/gpu or nvidia.com/mig-1g.10gb.
extended_resource_name_validator = RegexValidator(
    regex=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z",
    message="Must be an extended resource name like 'vendor.domain/name', e.g. nvidia.com/gpu.",
    code="extended_resource_name",
)


# --- PromQL label matchers ---------------------------------------------------------------------

LABEL_MATCHER_EXAMPLE = 'job="dcgm-exporter"'
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_MATCHER = re.compile(
    rf"({_LABEL_NAME})\s*(=~|!~|!=|=)\s*(\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')"
)
# The escapes a PromQL string may carry that a label matcher needs; others are refused rather
# than guessed at.
_SPACES = re.compile(r"\s*")
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t"}


@dataclass(frozen=True)
class LabelMatcher:
    """One PromQL label matcher: ``job="dcgm-exporter"`` is ("job", "=", "dcgm-exporter")."""

    label: str
    operator: str
    value: str

    @property
    def is_regex(self) -> bool:
        return self.operator in ("=~", "!~")


def _unquote(literal: str) -> str:
    body, value, index = literal[1:-1], [], 0
    while index < len(body):
        char = body[index]
        if char == "\\":
            escaped = body[index + 1]
            if escaped not in _ESCAPES:
                raise _invalid(
                    f"Unsupported escape \\{escaped} in {literal}: write a backslash as \\\\."
                )
            value.append(_ESCAPES[escaped])
            index += 2
        else:
            value.append(char)
            index += 1
    return "".join(value)


def _invalid(message: str) -> ValidationError:
    return ValidationError(message, code="label_matchers")


def _matcher(label: str, operator: str, literal: str) -> LabelMatcher:
    if label.startswith("__"):
        raise _invalid(
            f"{label} is one of Prometheus' own labels; match the exporter's labels "
            f"instead, e.g. {LABEL_MATCHER_EXAMPLE}."
        )
    matcher = LabelMatcher(label, operator, _unquote(literal))
    if matcher.is_regex:
        try:
            re.compile(matcher.value)
        except re.error as error:
            raise _invalid(
                f"The regular expression of {label} does not compile: {error}."
            ) from error
    return matcher


def parse_label_matchers(text: str) -> tuple[LabelMatcher, ...]:
    """A PromQL label matcher list, ``job="dcgm-exporter", namespace=~"gpu-operator|nvidia"``
    (braces optional), as matchers; empty text is no matcher. Raises ``ValidationError`` saying
    what is wrong: a bad label name or operator, an unquoted value, a regex that does not
    compile, a matcher on a label of Prometheus' own (``__name__``), or a list that names no
    value a series must have (only negative matchers pin nothing)."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    matchers: list[LabelMatcher] = []
    position = _SPACES.match(text).end()
    while position < len(text):
        found = _MATCHER.match(text, position)
        if found is None:
            raise _invalid(
                f"Not a PromQL label matcher near {text[position:][:40]!r}: write "
                'label="value" pairs (operators =, !=, =~, !~) separated by commas, e.g. '
                f"{LABEL_MATCHER_EXAMPLE}."
            )
        matchers.append(_matcher(*found.groups()))
        position = _SPACES.match(text, found.end()).end()
        if position < len(text):
            if text[position] != ",":
                raise _invalid(f"Expected a comma before {text[position:][:40]!r}.")
            position = _SPACES.match(text, position + 1).end()
    if matchers and not any(_requires_a_value(m) for m in matchers):
        raise _invalid(
            "Name a value the exporter's series carry (an = matcher, or =~ that cannot match "
            f"the empty string), e.g. {LABEL_MATCHER_EXAMPLE}: negative matchers alone let "
            "any other source through."
        )
    return tuple(matchers)


def _requires_a_value(matcher: LabelMatcher) -> bool:
    if matcher.operator == "=":
        return matcher.value != ""
    if matcher.operator == "=~":
        return re.fullmatch(matcher.value, "") is None
    return False


def validate_label_matchers(text: str) -> None:
    parse_label_matchers(text)


# How long free text may be, in the API and on the pages alike. The columns are unbounded text;
# these bound what a person would write, so that no one stores megabytes in a note.
MAX_NAME_LENGTH = 200  # a team's name (its column's length)
MAX_NOTE_LENGTH = 2_000  # a note on a decision, a revocation or an archive
MAX_TEXT_LENGTH = 10_000  # a justification, a team's description


def one_line_validator(value: str) -> None:
    """Names are shown on one line: no line breaks or tabs."""
    if any(char in value for char in "\r\n\t"):
        raise ValidationError("Give it on one line: no line breaks or tabs.", code="one_line")
