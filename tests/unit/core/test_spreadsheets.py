"""Every CSV the portal writes is safe to open in a spreadsheet: no cell runs as a formula."""

import csv
import io

import pytest

from core.spreadsheets import csv_text, safe_cell


@pytest.mark.parametrize(
    ("typed", "written"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("vision", "vision"),
        ("a=b", "a=b"),
    ],
)
def test_a_formula_trigger_at_the_start_of_a_cell_is_escaped(typed, written):
    assert safe_cell(typed) == written


@pytest.mark.parametrize("number", ["-1.5", "+2", "-3", "12.000", 7, -7])
def test_plain_numbers_stay_numbers(number):
    assert safe_cell(number) == str(number)


def test_every_cell_of_every_row_is_made_safe():
    text = csv_text(["team", "hours"], [["=cmd()", "-1.5"], [None, "@x"]])

    assert list(csv.reader(io.StringIO(text))) == [
        ["team", "hours"],
        ["'=cmd()", "-1.5"],
        ["", "'@x"],
    ]
