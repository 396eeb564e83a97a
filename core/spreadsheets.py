"""CSV the portal writes for people to open in a spreadsheet, made safe to open.

A spreadsheet runs a cell that begins with ``=``, ``+``, ``-`` or ``@`` as a formula, and some
treat a leading tab or carriage return the same way; a team or department name, a GPU model or
any other text a user typed could then run on the reader's machine ("CSV injection"). Every
such cell is written with a leading ``'``, which spreadsheets show as text. Plain numbers
(``-1.5``) are left as they are: they are data, not formulas.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")


def safe_cell(value: object) -> str:
    """``value`` as a CSV cell no spreadsheet runs as a formula (None: empty)."""
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_TRIGGERS) and not _PLAIN_NUMBER.fullmatch(text):
        return f"'{text}"
    return text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """The header, then one line per row, every cell made safe."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([safe_cell(cell) for cell in row] for row in rows)
    return out.getvalue()
