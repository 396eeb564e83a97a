"""Benchmark: list 10,000 quota requests through the API, beside a bare Django JSON view.

For each page size it reports the SQL queries per page (which must not grow with the page) and
the median time per page of ``GET /api/v1/quota-requests/`` next to a plain view that returns
the same rows with ``QuerySet.values()`` and ``JsonResponse``. Results go to
``bench-results/quota_requests_api.{json,md}``.

Run through ``make bench``, which points DATABASE_URL at a scratch PostgreSQL database and turns
DEBUG off, as in production (DEBUG logs every query, which would slow both sides).
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

from django.contrib.auth.models import User  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import include, path  # noqa: E402
from django.utils import timezone  # noqa: E402

from clusters.models import Cluster, GpuCapacity  # noqa: E402
from tenants.models import Membership, QuotaRequest, Team  # noqa: E402
from tests.bench.summary import Goal, Summary  # noqa: E402

ROWS = 10_000
TEAMS = 20
PAGE_SIZES = [10, 50, 100, 500, 1000]
REPEATS = int(os.environ.get("BENCH_REPEATS", "7"))
RESULTS = REPO_ROOT / "bench-results"


def bare_quota_requests(request):
    """The alternative: the same rows, newest first, straight from ``values()``; no auth rules."""
    size = int(request.GET.get("page_size", 50))
    page = int(request.GET.get("page", 1))
    rows = QuotaRequest.objects.order_by("-created_at", "-id").values(
        "id", "team__slug", "cluster__name", "gpu_resource", "gpus", "cpu_cores", "memory_gib",
        "starts_on", "ends_on", "justification", "state", "requested_by__username",
        "created_at", "decided_by__username", "decided_at", "decision_note",
    )[(page - 1) * size : page * size]  # fmt: skip
    return JsonResponse({"results": list(rows)})


urlpatterns = [
    path("bare/quota-requests/", bare_quota_requests),
    path("", include("portal.urls")),
]


def seed() -> User:
    """10,000 requests over 20 teams, in bulk; reused if the scratch database already has them."""
    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    if QuotaRequest.objects.count() == ROWS:
        return admin
    QuotaRequest.objects.all().delete()
    cluster, _ = Cluster.objects.get_or_create(name="bench")
    GpuCapacity.objects.get_or_create(cluster=cluster, resource_name="nvidia.com/gpu",
                                      defaults={"allocatable": 4096})  # fmt: skip
    teams = [Team.objects.get_or_create(slug=f"bench-{i}", name=f"Bench {i}")[0]
             for i in range(TEAMS)]  # fmt: skip
    leads = []
    for i, team in enumerate(teams):
        lead, _ = User.objects.get_or_create(username=f"bench-lead-{i}")
        Membership.objects.get_or_create(team=team, user=lead, role=Membership.Role.LEAD)
        leads.append(lead)
    today = timezone.localdate()
    QuotaRequest.objects.bulk_create(
        [
            QuotaRequest(
                team=teams[i % TEAMS], cluster=cluster, gpus=1 + i % 8,
                starts_on=today, ends_on=today + datetime.timedelta(days=30 + i % 60),
                justification=f"Benchmark request {i}", requested_by=leads[i % TEAMS],
            )
            for i in range(ROWS)
        ],
        batch_size=2000,
    )  # fmt: skip
    return admin


def measure(client: Client, url: str) -> tuple[float, int, int]:
    """Median seconds per request over REPEATS, the queries one request ran, and its row count."""
    client.get(url)  # warm caches and connections
    reset_queries()  # the query log is a bounded deque: start from empty so the count is right
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    query_count = len(queries)  # now: the log is cleared by the next request
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    rows = len(response.json()["results"])
    timings = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        client.get(url)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings), query_count, rows


@override_settings(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"])
def run() -> dict:
    admin = seed()
    lead = User.objects.get(username="bench-lead-0")
    results = {"rows": QuotaRequest.objects.count(), "repeats": REPEATS, "pages": []}
    clients = {"admin": Client(), "lead": Client()}
    clients["admin"].force_login(admin)
    clients["lead"].force_login(lead)
    for size in PAGE_SIZES:
        page = 3 if size * 3 <= ROWS else 1
        api_s, api_q, api_rows = measure(
            clients["admin"], f"/api/v1/quota-requests/?page_size={size}&page={page}"
        )
        lead_s, lead_q, _ = measure(
            clients["lead"], f"/api/v1/quota-requests/?page_size={size}&page=1"
        )
        bare_s, bare_q, bare_rows = measure(
            clients["admin"], f"/bare/quota-requests/?page_size={size}&page={page}"
        )
        assert api_rows == bare_rows == size, (api_rows, bare_rows, size)
        results["pages"].append(
            {
                "page_size": size,
                "api_queries": api_q,
                "api_queries_as_team_lead": lead_q,
                "bare_queries": bare_q,
                "api_ms": round(api_s * 1000, 2),
                "api_as_team_lead_ms": round(lead_s * 1000, 2),
                "bare_ms": round(bare_s * 1000, 2),
                "api_to_bare_ratio": round(api_s / bare_s, 2),
            }
        )
    started = time.perf_counter()
    url, listed = "/api/v1/quota-requests/?page_size=1000", 0
    while url:
        page = clients["admin"].get(url).json()
        listed += len(page["results"])
        url = page["next"]
    results["list_all_10000_via_api_s"] = round(time.perf_counter() - started, 3)
    assert listed == ROWS, listed
    query_counts = {p["api_queries"] for p in results["pages"]}
    results["api_queries_constant_across_page_sizes"] = len(query_counts) == 1
    return results


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "quota_requests_api.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        f"# Listing {results['rows']:,} quota requests: API vs a bare Django JSON view",
        "",
        f"Median of {results['repeats']} requests per cell, in-process (Django test client), "
        "PostgreSQL.",
        "",
        "| page size | API queries (admin / lead) | bare queries | API ms (admin) | API ms (lead) "
        "| bare ms | API / bare |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in results["pages"]:
        lines.append(
            f"| {p['page_size']} | {p['api_queries']} / {p['api_queries_as_team_lead']} "
            f"| {p['bare_queries']} | {p['api_ms']} | {p['api_as_team_lead_ms']} "
            f"| {p['bare_ms']} | {p['api_to_bare_ratio']} |"
        )
    lines += [
        "",
        f"Queries per API page constant across page sizes: "
        f"{results['api_queries_constant_across_page_sizes']}.",
        f"All {results['rows']:,} rows through the API at 1,000 a page: "
        f"{results['list_all_10000_via_api_s']} s.",
    ]
    (RESULTS / "quota_requests_api.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    for p in results["pages"]:
        board.row(
            f"list {results['rows']:,} quota requests, {p['page_size']:,} a page",
            portal=p["api_ms"],
            alternative=p["bare_ms"],
            alternative_is="bare values() view, the same rows as JSON",
            unit="ms",
            goal=Goal.ratio_at_most(1.5),
            note=f"{p['api_queries']} SQL queries",
        )


if __name__ == "__main__":
    board = Summary("quota-requests API")
    outcome = run()
    write(outcome)
    record(board, outcome)
    if not outcome["api_queries_constant_across_page_sizes"]:
        sys.exit("API queries per page grow with the page size")
