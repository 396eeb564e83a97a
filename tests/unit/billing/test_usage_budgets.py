"""The budget columns billing gives the usage CSV, without a database: which budget a team
shows and what a period spent of it."""

import datetime

import pytest

from billing.usage_budgets import budget_figures_of, team_budgets
from monitoring.reports import GrantSpan, Period, UsageRow

UTC = datetime.UTC
JANUARY = Period(
    datetime.datetime(2026, 1, 1, tzinfo=UTC), datetime.datetime(2026, 2, 1, tzinfo=UTC)
)
NOW = datetime.datetime(2026, 3, 1, tzinfo=UTC)


def grant(resource="nvidia.com/gpu", model="H100"):
    return GrantSpan(1, 1, 1, datetime.date(2026, 1, 1), None, None, (), resource, model)


def test_a_team_shows_its_monthly_budget_of_every_model_first():
    chosen = team_budgets(
        [
            ("vision", "quarter", "", 900),
            ("vision", "month", "H100", 50),
            ("vision", "month", "", 300),
            ("speech", "quarter", "A100", 10),
        ]
    )
    assert chosen == {"vision": ("", 300.0), "speech": ("A100", 10.0)}


def test_spent_is_the_held_gpu_equivalents_of_every_cluster_and_empty_when_unknown():
    whole, slice_ = grant(), grant("nvidia.com/mig-1g.10gb", "A100")
    both = {"grants": (whole, slice_), "hours_by_grant": (10, 10)}
    rows = [
        # Prometheus measures GPU equivalents (a 1/7 slice held 35 hours is 5): 35 hours of
        # the whole H100 and 5 of the slice are 40, whatever the grants.
        UsageRow("vision", "Vision", "east", JANUARY, 20, 40.0, 7.0, **both),
        UsageRow("vision", "Vision", "west", JANUARY, 0, None, None),  # Prometheus down
        UsageRow("speech", "Speech", "east", JANUARY, 0, None, None),
        UsageRow("audio", "Audio", "east", JANUARY, 0, 5.0, 1.0),  # no budget
    ]  # fmt: skip
    figures = budget_figures_of(rows, {"vision": ("", 300.0), "speech": ("", 10.0)}, now=NOW)
    assert figures[("vision", JANUARY.start)] == pytest.approx((300.0, 40.0))
    assert figures[("speech", JANUARY.start)] == (10.0, None)
    assert ("audio", JANUARY.start) not in figures


def test_a_budget_of_one_model_counts_that_models_share_only():
    rows = [
        UsageRow("vision", "Vision", "east", JANUARY, 20, 70.0, 7.0,
                 grants=(grant(), grant(model="A100")), hours_by_grant=(10, 10)),
    ]  # fmt: skip
    figures = budget_figures_of(rows, {"vision": ("A100", 100.0)}, now=NOW)
    assert figures[("vision", JANUARY.start)] == pytest.approx((100.0, 35.0))


def test_spent_of_a_shared_models_budget_weighs_the_shared_grant_by_its_replicas():
    """Eight replicas of an A100 shared four ways are two GPUs: beside two whole H100s, a
    budget of the shared model gets half the held hours (not eight tenths)."""
    shared = GrantSpan(
        1, 1, 8, datetime.date(2026, 1, 1), None, None, (),
        "nvidia.com/gpu.shared", "A100-SHARED", replicas=4,
    )  # fmt: skip
    whole = GrantSpan(1, 1, 2, datetime.date(2026, 1, 1), None, None, (), "nvidia.com/gpu", "H100")
    rows = [
        UsageRow("vision", "Vision", "east", JANUARY, 40, 60.0, 7.0,
                 grants=(shared, whole), hours_by_grant=(80, 20)),
    ]  # fmt: skip
    figures = budget_figures_of(rows, {"vision": ("A100-SHARED", 100.0)}, now=NOW)
    assert figures[("vision", JANUARY.start)] == pytest.approx((100.0, 30.0))
