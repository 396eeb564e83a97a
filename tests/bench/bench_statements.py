"""Benchmark: the monthly chargeback statement for 1,000 teams x 12 months from PostgreSQL,
beside one raw SQL query that computes the same reserved costs.

Seeds 1,000 teams under 30 departments (10 with two nested each), two grants per team (H100 and
A100, a tenth of them ended and a tenth shrunk by an admin, so the size history counts), and a
price history; then times ``billing.statements.monthly_statement`` for the last 12 full months
(the usage report's one call, the prices, teams, clusters and departments, and the arithmetic)
and counts its SQL queries at 100 and at 1,000 teams, which must be the same. The cluster has no
Prometheus: what is measured is the part PostgreSQL and the portal do (held hours come from
Prometheus, a handful of queries per month and cluster whatever the number of teams).

The baseline is one SQL statement: per team and month the grants' overlapping hours times GPUs
times the price in force (``generate_series`` over the months, a lateral join for the price),
which knows nothing of shrinks, MIG or departments; its totals must agree with the statement's
for the grants that were never shrunk.

Run through ``make bench`` (a scratch PostgreSQL database, DEBUG off). ``BENCH_REPEATS``
(default 7) sets the runs per side, ``BENCH_STATEMENTS_TEAMS`` the teams (``make bench-scale``:
500, against the raw SQL's time). Results go to ``bench-results/statements.{json,md}`` and
rows of the summary table.
"""

import datetime
import json
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from billing.models import Price  # noqa: E402
from billing.periods import add_months  # noqa: E402
from billing.statements import monthly_statement  # noqa: E402
from clusters.models import Cluster  # noqa: E402
from tenants.models import AuditEvent, Department, QuotaGrant, QuotaRequest, Team  # noqa: E402
from tests.bench.summary import Goal, Summary, results_dir, scale  # noqa: E402

TEAMS = int(os.environ.get("BENCH_STATEMENTS_TEAMS", "1000"))
SMALL = 100
# At a company's scale (``make bench-scale``) the goal is the raw SQL's time, not a bound.
RATIO_GOAL = 1.5
MONTHS = 12
PREFIX = "stmt-"
CLUSTER = "bench-statements"
REPEATS = int(os.environ.get("BENCH_REPEATS", "7"))
GOAL_MS = 300
RESULTS = results_dir()
MODELS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB")


def clean() -> None:
    teams = Team.objects.filter(slug__startswith=PREFIX)
    grants = QuotaGrant.objects.filter(team__in=teams)
    AuditEvent.objects.filter(target_type="QuotaGrant", target_id__in=grants.values("pk")).delete()
    grants.delete()
    QuotaRequest.objects.filter(team__in=teams).delete()
    teams.delete()
    departments = Department.objects.filter(slug__startswith=PREFIX)
    departments.exclude(parent=None).delete()  # the nested ones before their parents
    departments.delete()
    Cluster.objects.filter(name=CLUSTER).delete()
    Price.objects.filter(gpu_model__in=[f"{PREFIX}{m}" for m in MODELS]).delete()


def seed(first: datetime.date) -> dict:
    """Teams, departments, grants (some ended, some shrunk) and prices; returns what it made."""
    admin, _ = User.objects.get_or_create(username="bench-statements-admin", is_staff=True)
    cluster = Cluster.objects.create(name=CLUSTER)
    tops = Department.objects.bulk_create(
        [Department(slug=f"{PREFIX}top-{i}", name=f"Top {i}") for i in range(10)]
    )
    leaves = Department.objects.bulk_create(
        [
            Department(slug=f"{PREFIX}leaf-{i}-{j}", name=f"Leaf {i}.{j}", parent=top)
            for i, top in enumerate(tops)
            for j in range(2)
        ]
    )
    teams = Team.objects.bulk_create(
        [
            Team(slug=f"{PREFIX}{i:04d}", name=f"Team {i}", department=leaves[i % len(leaves)])
            for i in range(TEAMS)
        ]
    )
    starts = first - datetime.timedelta(days=20)
    requests = QuotaRequest.objects.bulk_create(
        [
            QuotaRequest(
                team=team,
                cluster=cluster,
                gpu_model=f"{PREFIX}{model}",
                gpus=1 + (i + k) % 8,
                starts_on=starts + datetime.timedelta(days=(i * 7 + k) % 200),
                ends_on=None,
                justification="bench",
                requested_by=admin,
                state=QuotaRequest.State.APPROVED,
            )
            for i, team in enumerate(teams)
            for k, model in enumerate(MODELS)
        ]
    )
    now = timezone.now()
    grants = QuotaGrant.objects.bulk_create(
        [
            QuotaGrant(
                request=r,
                team=r.team,
                cluster=cluster,
                gpu_resource=r.gpu_resource,
                gpu_model=r.gpu_model,
                gpus=r.gpus,
                starts_on=r.starts_on,
                ends_on=r.ends_on,
                granted_by=admin,
                state="active",
            )
            for r in requests
        ]
    )
    # A tenth ended (revoked half-way through the year), a tenth shrunk by one GPU.
    ended = grants[::10]
    for grant in ended:
        grant.state = "revoked"
        grant.ended_at = now - datetime.timedelta(days=180)
    QuotaGrant.objects.bulk_update(ended, ["state", "ended_at"])
    shrunk = [g for g in grants[5::10] if g.gpus > 1]
    events = [
        AuditEvent(
            actor=admin,
            team=g.team,
            action=AuditEvent.Action.QUOTA_GRANT_SHRUNK,
            target_type="QuotaGrant",
            target_id=g.pk,
            before={"gpus": g.gpus},
            after={"gpus": g.gpus - 1},
        )
        for g in shrunk
    ]
    AuditEvent.objects.bulk_create(events)
    for g in shrunk:
        g.gpus -= 1
    QuotaGrant.objects.bulk_update(shrunk, ["gpus"])
    Price.objects.bulk_create(
        [
            Price(gpu_model=f"{PREFIX}{MODELS[0]}", gpu_hour=Decimal("2.5"), effective_from=first),
            Price(
                gpu_model=f"{PREFIX}{MODELS[0]}",
                gpu_hour=Decimal("2.75"),
                effective_from=add_months(first, 6),
            ),
            Price(gpu_model=f"{PREFIX}{MODELS[1]}", gpu_hour=Decimal("1.4"), effective_from=first),
        ]
    )
    return {
        "cluster": cluster,
        "teams": len(teams),
        "departments": len(tops) + len(leaves),
        "grants": len(grants),
        "ended": len(ended),
        "shrunk": {g.pk for g in shrunk} | {g.pk for g in ended},
    }


BASELINE_SQL = """
WITH months AS (
    SELECT generate_series(%(first)s::timestamptz, %(last)s::timestamptz, interval '1 month')
        AS start
)
SELECT g.id, t.slug, m.start,
    g.gpus * EXTRACT(EPOCH FROM (
        LEAST(m.start + interval '1 month',
              COALESCE((g.ends_on + 1)::timestamptz, 'infinity'),
              COALESCE(g.ended_at, 'infinity'), %(now)s::timestamptz)
        - GREATEST(m.start, g.starts_on::timestamptz))) / 3600 * p.gpu_hour AS cost
FROM tenants_quotagrant g
JOIN tenants_team t ON t.id = g.team_id
JOIN months m ON g.starts_on::timestamptz < m.start + interval '1 month'
JOIN LATERAL (
    SELECT gpu_hour FROM billing_price p
    WHERE p.gpu_model IN (g.gpu_model, '') AND p.effective_from <= m.start::date
    ORDER BY (p.gpu_model = g.gpu_model) DESC, p.effective_from DESC LIMIT 1
) p ON true
WHERE g.cluster_id = %(cluster)s
"""


def baseline(cluster: Cluster, first: datetime.datetime, now: datetime.datetime) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            BASELINE_SQL,
            {
                "first": first,
                "last": add_months(first.date(), MONTHS - 1),
                "now": now,
                "cluster": cluster.pk,
            },
        )
        return [row for row in cursor.fetchall() if row[3] and row[3] > 0]


def timed(work, repeats: int) -> tuple[float, object]:
    seconds, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = work()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), result


def run() -> dict:
    today = timezone.localdate()
    first = add_months(today.replace(day=1), -MONTHS)
    tz = timezone.get_current_timezone()
    first_at = datetime.datetime.combine(first, datetime.time(), tzinfo=tz)
    end_at = datetime.datetime.combine(add_months(first, MONTHS), datetime.time(), tzinfo=tz)
    now = timezone.now()
    with transaction.atomic():
        clean()
        made = seed(first)
    cluster = made["cluster"]
    clusters = Cluster.objects.filter(pk=cluster.pk)
    all_teams = Team.objects.filter(slug__startswith=PREFIX)
    small_teams = Team.objects.filter(slug__in=[f"{PREFIX}{i:04d}" for i in range(SMALL)])

    def statement(teams):
        return monthly_statement(
            first_month=first, months=MONTHS, teams=teams, clusters=clusters, now=now
        )

    statement(all_teams)  # warm the connection and the code paths
    with CaptureQueriesContext(connection) as small_queries:
        statement(small_teams)
    with CaptureQueriesContext(connection) as queries:
        made_statement = statement(all_teams)
    portal_s, made_statement = timed(lambda: statement(all_teams), REPEATS)
    baseline_s, rows = timed(lambda: baseline(cluster, first_at, min(now, end_at)), REPEATS)

    # The two must agree where the baseline knows enough: grants never shrunk nor ended.
    unchanged = {}
    grants = {g.pk: g for g in QuotaGrant.objects.filter(cluster=cluster)}
    for grant_id, slug, _, cost in rows:
        if grant_id not in made["shrunk"]:
            unchanged[slug] = unchanged.get(slug, Decimal(0)) + cost
    del grants
    touched = {
        t
        for t in all_teams.filter(quotagrant__id__in=made["shrunk"]).values_list("slug", flat=True)
    }
    portal_costs: dict[str, Decimal] = {}
    for line in made_statement.lines:
        portal_costs[line.team_slug] = portal_costs.get(line.team_slug, Decimal(0)) + (
            line.costing.reserved_cost
        )
    compared = [slug for slug in unchanged if slug not in touched]
    worst = max(
        (abs(portal_costs[s] - unchanged[s]) / unchanged[s] for s in compared), default=Decimal(0)
    )
    return {
        "teams": made["teams"],
        "months": MONTHS,
        "departments": made["departments"],
        "grants": made["grants"],
        "statement_lines": len(made_statement.lines),
        "department_lines": len(made_statement.departments),
        "repeats": REPEATS,
        "portal_ms": round(portal_s * 1000, 1),
        "baseline_ms": round(baseline_s * 1000, 1),
        "queries": len(queries),
        "queries_at_100_teams": len(small_queries),
        "queries_constant": len(queries) == len(small_queries),
        "teams_compared_with_baseline": len(compared),
        "largest_relative_difference": float(worst),
    }


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "statements.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# Monthly chargeback statements from PostgreSQL",
        "",
        f"{results['teams']:,} teams under {results['departments']} departments, "
        f"{results['grants']:,} grants, {results['months']} months: "
        f"{results['statement_lines']:,} team lines and {results['department_lines']:,} "
        f"department lines. Median of {results['repeats']} runs, in-process, PostgreSQL; "
        "no Prometheus (the held hours' queries do not grow with the teams).",
        "",
        "| what | ms | SQL queries |",
        "| --- | ---: | ---: |",
        f"| `monthly_statement` (usage report + prices + roll-ups) | {results['portal_ms']} "
        f"| {results['queries']} ({results['queries_at_100_teams']} at 100 teams) |",
        f"| raw SQL: reserved cost per grant and month | {results['baseline_ms']} | 1 |",
        "",
        f"Reserved costs agree with the raw SQL for {results['teams_compared_with_baseline']} "
        f"teams whose grants were never shrunk or ended (largest relative difference "
        f"{results['largest_relative_difference']:.2e}).",
    ]
    (RESULTS / "statements.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    board.row(
        f"monthly statement, {results['teams']:,} teams × {results['months']} months",
        portal=results["portal_ms"],
        alternative=results["baseline_ms"],
        alternative_is="one raw SQL query of reserved costs per grant and month",
        unit="ms",
        goal=Goal.ratio_at_most(RATIO_GOAL) if scale() else Goal.portal_at_most(GOAL_MS),
        note=f"{results['queries']} SQL queries (same at 100 teams: {results['queries_constant']})",
    )


if __name__ == "__main__":
    board = Summary("statements")
    outcome = run()
    write(outcome)
    record(board, outcome)
    with transaction.atomic():
        clean()
    if not outcome["queries_constant"]:
        sys.exit("the statement's SQL queries grow with the teams")
    if outcome["largest_relative_difference"] > 1e-6:
        sys.exit("the statement's reserved costs differ from the raw SQL's")
