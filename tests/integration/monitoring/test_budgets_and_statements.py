"""Budgets and chargeback statements against backfilled DCGM history on the devcluster.

A day of history for 16 GPUs in two namespaces (two teams, a pod of every four idle), one sample
a minute, as the usage report's own test backfills it. The budget's burn-down and the budget
check must find the GPU-hours the backfill held in the budget's period; the statement's held,
idle and used figures must be the usage report's, times the prices (a MIG slice at its share).
Every call is made "as of" the backfill's last sample, so the figures do not move while the test
runs. The series are deleted again afterwards."""

import csv
import datetime
import io
import time
import uuid
from decimal import Decimal

import pytest
from django.utils import timezone

from billing import budget_checks, periods
from billing.budgets import budget_set
from billing.burn_down import budget_burn_down
from billing.enforcement import budget_refusal
from billing.prices import price_set
from billing.statements import monthly_statement
from devcluster.backfill import BackfillSpec
from monitoring.models import Notification
from monitoring.usage import teams_usage_report
from tenants.models import Membership, Team
from tests import factories

from .pages import member_of
from .workloads import backfill_history, delete_series

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

UTC = datetime.UTC
H100 = "NVIDIA-H100-80GB-HBM3"


@pytest.fixture(scope="module")
def backfilled(devcluster):
    suffix = uuid.uuid4().hex[:8]
    spec = BackfillSpec(
        days=1,
        gpus=16,
        gpus_per_pod=2,
        namespaces=(f"budget-a-{suffix}", f"budget-b-{suffix}"),
        # On a minute: the usage report samples at whole minutes, so each sample counts once.
        end=(int(time.time()) - 600) // 60 * 60,
        node_prefix=f"budget-node-{suffix}",
    )
    selector = f'DCGM_FI_DEV_GPU_UTIL{{namespace=~"budget-.-{suffix}"}}'
    backfill_history(
        devcluster,
        spec,
        selector,
        forget_from=spec.start_timestamp - 100 * 86400,
        forget_to=spec.end_timestamp,
    )
    yield spec
    delete_series(devcluster, selector)


def at(timestamp: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(timestamp, UTC)


def midnight(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time(), tzinfo=timezone.get_current_timezone())


def expected_hours(spec, namespace, *, since: datetime.datetime, idle_under=None) -> float:
    """GPU-hours the backfill held in (since, end], or held under the idle threshold."""
    samples = sum(
        1
        for gpu in spec.gpu_list()
        if gpu.namespace == namespace
        for t in spec.timestamps()
        if t > since.timestamp() and (idle_under is None or spec.utilisation(gpu, t) < idle_under)
    )
    return samples * spec.step_seconds / 3600


def budget_period(spec) -> str:
    """A period that holds the whole backfill when one does (a quarter usually does), so that
    the budget has spent a day of it; otherwise the month."""
    start = at(spec.start_timestamp).date()
    end = at(spec.end_timestamp).date()
    for kind in (periods.MONTH, periods.QUARTER):
        if periods.period_start(kind, start) == periods.period_start(kind, end):
            return kind
    return periods.MONTH


@pytest.fixture
def teams(backfilled, metrics_cluster, admin):
    team_a = factories.TeamFactory(slug=backfilled.namespaces[0], name="Budget A")
    team_b = factories.TeamFactory(slug=backfilled.namespaces[1], name="Budget B")
    since = at(backfilled.start_timestamp).date() - datetime.timedelta(days=100)
    factories.QuotaGrantFactory(
        request__team=team_a,
        request__cluster=metrics_cluster,
        request__gpus=8,
        request__starts_on=since,
        request__ends_on=None,
        granted_by=admin,
    )
    # Team B holds MIG slices of an H100: a slice-hour costs a seventh of a GPU-hour.
    factories.QuotaGrantFactory(
        request__team=team_b,
        request__cluster=metrics_cluster,
        request__gpu_resource="nvidia.com/mig-1g.10gb",
        request__gpu_model=H100,
        request__gpus=8,
        request__starts_on=since,
        request__ends_on=None,
        granted_by=admin,
    )
    return team_a, team_b


def test_the_burn_down_and_the_check_find_the_backfilled_hours(backfilled, teams, admin):
    team_a, _ = teams
    now = at(backfilled.end_timestamp)
    kind = budget_period(backfilled)
    since = midnight(periods.period_start(kind, now.date()))
    expected = expected_hours(backfilled, team_a.slug, since=since)
    budget = budget_set(actor=admin, team=team_a, period=kind, gpu_hours="1000")

    burn = budget_burn_down(budget, now=now)
    (result,) = budget_checks.budgets_check(now=now, budget_ids=[budget.pk])

    assert expected > 0
    assert burn.spent_now == pytest.approx(expected, abs=0.1)
    assert result.spent_gpu_hours == pytest.approx(expected, abs=0.1)
    assert all(0 < u < 100 for u in burn.utilisation if u is not None)
    # At the rate so far: spent, over the share of the period gone by.
    elapsed = (now - burn.start) / (burn.end - burn.start)
    assert burn.projected == pytest.approx(burn.spent_now / elapsed, rel=1e-6)


def test_leads_are_told_at_80_and_100_percent_once_and_new_work_is_refused(
    backfilled, teams, admin, metrics_cluster
):
    team_a, _ = teams
    lead = member_of(team_a, "bea-lead", role=Membership.Role.LEAD)
    now = at(backfilled.end_timestamp)
    kind = budget_period(backfilled)
    since = midnight(periods.period_start(kind, now.date()))
    spent = expected_hours(backfilled, team_a.slug, since=since)

    budget = budget_set(actor=admin, team=team_a, period=kind, gpu_hours=f"{spent / 0.85:.4f}")
    budget_checks.budgets_check(now=now, budget_ids=[budget.pk])
    budget_checks.budgets_check(now=now, budget_ids=[budget.pk])
    warned = list(Notification.objects.filter(user=lead))
    admitted = budget_refusal(team=team_a, cluster=metrics_cluster)

    budget_set(actor=admin, team=team_a, period=kind, gpu_hours=f"{spent * 0.9:.4f}")
    budget_checks.budgets_check(now=now, budget_ids=[budget.pk])
    budget_checks.budgets_check(now=now, budget_ids=[budget.pk])
    told = list(Notification.objects.filter(user=lead).order_by("created_at", "pk"))
    refused = budget_refusal(team=team_a, cluster=metrics_cluster)

    assert [n.kind for n in warned] == [Notification.Kind.BUDGET_WARNING]
    assert warned[0].subject.startswith("80% of the ")
    assert admitted is None
    assert [n.kind for n in told] == [
        Notification.Kind.BUDGET_WARNING,
        Notification.Kind.BUDGET_EXHAUSTED,
    ]
    assert refused.startswith("Budget spent: the ")
    assert f"of team {team_a.slug} is used up" in refused


def test_statement_totals_are_the_usage_reports_hours_times_the_prices(
    backfilled, teams, admin, metrics_cluster
):
    team_a, _ = teams
    now = at(backfilled.end_timestamp)
    first = at(backfilled.start_timestamp).date().replace(day=1)
    months = 1 if now.date().replace(day=1) == first else 2
    price_set(actor=admin, gpu_model="", effective_from=first, gpu_hour="2")
    price_set(actor=admin, gpu_model=H100, effective_from=first, gpu_hour="7")

    statement = monthly_statement(
        first_month=first, months=months, teams=Team.objects.filter(pk__in=[t.pk for t in teams]),
        now=now,
    )  # fmt: skip
    report = teams_usage_report(
        teams=Team.objects.filter(pk__in=[t.pk for t in teams]),
        every_team=False,
        start=midnight(first),
        end=midnight(periods.add_months(first, months)),
        bucket="month",
        now=now,
    )

    lines = {(line.team_slug, line.month): line.costing for line in statement.lines}
    for row in report.rows:
        costing = lines[(row.team_slug, row.period.start.date())]
        # Both count GPU equivalents: held hours as DCGM's series say (the backfill's are whole
        # GPUs), granted hours with a slice at its share (the statement's "reserved").
        assert costing.held_gpu_hours == pytest.approx(row.held_gpu_hours, rel=1e-9)
        assert costing.reserved_gpu_hours == pytest.approx(row.granted_gpu_hours, rel=1e-9)
        price = Decimal(2) if row.team_slug == team_a.slug else Decimal(7)
        assert float(costing.used_cost) == pytest.approx(float(price) * row.held_gpu_hours)
        assert float(costing.reserved_cost) == pytest.approx(
            float(price) * row.granted_gpu_hours, rel=1e-9
        )
        assert costing.held_gpu_equivalent_hours == pytest.approx(row.held_gpu_hours)

    start = at(backfilled.start_timestamp - 30)
    for team in teams:
        held = sum(c.held_gpu_hours for (slug, _), c in lines.items() if slug == team.slug)
        idle = sum(c.idle_gpu_hours for (slug, _), c in lines.items() if slug == team.slug)
        assert held == pytest.approx(backfilled.gpu_hours(team.slug), abs=0.1)
        expected_idle = expected_hours(
            backfilled, team.slug, since=start, idle_under=metrics_cluster.idle_utilization_percent
        )
        assert expected_idle > 0
        assert idle == pytest.approx(expected_idle, abs=0.1)


def test_the_usage_csv_gives_a_team_its_budget_and_the_gpu_equivalents_it_spent(
    backfilled, teams, admin, metrics_cluster
):
    team_a, team_b = teams
    budget_set(actor=admin, team=team_b, period=periods.MONTH, gpu_hours="500")
    now = at(backfilled.end_timestamp)
    start = now - datetime.timedelta(days=2)

    report = teams_usage_report(
        teams=Team.objects.filter(pk__in=[team_a.pk, team_b.pk]),
        every_team=False,
        start=start,
        end=now,
        now=now,
    )

    rows = {
        row["team"]: row
        for row in csv.DictReader(io.StringIO(report.csv()))
        if row["cluster"] == metrics_cluster.name
    }
    held = float(rows[team_b.slug]["held_gpu_hours"])
    assert held == pytest.approx(expected_hours(backfilled, team_b.slug, since=start), abs=0.1)
    assert rows[team_b.slug]["budget_gpu_hours"] == "500.000"
    # Held hours are GPU equivalents as DCGM's series say: the backfill's are whole GPUs, so
    # team B spent what it held though its grant is of slices (a slice's series would count a
    # seventh: tests/integration/monitoring/test_gpu_slices_promql.py).
    assert float(rows[team_b.slug]["budget_spent_gpu_hours"]) == pytest.approx(held, abs=0.01)
    assert rows[team_a.slug]["budget_gpu_hours"] == ""
    assert rows[team_a.slug]["budget_spent_gpu_hours"] == ""
