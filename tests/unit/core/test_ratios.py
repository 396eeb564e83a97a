"""Percentages of a whole: unknown parts and an empty whole have none."""

import pytest

from core.ratios import percent_of


@pytest.mark.parametrize(
    ("part", "whole", "percent"),
    [(3, 12, 25.0), (0, 5, 0.0), (6, 4, 150.0), (None, 5, None), (2, 0, None), (2, None, None)],
)
def test_a_part_of_a_whole_in_percent(part, whole, percent):
    assert percent_of(part, whole) == percent
