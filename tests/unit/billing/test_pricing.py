"""Chargeback arithmetic, without a database: MIG shares, prices in force, and what a team's
grants and measured hours cost."""

import datetime
from decimal import Decimal
from fractions import Fraction

import pytest

from billing import pricing
from billing.pricing import PriceBook, PriceRow, mig_fraction
from monitoring.reports import GrantSpan, Period, UsageRow, granted_gpu_hours

UTC = datetime.UTC
NOVEMBER = Period(
    datetime.datetime(2026, 11, 1, tzinfo=UTC), datetime.datetime(2026, 12, 1, tzinfo=UTC)
)
HOURS = 30 * 24
NOW = datetime.datetime(2026, 12, 15, tzinfo=UTC)


def grant(gpus=2, resource="nvidia.com/gpu", model="H100", cpu=None, memory=None, **kwargs):
    return GrantSpan(
        team_id=1,
        cluster_id=1,
        gpus=gpus,
        starts_on=kwargs.get("starts_on", datetime.date(2026, 10, 1)),
        ends_on=kwargs.get("ends_on"),
        ended_at=None,
        gpu_resource=resource,
        gpu_model=model,
        cpu_cores=cpu,
        memory_gib=memory,
    )


def costing(*, grants, period, now, tz, **measured):
    """``pricing.costing`` of the grants with their hours as the usage report gives them."""
    hours = [(g, granted_gpu_hours([g], period, now=now, tz=tz)) for g in grants]
    return pricing.costing(grant_hours=hours, period=period, now=now, tz=tz, **measured)


BOOK_ROWS = (
        PriceRow("", datetime.date(2026, 1, 1), Decimal("1.0000")),
        PriceRow(
            "H100", datetime.date(2026, 1, 1), Decimal("2.5"), Decimal("0.01"), Decimal("0.002")
        ),
        PriceRow("H100", datetime.date(2026, 11, 1), Decimal("3.0000")),
        PriceRow("A100", datetime.date(2026, 1, 1), Decimal("1.4000")),
)  # fmt: skip
BOOK = PriceBook(BOOK_ROWS)


@pytest.mark.parametrize(
    ("resource", "model", "share"),
    [
        ("nvidia.com/gpu", "H100", Fraction(1)),
        ("nvidia.com/mig-1g.10gb", "NVIDIA-H100-80GB-HBM3", Fraction(1, 7)),
        ("nvidia.com/mig-3g.40gb", "A100", Fraction(3, 7)),
        ("nvidia.com/mig-7g.80gb", "H100", Fraction(1)),
        ("nvidia.com/mig-2g.12gb", "NVIDIA-A30", Fraction(2, 4)),
        ("amd.com/gpu", "MI300X", Fraction(1)),
    ],
)
def test_a_mig_slice_is_its_share_of_a_gpu(resource, model, share):
    assert mig_fraction(resource, model) == share


def test_the_price_in_force_is_the_models_latest_then_any_models():
    assert BOOK.in_force("H100", datetime.date(2026, 10, 1)).gpu_hour == Decimal("2.5")
    assert BOOK.in_force("H100", datetime.date(2026, 11, 1)).gpu_hour == Decimal("3")
    assert BOOK.in_force("L4", datetime.date(2026, 11, 1)).gpu_hour == Decimal("1")
    assert BOOK.in_force("", datetime.date(2025, 11, 1)).gpu_hour == Decimal("0")


def test_reserved_cost_is_granted_gpu_hours_times_the_models_price_plus_cpu_and_memory():
    result = costing(
        grants=[grant(gpus=2, model="A100", cpu=8.0, memory=64)],
        period=NOVEMBER, held=None, used=None, idle=None, prices=BOOK, now=NOW, tz=UTC,
    )  # fmt: skip

    assert result.granted_gpu_hours == pytest.approx(2 * HOURS)
    # A100 has no CPU or memory price of its own: the GPU-hour's row says 0 for them.
    assert result.reserved_cost == Decimal("1.4") * 2 * HOURS
    assert result.held_gpu_hours is None
    assert result.used_cost == 0


def test_cpu_and_memory_come_at_the_prices_of_the_grants_model():
    result = costing(
        grants=[grant(gpus=1, model="H100", cpu=4.0, memory=10)],
        period=Period(NOVEMBER.start.replace(month=10), NOVEMBER.start),
        held=None, used=None, idle=None, prices=BOOK, now=NOW, tz=UTC,
    )  # fmt: skip

    hours = 31 * 24
    expected = Decimal("2.5") * hours + Decimal("0.01") * 4 * hours + Decimal("0.002") * 10 * hours
    assert result.reserved_cost == expected


def test_a_mig_grant_reserves_and_holds_its_share_of_a_gpu():
    result = costing(
        grants=[grant(gpus=7, resource="nvidia.com/mig-1g.10gb", model="H100")],
        # Prometheus measures GPU equivalents: 70 slice-hours are 10 GPU-hours.
        period=NOVEMBER, held=10.0, used=5.0, idle=2.0, prices=BOOK, now=NOW, tz=UTC,
    )  # fmt: skip

    assert result.granted_gpu_hours == pytest.approx(7 * HOURS)
    assert result.reserved_gpu_hours == pytest.approx(HOURS)  # seven 1/7 slices: one GPU
    assert result.reserved_cost == pytest.approx(Decimal(3) * HOURS, abs=Decimal("0.0001"))
    assert result.held_gpu_equivalent_hours == pytest.approx(10)
    assert result.used_cost == pytest.approx(Decimal(30), abs=Decimal("0.0001"))
    assert result.idle_cost == pytest.approx(Decimal(6), abs=Decimal("0.0001"))
    assert result.idle_share_percent == pytest.approx(20)
    assert result.held_by_model == {"H100": pytest.approx(10)}


def test_held_hours_are_shared_among_the_grants_by_their_granted_hours():
    result = costing(
        grants=[grant(gpus=3, model="H100"), grant(gpus=1, model="A100")],
        period=NOVEMBER, held=100.0, used=50.0, idle=0.0, prices=BOOK, now=NOW, tz=UTC,
    )  # fmt: skip

    assert result.held_by_model == {"H100": pytest.approx(75), "A100": pytest.approx(25)}
    assert float(result.used_cost) == pytest.approx(75 * 3.0 + 25 * 1.4)


def test_held_hours_without_a_grant_cost_the_any_model_price():
    result = costing(
        grants=[], period=NOVEMBER, held=10.0, used=1.0, idle=5.0, prices=BOOK, now=NOW, tz=UTC
    )

    assert result.used_cost == Decimal(10)
    assert result.held_by_model == {"": 10.0}


def test_a_grant_only_counts_the_hours_it_was_in_force_and_never_the_future():
    now = datetime.datetime(2026, 11, 11, tzinfo=UTC)
    result = costing(
        grants=[grant(gpus=1, model="H100", starts_on=datetime.date(2026, 11, 6))],
        period=NOVEMBER, held=None, used=None, idle=None, prices=BOOK, now=now, tz=UTC,
    )  # fmt: skip

    assert result.granted_gpu_hours == pytest.approx(5 * 24)


def test_costings_add_up_and_keep_unknown_hours_unknown():
    total = pricing.Costing()
    total.add(pricing.Costing(granted_gpu_hours=1, held_gpu_hours=None, reserved_cost=Decimal(2)))
    total.add(pricing.Costing(granted_gpu_hours=2, held_gpu_hours=3.0, used_cost=Decimal(1)))

    assert total.granted_gpu_hours == 3
    assert total.held_gpu_hours == 3.0
    assert total.used_gpu_hours is None
    assert (total.reserved_cost, total.used_cost) == (Decimal(2), Decimal(1))


def test_a_shared_gpu_replica_is_one_over_replicas_of_its_base_models_price():
    book = PriceBook(BOOK_ROWS, replicas={"H100-SHARED": 4})
    result = costing(
        grants=[grant(gpus=8, resource="nvidia.com/gpu.shared", model="H100-SHARED")],
        period=NOVEMBER, held=2.0, used=1.0, idle=0.5, prices=book, now=NOW, tz=UTC,
    )  # fmt: skip

    assert result.reserved_gpu_hours == pytest.approx(2 * HOURS)  # eight quarters: two GPUs
    assert result.reserved_cost == pytest.approx(Decimal(3) * 2 * HOURS, abs=Decimal("0.0001"))
    assert result.used_cost == pytest.approx(Decimal(6), abs=Decimal("0.0001"))
    assert result.held_by_model == {"H100-SHARED": pytest.approx(2)}


def test_a_statement_month_prices_slices_and_replicas_beside_whole_gpus():
    book = PriceBook(BOOK_ROWS, replicas={"A100-SHARED": 2})
    result = costing(
        grants=[
            grant(gpus=1, model="H100"),
            grant(gpus=7, resource="nvidia.com/mig-1g.10gb", model="A100"),
            grant(gpus=2, resource="nvidia.com/gpu.shared", model="A100-SHARED"),
        ],
        period=NOVEMBER, held=None, used=None, idle=None, prices=book, now=NOW, tz=UTC,
    )  # fmt: skip

    assert result.granted_gpu_hours == pytest.approx(10 * HOURS)
    assert result.reserved_gpu_hours == pytest.approx(3 * HOURS)
    expected = (Decimal(3) + Decimal("1.4") + Decimal("1.4")) * HOURS
    assert result.reserved_cost == pytest.approx(expected, abs=Decimal("0.0001"))


def test_without_known_replicas_a_shared_gpu_counts_whole():
    assert mig_fraction("nvidia.com/gpu.shared", "A100-SHARED") == 1
    assert mig_fraction("nvidia.com/gpu.shared", "A100-SHARED", 4) == Fraction(1, 4)


def shared_grant(gpus, *, replicas, model="H100-SHARED"):
    shared = grant(gpus=gpus, resource="nvidia.com/gpu.shared", model=model)
    return GrantSpan(**{**_fields(shared), "replicas": replicas})


def _fields(span):
    return {name: getattr(span, name) for name in span.__dataclass_fields__}


def test_a_shared_grant_is_priced_by_its_own_clusters_replicas_before_the_books():
    book = PriceBook(BOOK_ROWS, replicas={"H100-SHARED": 2})
    result = costing(
        grants=[shared_grant(8, replicas=4)],
        period=NOVEMBER, held=None, used=None, idle=None, prices=book, now=NOW, tz=UTC,
    )  # fmt: skip

    assert result.reserved_gpu_hours == pytest.approx(2 * HOURS)  # 8 quarters, not 8 halves


def test_a_budget_of_one_model_splits_held_hours_by_a_shared_grants_replicas():
    """One whole H100 and four replicas of an H100 shared four ways are one GPU each: the held
    hours split half and half, not one to four."""
    grants = [grant(gpus=1, model="H100"), shared_grant(4, replicas=4)]
    hours = [(g, granted_gpu_hours([g], NOVEMBER, now=NOW, tz=UTC)) for g in grants]
    row = UsageRow(
        "vision", "Vision", "east", NOVEMBER, 2.0 * HOURS, 100.0, 50.0,
        grants=tuple(g for g, _ in hours), hours_by_grant=tuple(h for _, h in hours),
    )  # fmt: skip

    whole = pricing.budget_gpu_hours(row, "H100", now=NOW, tz=UTC)
    shared = pricing.budget_gpu_hours(row, "H100-SHARED", now=NOW, tz=UTC)

    assert (whole, shared) == (pytest.approx(50.0), pytest.approx(50.0))
    assert pricing.budget_gpu_hours(row, "", now=NOW, tz=UTC) == pytest.approx(100.0)
