"""Benchmark: the booking calendar for 1,000 teams over 12 months, from PostgreSQL.

Each team holds twelve grants of one GPU model on one cluster, one starting in each of the next
twelve months (lengths vary, some open-ended), and has one pending request. For 100 teams and
then for 1,000 it measures, over a year of days (366):

* the booking calendar page (``/monitoring/calendar/``: the figures, the Plotly chart, the
  earliest-window search and the booking form, as a team lead sees it);
* the API's series (``/api/v1/clusters/{name}/calendar/``);
* a bare Django view beside them: one raw SQL query that sums the grants per day in
  PostgreSQL (``generate_series`` joined to the grants) and returns the days as JSON;

the median time per request and the SQL queries of one request, which must not grow with the
number of teams. Goal: the page in at most 300 ms at 1,000 teams. Results go to
``bench-results/calendar.{json,md}`` and rows of the summary table.

Run through ``make bench`` (a scratch PostgreSQL database, DEBUG off). ``BENCH_REPEATS``
(default 7) sets the requests per cell, ``BENCH_CALENDAR_TEAMS`` (comma-separated, default
100,1000) the numbers of teams.
"""

import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth.decorators import login_required  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import include, path  # noqa: E402
from django.utils import timezone  # noqa: E402

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity  # noqa: E402
from tenants.models import Membership, QuotaGrant, QuotaRequest, Team  # noqa: E402
from tests.bench.helpers import grants_for, in_process_storages  # noqa: E402
from tests.bench.summary import Goal, Summary, results_dir, scale  # noqa: E402

CLUSTER = "bench-calendar"
MODEL = "NVIDIA-H100-80GB-HBM3"
RESOURCE = "nvidia.com/gpu"
TEAM_COUNTS = tuple(int(n) for n in os.environ.get("BENCH_CALENDAR_TEAMS", "100,1000").split(","))
MONTHS = 12
DAYS = 366
GOAL_MS = 300
# At a company's scale (``make bench-scale``) the goal is the raw SQL's time, not a bound.
RATIO_GOAL = 1.5
REPEATS = int(os.environ.get("BENCH_REPEATS", "7"))
RESULTS = results_dir()

DAILY_SQL = """
SELECT day::date, COALESCE(SUM(g.gpus), 0)
FROM generate_series(%s::date, %s::date, interval '1 day') AS day
LEFT JOIN tenants_quotagrant g
  ON g.cluster_id = %s AND g.gpu_resource = %s AND g.gpu_model = %s AND g.state = 'active'
  AND g.starts_on <= day AND (g.ends_on IS NULL OR g.ends_on >= day)
GROUP BY day ORDER BY day
"""


@login_required
def bare_calendar(request):
    """The alternative: granted GPUs per day summed by PostgreSQL in one raw query, as JSON."""
    cluster = Cluster.objects.only("pk").get(name=CLUSTER)
    first = datetime.date.fromisoformat(request.GET["start"])
    last = datetime.date.fromisoformat(request.GET["end"])
    with connection.cursor() as cursor:
        cursor.execute(DAILY_SQL, [first, last, cluster.pk, RESOURCE, MODEL])
        rows = cursor.fetchall()
    return JsonResponse({"days": [{"day": day.isoformat(), "granted": n} for day, n in rows]})


urlpatterns = [
    path("bare/calendar/", bare_calendar),
    path("", include("portal.urls")),
]


def seed(teams: int) -> User:
    """Teams up to ``teams`` on the benchmark's cluster, each with its twelve grants and one
    pending request; reused if the scratch database has them. Returns a lead of the first."""
    cluster, _ = Cluster.objects.get_or_create(name=CLUSTER)
    GpuCapacity.objects.get_or_create(
        cluster=cluster, resource_name=RESOURCE, defaults={"allocatable": 16_384}
    )
    GpuModelCapacity.objects.get_or_create(
        cluster=cluster,
        resource_name=RESOURCE,
        gpu_model=MODEL,
        defaults={"allocatable": 16_384, "nodes": 2048, "max_per_node": 8},
    )
    admin, _ = User.objects.get_or_create(
        username="bench-calendar-admin", defaults={"is_staff": True}
    )
    have = Team.objects.filter(slug__startswith="bench-cal-").count()
    if have < teams:
        made = Team.objects.bulk_create(
            [Team(slug=f"bench-cal-{i}", name=f"Calendar {i}") for i in range(have, teams)]
        )
        leads = User.objects.bulk_create(
            [User(username=f"bench-cal-lead-{i}") for i in range(have, teams)]
        )
        Membership.objects.bulk_create(
            [
                Membership(team=team, user=lead, role=Membership.Role.LEAD)
                for team, lead in zip(made, leads, strict=True)
            ]
        )
        today = timezone.localdate()

        def request(team, lead, i: int, month: int, state: str) -> QuotaRequest:
            starts_on = today + datetime.timedelta(days=30 * month + i % 30)
            length = 7 + (i * 7 + month) % 60
            return QuotaRequest(
                team=team,
                cluster=cluster,
                gpu_resource=RESOURCE,
                gpu_model=MODEL,
                gpus=1 + (i + month) % 8,
                starts_on=starts_on,
                ends_on=None if (i + month) % 17 == 0 else starts_on + datetime.timedelta(length),
                justification=f"Calendar benchmark {i}/{month}",
                requested_by=lead,
                state=state,
            )

        approved = QuotaRequest.objects.bulk_create(
            [
                request(team, lead, have + n, month, QuotaRequest.State.APPROVED)
                for n, (team, lead) in enumerate(zip(made, leads, strict=True))
                for month in range(MONTHS)
            ],
            batch_size=2000,
        )
        QuotaGrant.objects.bulk_create(grants_for(approved, granted_by=admin), batch_size=2000)
        QuotaRequest.objects.bulk_create(
            [
                request(team, lead, have + n, n % MONTHS, QuotaRequest.State.PENDING)
                for n, (team, lead) in enumerate(zip(made, leads, strict=True))
            ],
            batch_size=2000,
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return User.objects.get(username="bench-cal-lead-0")


def measure(client: Client, url: str) -> tuple[float, int, int]:
    """Median seconds per request over REPEATS, the SQL queries of one request and its bytes."""
    client.get(url)  # warm caches and connections
    reset_queries()
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    count, size = len(queries), len(response.content)
    timings = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        client.get(url)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings), count, size


@override_settings(
    ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"], STORAGES=in_process_storages()
)
def run() -> dict:
    today = timezone.localdate()
    last = today + datetime.timedelta(days=DAYS - 1)
    span = f"start={today.isoformat()}&end={last.isoformat()}"
    urls = {
        "page": f"/monitoring/calendar/?cluster={CLUSTER}&gpu_model={MODEL}&{span}",
        "api": f"/api/v1/clusters/{CLUSTER}/calendar/?gpu_model={MODEL}&{span}",
        "bare": f"/bare/calendar/?{span}",
    }
    results = {"repeats": REPEATS, "days": DAYS, "runs": []}
    for teams in TEAM_COUNTS:
        lead = seed(teams)
        client = Client()
        client.force_login(lead)
        cluster = Cluster.objects.get(name=CLUSTER)
        run = {
            "teams": teams,
            "grants": QuotaGrant.objects.filter(cluster=cluster).count(),
            "pending": QuotaRequest.objects.filter(cluster=cluster, state="pending").count(),
        }
        for key, url in urls.items():
            seconds, queries, size = measure(client, url)
            run[key] = {
                "ms": round(seconds * 1000, 1),
                "queries": queries,
                "kib": round(size / 1024, 1),
            }
        api = client.get(urls["api"]).json()["days"]
        bare = client.get(urls["bare"]).json()["days"]
        assert [d["granted"] for d in api] == [d["granted"] for d in bare], "figures differ"
        results["runs"].append(run)
    first, biggest = results["runs"][0], results["runs"][-1]
    results["queries_constant"] = all(
        first[key]["queries"] == biggest[key]["queries"] for key in ("page", "api")
    )
    results["page_within_goal"] = biggest["page"]["ms"] <= GOAL_MS
    return results


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "calendar.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# The booking calendar, 12 months, from PostgreSQL",
        "",
        f"One GPU model on one cluster, {results['days']} days; each team holds 12 grants (one "
        "starting each month) and one pending request. Median of "
        f"{results['repeats']} requests in-process (Django test client), signed in as a team "
        "lead. Bare: one raw SQL query summing the grants per day in PostgreSQL "
        "(`generate_series` joined to the grants), as JSON.",
        "",
        "| teams | grants | page ms | page queries | page KiB | API ms | API queries "
        "| bare SQL ms | bare queries |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results["runs"]:
        lines.append(
            f"| {r['teams']:,} | {r['grants']:,} | {r['page']['ms']} | {r['page']['queries']} "
            f"| {r['page']['kib']} | {r['api']['ms']} | {r['api']['queries']} "
            f"| {r['bare']['ms']} | {r['bare']['queries']} |"
        )
    lines += [
        "",
        f"SQL queries the same for {TEAM_COUNTS[0]:,} and {TEAM_COUNTS[-1]:,} teams: "
        f"{results['queries_constant']}. Page within {GOAL_MS} ms at "
        f"{TEAM_COUNTS[-1]:,} teams: {results['page_within_goal']}.",
        "",
    ]
    (RESULTS / "calendar.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    small, big = results["runs"][0], results["runs"][-1]
    work = f"{big['teams']:,} teams × 12 months ({big['grants']:,} grants)"
    goal = Goal.ratio_at_most(RATIO_GOAL) if scale() else Goal.portal_at_most(GOAL_MS)
    board.row(
        f"booking calendar page, {work}",
        portal=big["page"]["ms"],
        alternative=big["bare"]["ms"],
        alternative_is="bare view: one raw SQL query summing grants per day",
        unit="ms",
        goal=goal,
        note=f"{big['page']['queries']} SQL queries, {big['page']['kib']} KiB",
    )
    board.row(
        f"booking calendar API, {work}",
        portal=big["api"]["ms"],
        alternative=big["bare"]["ms"],
        alternative_is="bare view: one raw SQL query summing grants per day",
        unit="ms",
        goal=goal,
        note=f"{big['api']['queries']} SQL queries",
    )
    board.row(
        f"booking calendar page SQL queries, {big['teams']:,} vs {small['teams']:,} teams",
        portal=big["page"]["queries"],
        alternative=small["page"]["queries"],
        alternative_is=f"the same page with {small['teams']:,} teams",
        unit="queries",
        goal=Goal.ratio_at_most(1.0),
    )


if __name__ == "__main__":
    board = Summary("booking calendar")
    outcome = run()
    write(outcome)
    record(board, outcome)
    if not outcome["queries_constant"]:
        sys.exit("the calendar's SQL queries grow with the number of teams")
