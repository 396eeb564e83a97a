"""Chargeback arithmetic: pure functions, no I/O.

Figures come from the usage report (``monitoring.usage``): granted GPU-hours from the grants,
held, used and idle GPU-hours from Prometheus. Here they get prices:

* a MIG slice counts as its share of a GPU (``monitoring.gpu_shares``, the one table of it):
  ``nvidia.com/mig-3g.40gb`` is 3 of the 7 compute slices of an A100/H100-class GPU (4 on an
  A30), so an hour of it is 3/7 of a GPU-hour; a replica of a shared GPU
  (``nvidia.com/gpu.shared``, model ``<model>-SHARED``) is 1/replicas of its base model's GPU
  (the replicas the capacity sync read from the nodes, ``GpuModelCapacity.replicas``);
* granted hours are priced grant by grant (its model's price, its share of a GPU, and the CPU
  cores and memory it came with);
* held, used and idle hours, which Prometheus counts per namespace (already as GPU
  equivalents: a slice or a replica as its share) and not per model, are shared among the
  team's grants on the cluster in proportion to their granted GPU-equivalent hours in the
  period (with no grant, at the price of no model in particular);
* a month is priced at the prices in force on its first day (prices start on a month's first
  day, so there is only ever one).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from monitoring.gpu_shares import base_model, gpu_share, is_shared
from monitoring.reports import GrantSpan, Period, UsageRow, granted_gpu_hours

CENT = Decimal("0.01")


def mig_fraction(gpu_resource: str, gpu_model: str = "", replicas: int = 1) -> Fraction:
    """The share of a whole GPU one unit of the resource is (``monitoring.gpu_shares``): 1 for
    a GPU, the slice's compute slices over the GPU's for a MIG profile
    (``nvidia.com/mig-1g.10gb`` on an H100: 1/7), 1/replicas for a replica of a shared GPU."""
    return gpu_share(gpu_resource, gpu_model, replicas)


@dataclass(frozen=True)
class PriceRow:
    gpu_model: str
    effective_from: datetime.date
    gpu_hour: Decimal
    cpu_core_hour: Decimal = Decimal(0)
    memory_gib_hour: Decimal = Decimal(0)


ZERO_PRICE = PriceRow("", datetime.date.min, Decimal(0))


class PriceBook:
    """Every price row, answering which one is in force for a model on a day; with the replicas
    each shared model's GPUs are split into (model -> replicas), what a shared grant is worth."""

    def __init__(self, rows: Iterable[PriceRow], replicas: Mapping[str, int] | None = None):
        self._replicas = dict(replicas or {})
        self._by_model: dict[str, list[PriceRow]] = {}
        for row in sorted(rows, key=lambda r: r.effective_from, reverse=True):
            self._by_model.setdefault(row.gpu_model, []).append(row)
        self._memo: dict[tuple[str, datetime.date], PriceRow] = {}
        self._rates: dict[tuple[str, str, datetime.date], tuple[int, int, PriceRow]] = {}

    def _latest(self, model: str, on: datetime.date) -> PriceRow | None:
        return next((r for r in self._by_model.get(model, ()) if r.effective_from <= on), None)

    def in_force(self, gpu_model: str, on: datetime.date) -> PriceRow:
        """The model's own price on that day, else the any-model price, else zero."""
        key = (gpu_model, on)
        if key not in self._memo:
            self._memo[key] = (
                (self._latest(gpu_model, on) if gpu_model else None)
                or self._latest("", on)
                or ZERO_PRICE
            )
        return self._memo[key]

    def rate(
        self, gpu_resource: str, gpu_model: str, on: datetime.date, replicas: int = 1
    ) -> tuple[int, int, PriceRow]:
        """A grant's share of a GPU (numerator, denominator) and the price in force on that
        day (a shared GPU's base model's), worked out once per kind of grant and day: what
        pricing reads for every grant and month."""
        key = (gpu_resource, gpu_model, on, replicas)
        rate = self._rates.get(key)
        if rate is None:
            fraction = self.share(gpu_resource, gpu_model, replicas)
            model = base_model(gpu_model) if is_shared(gpu_resource) else gpu_model
            rate = self._rates[key] = (
                fraction.numerator,
                fraction.denominator,
                self.in_force(model, on),
            )
        return rate

    def share(self, gpu_resource: str, gpu_model: str, replicas: int = 1) -> Fraction:
        """The share of a GPU one unit of a grant's kind is: a shared grant's own ``replicas``
        (``GrantSpan.replicas``, its cluster's) when known, else the book's for its model."""
        if replicas <= 1:
            replicas = self._replicas.get(gpu_model, 1)
        return mig_fraction(gpu_resource, gpu_model, replicas)


def money(value: Decimal | float) -> Decimal:
    return Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


def _decimal(hours: float) -> Decimal:
    return Decimal(repr(hours))


@dataclass(slots=True)
class Costing:
    """One team's figures on one cluster in one period, in GPU-hours and money."""

    granted_gpu_hours: float = 0.0
    reserved_gpu_hours: float = 0.0  # granted, slices and replicas as their share of a GPU
    held_gpu_hours: float | None = None  # as the usage report measures them (GPU equivalents)
    held_gpu_equivalent_hours: float | None = None  # the same: kept for the CSV's column
    used_gpu_hours: float | None = None
    idle_gpu_hours: float | None = None
    held_by_model: dict[str, float] = dataclasses.field(default_factory=dict)
    reserved_cost: Decimal = Decimal(0)
    used_cost: Decimal = Decimal(0)
    idle_cost: Decimal = Decimal(0)

    def add(self, other: Costing) -> None:
        """Sum ``other`` into this one (a department's total, a team's clusters); hours
        Prometheus could not say stay unknown only while every part's are."""
        self.add_all((other,))

    def add_all(self, parts: Iterable[Costing]) -> None:
        """``add`` each of the parts in turn, the sums kept in locals meanwhile (a department's
        month sums hundreds of lines)."""
        granted, reserved = self.granted_gpu_hours, self.reserved_gpu_hours
        held, equivalent = self.held_gpu_hours, self.held_gpu_equivalent_hours
        used, idle = self.used_gpu_hours, self.idle_gpu_hours
        reserved_cost, used_cost, idle_cost = self.reserved_cost, self.used_cost, self.idle_cost
        by_model = self.held_by_model
        for part in parts:
            granted += part.granted_gpu_hours
            reserved += part.reserved_gpu_hours
            if part.held_gpu_hours is not None:
                held = (held or 0.0) + part.held_gpu_hours
            if part.held_gpu_equivalent_hours is not None:
                equivalent = (equivalent or 0.0) + part.held_gpu_equivalent_hours
            if part.used_gpu_hours is not None:
                used = (used or 0.0) + part.used_gpu_hours
            if part.idle_gpu_hours is not None:
                idle = (idle or 0.0) + part.idle_gpu_hours
            for model, hours in part.held_by_model.items():
                by_model[model] = by_model.get(model, 0.0) + hours
            reserved_cost += part.reserved_cost
            used_cost += part.used_cost
            idle_cost += part.idle_cost
        self.granted_gpu_hours, self.reserved_gpu_hours = granted, reserved
        self.held_gpu_hours, self.held_gpu_equivalent_hours = held, equivalent
        self.used_gpu_hours, self.idle_gpu_hours = used, idle
        self.reserved_cost, self.used_cost, self.idle_cost = reserved_cost, used_cost, idle_cost

    @property
    def idle_share_percent(self) -> float | None:
        if not self.held_gpu_hours or self.idle_gpu_hours is None:
            return None
        return 100 * self.idle_gpu_hours / self.held_gpu_hours


def in_force_hours(grant: GrantSpan, period: Period, *, now, tz) -> float:
    """Hours the grant was in force within the period (what its CPU and memory are priced by)."""
    whole = dataclasses.replace(grant, gpus=1, resized=())
    return granted_gpu_hours([whole], period, now=now, tz=tz)


def costing(
    *,
    grant_hours: Sequence[tuple[GrantSpan, float]],
    period: Period,
    held: float | None,
    used: float | None,
    idle: float | None,
    prices: PriceBook,
    now: datetime.datetime,
    tz: datetime.tzinfo,
) -> Costing:
    """Price one team's grants on one cluster in one period, each with the GPU-hours it was
    granted there (``UsageRow.grant_hours``), and the hours measured."""
    on = period.start.date()
    rate = prices.rate
    granted = reserved = 0.0
    cost = Decimal(0)
    for grant, hours in grant_hours:
        if hours <= 0:
            continue
        numerator, denominator, price = rate(
            grant.gpu_resource, grant.gpu_model, on, grant.replicas
        )
        equivalent = hours if numerator == denominator else hours * numerator / denominator
        granted += hours
        reserved += equivalent
        cost += Decimal(repr(equivalent)) * price.gpu_hour
        if grant.cpu_cores or grant.memory_gib:
            # Never shrunk, the grant was in force its GPU-hours over its GPUs.
            in_force = (
                in_force_hours(grant, period, now=now, tz=tz)
                if grant.resized
                else hours / grant.gpus
            )
            if grant.cpu_cores:
                cost += _decimal(grant.cpu_cores * in_force) * price.cpu_core_hour
            if grant.memory_gib:
                cost += _decimal(grant.memory_gib * in_force) * price.memory_gib_hour
    result = Costing(
        granted_gpu_hours=granted,
        reserved_gpu_hours=reserved,
        held_gpu_hours=held,
        used_gpu_hours=used,
        idle_gpu_hours=idle,
        reserved_cost=cost,
    )
    if held is None:
        return result
    shares = [
        (grant, hours * float(prices.share(grant.gpu_resource, grant.gpu_model, grant.replicas)))
        for grant, hours in grant_hours
        if hours > 0
    ]
    unit_price = _held_unit(shares, prices=prices, on=on)
    result.held_gpu_equivalent_hours = held
    result.used_cost = _decimal(held) * unit_price
    result.idle_cost = _decimal(idle or 0.0) * unit_price
    result.held_by_model = held_by_model(held, shares)
    return result


def _held_unit(
    shares: Sequence[tuple[GrantSpan, float]], *, prices: PriceBook, on: datetime.date
) -> Decimal:
    """The price of one measured GPU-equivalent hour: the grants' GPU-hour prices (a shared
    grant's base model's), averaged by their granted GPU-equivalent hours (no grants: the
    any-model price)."""
    total = sum(hours for _, hours in shares)
    if not total:
        return prices.in_force("", on).gpu_hour
    price = Decimal(0)
    for grant, hours in shares:
        *_, row = prices.rate(grant.gpu_resource, grant.gpu_model, on, grant.replicas)
        price += _decimal(hours / total) * row.gpu_hour
    return price


def held_by_model(held: float, shares: Sequence[tuple[GrantSpan, float]]) -> dict[str, float]:
    """Held GPU-equivalent hours per GPU model, shared among the grants by their granted
    GPU-equivalent hours (``shares``); with no grants all under "" (no model in particular)."""
    total = sum(hours for _, hours in shares)
    if not total:
        return {"": held}
    by_model: dict[str, float] = {}
    for grant, hours in shares:
        by_model[grant.gpu_model] = by_model.get(grant.gpu_model, 0.0) + held * hours / total
    return by_model


NO_PRICES = PriceBook(())


def budget_gpu_hours(
    row: UsageRow, gpu_model: str, *, now: datetime.datetime, tz: datetime.tzinfo
) -> float:
    """What a budget of ``gpu_model`` (empty: of every model) counts of a usage row's held
    hours, which must be known: GPU equivalents (a MIG slice or a shared GPU's replica as its
    share of a GPU), shared to that model's grants when it names one."""
    measured = costing(
        grant_hours=row.grant_hours,
        period=row.period,
        held=row.held_gpu_hours,
        used=row.used_gpu_hours,
        idle=None,
        prices=NO_PRICES,
        now=now,
        tz=tz,
    )
    if gpu_model:
        return measured.held_by_model.get(gpu_model, 0.0)
    return measured.held_gpu_equivalent_hours or 0.0
