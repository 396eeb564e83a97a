"""Shares of a whole, as the figures pages and the API show them."""

from __future__ import annotations


def percent_of(part: float | None, whole: float | None) -> float | None:
    """``part`` as a percentage of ``whole``; None when either is unknown or the whole is 0
    (no share of nothing)."""
    if not whole or part is None:
        return None
    return 100 * part / whole
