"""Tables for people, JSON for scripts (``--output json``: the API's objects as it answers them)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

FORMATS = ("table", "json")
EMPTY = "-"


@dataclass(frozen=True)
class Column:
    """A table column: its heading and the key (dotted for nested objects) it shows."""

    heading: str
    key: str


def columns(*pairs: tuple[str, str]) -> list[Column]:
    return [Column(heading, key) for heading, key in pairs]


def cell(value: Any) -> str:
    """A value as a table shows it: ``-`` for nothing, lists joined with commas, text on one
    line."""
    if value is None or value == "" or value == [] or value == {}:
        return EMPTY
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(cell(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return " ".join(str(value).split())


def lookup(row: dict, key: str) -> Any:
    value: Any = row
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def table(rows: Iterable[dict], cols: Sequence[Column]) -> str:
    """Rows under upper-case headings, columns as wide as their widest cell, two spaces apart;
    the last column is not padded. An empty list is the headings alone."""
    grid = [[col.heading.upper() for col in cols]]
    grid += [[cell(lookup(row, col.key)) for col in cols] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(cols))]
    lines = []
    for line in grid:
        padded = [text.ljust(width) for text, width in zip(line[:-1], widths, strict=False)]
        lines.append("  ".join([*padded, line[-1]]).rstrip())
    return "\n".join(lines) + "\n"


def record(obj: dict, cols: Sequence[Column]) -> str:
    """One object as ``Heading: value`` lines, the headings aligned."""
    width = max(len(col.heading) for col in cols)
    return "".join(
        f"{(col.heading + ':').ljust(width + 1)} {cell(lookup(obj, col.key))}\n" for col in cols
    )


def as_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def render(data: Any, *, fmt: str, cols: Sequence[Column]) -> str:
    """``data`` (one object or a list of them) in the chosen format."""
    if fmt == "json":
        return as_json(data)
    if isinstance(data, list):
        return table(data, cols)
    return record(data, cols)
