"""The usage report's GPU-hours against what the simulator's backfill wrote.

A day of history for 8 GPUs in two namespaces (two teams), one sample a minute: the report must
find exactly the GPU-hours the backfill held and, weighted by utilisation, used. The backfill
does not restart the shared Prometheus (others' tests use it); Prometheus picks the new blocks
up within a minute. The series are deleted again afterwards."""

import datetime
import io
import re
import uuid

import pytest
from django.core.management import CommandError, call_command

from devcluster.backfill import BackfillSpec
from monitoring import measured_hours
from monitoring.prometheus import record_queries
from tests import factories

from .pages import member_of
from .workloads import backfill_history, delete_series

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

UTC = datetime.UTC


@pytest.fixture(scope="module")
def backfilled(devcluster):
    suffix = uuid.uuid4().hex[:8]
    spec = BackfillSpec(
        days=1,
        gpus=8,
        gpus_per_pod=2,
        namespaces=(f"usage-a-{suffix}", f"usage-b-{suffix}"),
        end=int(datetime.datetime.now(UTC).timestamp()) - 600,
        node_prefix=f"usage-node-{suffix}",
    )
    selector = f'DCGM_FI_DEV_GPU_UTIL{{namespace=~"usage-.-{suffix}"}}'
    backfill_history(
        devcluster,
        spec,
        selector,
        forget_from=spec.start_timestamp - 100 * 86400,
        forget_to=spec.end_timestamp,
    )
    yield spec
    delete_series(devcluster, selector)


def expected_used_hours(spec, namespace):
    total = sum(
        spec.utilisation(gpu, t)
        for gpu in spec.gpu_list()
        if gpu.namespace == namespace
        for t in spec.timestamps()
    )
    return total / 100 * spec.step_seconds / 3600


def period_params(spec, bucket="total"):
    # Half a step before the first sample, to the last one: every sample is inside.
    start = datetime.datetime.fromtimestamp(spec.start_timestamp - 30, UTC)
    end = datetime.datetime.fromtimestamp(spec.end_timestamp, UTC)
    return {"start": start.isoformat(), "end": end.isoformat(), "bucket": bucket}, start, end


@pytest.fixture
def teams(backfilled, metrics_cluster, admin):
    team_a = factories.TeamFactory(slug=backfilled.namespaces[0], name="Usage A")
    team_b = factories.TeamFactory(slug=backfilled.namespaces[1], name="Usage B")
    start = datetime.datetime.fromtimestamp(backfilled.start_timestamp, UTC)
    factories.QuotaGrantFactory(
        request__team=team_a,
        request__cluster=metrics_cluster,
        request__gpus=4,
        request__starts_on=(start - datetime.timedelta(days=1)).date(),
        request__ends_on=None,
        granted_by=admin,
    )
    return team_a, team_b


def test_held_and_used_gpu_hours_match_the_backfill(backfilled, teams, admin, api):
    team_a, team_b = teams
    params, start, end = period_params(backfilled)

    response = api.as_user(admin).get("/api/v1/usage-report/", params)

    assert response.status_code == 200, response.content
    rows = {row["team"]: row for row in response.json()["rows"] if row["cluster"] == "devcluster"}
    for team in (team_a, team_b):
        row = rows[team.slug]
        assert row["held_gpu_hours"] == pytest.approx(backfilled.gpu_hours(team.slug)), team
        assert row["held_gpu_hours"] == pytest.approx(4 * 24)
        assert row["used_gpu_hours"] == pytest.approx(expected_used_hours(backfilled, team.slug))
    period_hours = (end - start).total_seconds() / 3600
    assert rows[team_a.slug]["granted_gpu_hours"] == pytest.approx(4 * period_hours)
    assert rows[team_b.slug]["granted_gpu_hours"] == 0
    assert 0 < rows[team_a.slug]["utilisation_percent"] < 100


def test_daily_periods_add_up_to_the_whole_without_counting_a_sample_twice(
    backfilled, teams, admin, api
):
    team_a, _ = teams
    params, _, _ = period_params(backfilled, bucket="day")

    body = api.as_user(admin).get("/api/v1/usage-report/", params).json()

    days = [r for r in body["rows"] if r["team"] == team_a.slug]
    assert len(days) == 2  # a day of history crosses one midnight
    assert sum(r["held_gpu_hours"] for r in days) == pytest.approx(4 * 24)
    assert sum(r["used_gpu_hours"] for r in days) == pytest.approx(
        expected_used_hours(backfilled, team_a.slug)
    )


def test_a_lead_gets_the_same_figures_for_their_team_only_in_csv_and_on_the_page(
    backfilled, teams, api, client_as
):
    team_a, team_b = teams
    lead = member_of(team_a, "ursula-lead")
    params, _, _ = period_params(backfilled)

    csv_text = api.as_user(lead).get("/api/v1/usage-report/", {**params, "format": "csv"})
    lines = csv_text.content.decode().splitlines()
    assert lines[0].startswith("team,team_name,cluster,period_start")
    (line,) = lines[1:]
    cells = line.split(",")
    assert cells[0] == team_a.slug
    assert float(cells[6]) == pytest.approx(96, abs=0.001)
    assert float(cells[7]) == pytest.approx(expected_used_hours(backfilled, team_a.slug), abs=0.001)

    page = client_as(lead).get("/monitoring/usage/", params)
    (row,) = page.context["report"].rows
    assert row.team_slug == team_a.slug
    assert row.held_gpu_hours == pytest.approx(96)
    assert team_b.slug not in page.content.decode()
    download = client_as(lead).get("/monitoring/usage.csv", params)
    assert download["Content-Disposition"].startswith("attachment")
    assert download.content.decode().splitlines() == lines


def test_a_department_admin_gets_its_teams_rows_of_the_whole_report(backfilled, teams, admin, api):
    # Team A in research-vision, nested in research; team B in no department.
    team_a, _ = teams
    research = factories.DepartmentFactory(slug="research")
    team_a.department = factories.DepartmentFactory(slug="research-vision", parent=research)
    team_a.save()
    dept_admin = factories.UserFactory(username="dana-dept-admin")
    research.admins.add(dept_admin)
    params, _, _ = period_params(backfilled)

    whole = api.as_user(admin).get("/api/v1/usage-report/", params).json()
    department = api.as_user(dept_admin).get(
        "/api/v1/usage-report/", {**params, "department": "research"}
    )

    # The department's figures are its teams' rows of the whole report, to the GPU-hour.
    assert department.status_code == 200, department.content
    assert department.json()["rows"] == [r for r in whole["rows"] if r["team"] == team_a.slug]
    assert sum(r["held_gpu_hours"] for r in department.json()["rows"]) == pytest.approx(4 * 24)


def hours_until(spec, namespace, until: int) -> tuple[float, float]:
    """GPU-hours the backfill held and used in the namespace up to ``until``."""
    samples = [
        spec.utilisation(gpu, t)
        for gpu in spec.gpu_list()
        if gpu.namespace == namespace
        for t in spec.timestamps()
        if t <= until
    ]
    step_hours = spec.step_seconds / 3600
    return len(samples) * step_hours, sum(samples) / 100 * step_hours


def measured_spans(records) -> list[int]:
    """The seconds each GPU-hour query of ``records`` sampled: ``[Ns:60s]`` is N + 1."""
    return [
        int(match.group(1)) + 1
        for record in records
        if (match := re.search(r"\[(\d+)s:\d+s\]\) \*", record.params["query"]))
    ]


def figures(response) -> dict:
    assert response.status_code == 200, response.content
    return {
        (row["team"], kind): row[f"{kind}_gpu_hours"]
        for row in response.json()["rows"]
        for kind in ("held", "used")
    }


def test_a_periods_settled_hours_are_measured_once_then_only_what_came_after(
    backfilled, teams, admin, api, settings, shared_cache, metrics_cluster
):
    params, _, _ = period_params(backfilled)
    so_far = {"start": params["start"]}  # to now: the page's "this month so far"
    closed_end = backfilled.end_timestamp - 3600
    closed = {**so_far, "end": datetime.datetime.fromtimestamp(closed_end, UTC).isoformat()}
    client = api.as_user(admin)
    # Measured in one query each: what the kept and the newly measured pieces must add up to.
    whole = figures(client.get("/api/v1/usage-report/", so_far))
    whole_closed = figures(client.get("/api/v1/usage-report/", closed))
    settings.MONITORING_USAGE_CACHE_SECONDS = 3600

    with record_queries() as first_records:
        first = figures(client.get("/api/v1/usage-report/", so_far))
    with record_queries() as again_records:
        again = figures(client.get("/api/v1/usage-report/", so_far))

    # Measured once from the period's start to the last settled hour, then what came after.
    longest_tail = measured_hours.SETTLED_STEP + measured_hours.SETTLED_AFTER + 300
    assert max(measured_spans(first_records)) > 86400 - longest_tail
    assert 0 < max(measured_spans(again_records)) <= longest_tail
    assert first == pytest.approx(whole)
    assert again == pytest.approx(whole)

    with record_queries() as closed_records:
        closed_first = figures(client.get("/api/v1/usage-report/", closed))
    with record_queries() as closed_again_records:
        closed_again = figures(client.get("/api/v1/usage-report/", closed))

    # A period that ended is measured once and then costs no query at all; its figures are
    # the backfill's, sample for sample.
    assert measured_spans(closed_records)
    assert closed_again_records == []
    assert closed_first == pytest.approx(whole_closed)
    assert closed_again == closed_first
    for team in teams:
        held, used = hours_until(backfilled, team.slug, closed_end)
        assert closed_first[team.slug, "held"] == pytest.approx(held), team
        assert closed_first[team.slug, "used"] == pytest.approx(used), team
    assert closed_first[teams[0].slug, "held"] == pytest.approx(4 * 23)

    # The closed period is kept beside the growing one, not in its place.
    with record_queries() as later_records:
        later = figures(client.get("/api/v1/usage-report/", so_far))
    assert 0 < max(measured_spans(later_records)) <= longest_tail
    assert later == pytest.approx(whole)

    # After a backfill into periods already measured, an operator makes them measured afresh.
    settings.MONITORING_CACHE_SECONDS = 0  # nor any Prometheus answer reused
    out = io.StringIO()
    call_command("forget_usage_hours", cluster=[metrics_cluster.name], stdout=out)
    with record_queries() as forgotten_records:
        forgotten = figures(client.get("/api/v1/usage-report/", closed))
    with record_queries() as kept_again_records:
        figures(client.get("/api/v1/usage-report/", closed))

    assert out.getvalue() == f"{metrics_cluster.name}: usage hours will be measured afresh\n"
    assert max(measured_spans(forgotten_records)) == max(measured_spans(closed_records))
    assert forgotten == pytest.approx(closed_first)
    assert kept_again_records == []


def test_forgetting_kept_hours_names_an_unknown_cluster_and_needs_a_shared_cache(
    metrics_cluster, settings, shared_cache
):
    with pytest.raises(CommandError, match="No cluster named nowhere"):
        call_command("forget_usage_hours", cluster=[metrics_cluster.name, "nowhere"])

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with pytest.raises(CommandError, match="each process's own memory"):
        call_command("forget_usage_hours")
