"""Budgets of one GPU model split a team's held hours among its grants by their granted GPU
equivalents: a shared grant by the replicas its cluster's capacity row says, a MIG grant by its
profile. Prometheus' held hours are stood in (``monitoring.usage.measured_hours``); grants,
capacity rows and budgets are in the database, read as the budget check and the burn-down
read them."""

import datetime

import pytest
from django.utils import timezone

from billing import budgets, burn_down, statements
from billing.models import Budget
from clusters.vocabulary import SHARED_GPU_RESOURCE
from monitoring import usage
from tests import factories

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

A100 = "NVIDIA-A100-SXM4-80GB"
SHARED_A100 = f"{A100}-SHARED"


class _Prometheus:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def shared_and_whole(team, cluster, admin, monkeypatch):
    """Team vision holds 8 replicas of A100s shared four ways (two GPUs' worth) and 2 whole
    A100s, and its pods held 10 GPU-equivalent hours in every period asked."""
    cluster.prometheus_url = "http://prometheus.invalid:9090"
    cluster.save()
    factories.GpuModelCapacityFactory(
        cluster=cluster, resource_name=SHARED_GPU_RESOURCE, gpu_model=SHARED_A100, replicas=4
    )
    start = timezone.localdate().replace(day=1) - datetime.timedelta(days=40)
    for gpus, resource, model in (
        (8, SHARED_GPU_RESOURCE, SHARED_A100),
        (2, "nvidia.com/gpu", A100),
    ):
        factories.QuotaGrantFactory(
            request__team=team, request__cluster=cluster, request__gpus=gpus,
            request__gpu_resource=resource, request__gpu_model=model,
            request__starts_on=start, request__ends_on=None, granted_by=admin,
        )  # fmt: skip
    monkeypatch.setattr(usage, "prometheus_for", lambda cluster, **kwargs: _Prometheus())

    def measured(prometheus, config, *, idle_threshold_percent=None, **kwargs):
        held = {team.slug: 10.0}
        return (held, {team.slug: 5.0}, {team.slug: 0.0})

    monkeypatch.setattr(usage, "measured_hours", measured)
    return team


def test_a_shared_models_budget_counts_its_grants_replicas_not_its_units(shared_and_whole):
    team = shared_and_whole
    budget = Budget.objects.create(team=team, gpu_model=SHARED_A100, gpu_hours=100)

    (spending,) = budgets.budgets_spending([budget])

    # Two GPUs' worth of replicas beside two whole GPUs: half of the 10 held hours, not 8/10.
    assert spending.spent_gpu_hours == pytest.approx(5.0)


def test_the_burn_down_of_a_shared_models_budget_splits_by_replicas_too(shared_and_whole):
    team = shared_and_whole
    budget = Budget.objects.create(team=team, gpu_model=SHARED_A100, gpu_hours=100)

    chart = burn_down.budget_burn_down(budget)

    # Each day's row held 10 hours: 5 of them the shared model's.
    assert chart.spent == pytest.approx([5.0 * (day + 1) for day in range(len(chart.days))])


def test_the_statement_prices_the_shared_grant_by_its_clusters_replicas(shared_and_whole):
    month = timezone.localdate().replace(day=1)

    statement = statements.monthly_statement(first_month=month)

    (line,) = statement.lines
    assert line.costing.reserved_gpu_hours == pytest.approx(line.costing.granted_gpu_hours * 4 / 10)
    assert line.costing.held_by_model == {
        SHARED_A100: pytest.approx(5.0),
        A100: pytest.approx(5.0),
    }
