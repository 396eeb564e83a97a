"""Benchmark: the API's hot lists beside bare Django views returning the same rows as JSON.

Lists: quota requests (10,000 pending, 5,000 approved), the review queue (the 10,000 pending,
with their cluster's capacity figures), grants (5,000) and jobs (10,000; ``BENCH_API_JOBS``), of
20 teams (``BENCH_API_TEAMS``). For each list and page
size it reports the SQL queries per page (which must not grow with the page) and the median
time per page of the API next to a plain view that returns the same rows with
``QuerySet.values()`` and ``JsonResponse``. Both sides read the signed-in user from the session
(the bare views are ``login_required``); the bare views apply no team scoping, and count the
rows of their whole list as the API's pages do (their ``count``, checked equal on both sides);
the bare review queue reads the capacity figures with the same selectors as the API and writes
them out by hand. For quota requests and the review queue the run checks that both sides answer
the same rows with the same fields and values (``same_json``). The tables are vacuumed and
analyzed before the run, as autovacuum leaves them after a bulk load. Results go to
``bench-results/api_lists.{json,md}`` and rows of the summary table.

Run through ``make bench``, which points DATABASE_URL at a scratch PostgreSQL database and turns
DEBUG off, as in production (DEBUG logs every query, which would slow both sides).
``BENCH_REPEATS`` (default 7) sets the requests per cell (the API and the bare view are compared
over three times as many, in turn), ``BENCH_PAGE_SIZES`` (comma-separated,
default 10,50,100,500,1000) the page sizes.
"""

import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

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

from clusters.models import Cluster, GpuCapacity  # noqa: E402
from gpujobs.models import GpuJob  # noqa: E402
from tenants import review_history  # noqa: E402
from tenants.api.serializers.review import grant_history_data  # noqa: E402
from tenants.models import Membership, QuotaGrant, QuotaRequest, Team  # noqa: E402
from tenants.selectors import (  # noqa: E402
    capacity_summaries,
    granted_in_request_periods,
    model_capacity_summaries,
    review_queue,
)
from tests.bench.helpers import bulk_create_in_chunks, grants_for, in_process_storages  # noqa: E402
from tests.bench.summary import Goal, Summary, results_dir  # noqa: E402

PENDING = 10_000
APPROVED = 5_000
JOBS = int(os.environ.get("BENCH_API_JOBS", "10000"))
TEAMS = int(os.environ.get("BENCH_API_TEAMS", "20"))
CLUSTER = "bench"
PAGE_SIZES = [int(n) for n in os.environ.get("BENCH_PAGE_SIZES", "10,50,100,500,1000").split(",")]
REPEATS = int(os.environ.get("BENCH_REPEATS", "7"))
REVIEW_PAGE_SIZE = 25  # the review page's
RESULTS = results_dir()
QUOTA_COLUMNS = (
    "id",
    "team__slug",
    "cluster__name",
    "gpu_resource",
    "gpu_model",
    "gpus",
    "cpu_cores",
    "memory_gib",
    "starts_on",
    "ends_on",
    "state",
)


def page_of(request, rows, counted):
    """A page of the rows with how many there are in all (``counted``), as the API's pages say
    (their ``count``): the same work on both sides."""
    size = int(request.GET.get("page_size", 50))
    page = int(request.GET.get("page", 1))
    results = list(rows[(page - 1) * size : page * size])
    return JsonResponse({"count": counted.count(), "results": results})


@login_required
def bare_quota_requests(request):
    """The alternative: the same rows, newest first, straight from ``values()``."""
    return page_of(
        request,
        QuotaRequest.objects.order_by("-created_at", "-id").values(
            *QUOTA_COLUMNS,
            "justification",
            "requested_by__username",
            "created_at",
            "decided_by__username",
            "decided_at",
            "decision_note",
        ),
        QuotaRequest.objects.all(),
    )


def figures(summary, *, gpus: int, granted_in_period: int) -> dict:
    """A request's figures for its GPU kind or model, as the API writes them (zeros for a kind
    or model the cluster does not have)."""
    if summary is None:
        return {
            "capacity": 0,
            "plannable": 0,
            "granted": 0,
            "free": 0,
            "granted_in_period": granted_in_period,
            "free_after": -granted_in_period - gpus,
        }
    return {
        "capacity": summary.capacity,
        "plannable": summary.plannable,
        "granted": summary.granted,
        "free": summary.free,
        "granted_in_period": granted_in_period,
        "free_after": summary.plannable - granted_in_period - gpus,
    }


@login_required
def bare_review_queue(request):
    """Pending requests oldest first, how many are pending, and the grants in each one's
    period (read as the API reads them, once a page), each beside its cluster's figures for its
    GPU kind, for its model and for every model of the kind, read by the same selectors as the
    API's and written out by hand, and what each team did with its past grants
    (``tenants.review_history``, as the API reads it, once a page, written by the API's own
    plain writer, ``grant_history_data``, no serializer): the API's fields (no state,
    no decision; no delegation verdict for an admin)."""
    size = int(request.GET.get("page_size", 50))
    page = int(request.GET.get("page", 1))
    kinds = capacity_summaries()
    models = model_capacity_summaries()
    model_rows = {
        key: [
            {
                "resource_name": m.gpu_resource,
                "gpu_model": m.gpu_model,
                "capacity": m.capacity,
                "plannable": m.plannable,
                "granted": m.granted,
                "free": m.free,
                "nodes": m.nodes,
                "max_per_node": m.max_per_node,
            }
            for m in summaries
        ]
        for key, summaries in models.items()
    }
    rows = list(
        review_queue().values(
            *(column for column in QUOTA_COLUMNS if column != "state"),
            "cluster_id",
            "team_id",
            "justification",
            "requested_by__username",
            "created_at",
        )[(page - 1) * size : page * size]
    )
    periods = granted_in_request_periods(SimpleNamespace(pk=row["id"], **row) for row in rows)
    histories = review_history.histories(
        [
            review_history.Ask(
                team_id=row["team_id"],
                cluster_id=row["cluster_id"],
                gpu_resource=row["gpu_resource"],
                gpu_model=row["gpu_model"],
                gpus=row["gpus"],
            )
            for row in rows
        ]
    )
    for row, history in zip(rows, histories, strict=True):
        row.pop("team_id")
        key = (row.pop("cluster_id"), row["gpu_resource"])
        gpus, model = row["gpus"], row["gpu_model"]
        in_period, model_in_period = periods[row["id"]].kind, periods[row["id"]].model
        kind = kinds.get(key)
        row["capacity"] = figures(kind, gpus=gpus, granted_in_period=in_period if kind else 0)
        row["model_capacity"] = None
        if model:
            summary = next((m for m in models.get(key, ()) if m.gpu_model == model), None)
            row["model_capacity"] = figures(summary, gpus=gpus, granted_in_period=model_in_period)
        row["gpu_models"] = model_rows.get(key, [])
        row["delegation"] = None
        row["history"] = None if history is None else grant_history_data(history)
    return JsonResponse({"count": review_queue().count(), "results": rows})


@login_required
def bare_grants(request):
    return page_of(
        request,
        QuotaGrant.objects.order_by("-created_at", "-id").values(
            *QUOTA_COLUMNS,
            "request_id",
            "granted_by__username",
            "created_at",
            "updated_at",
            "ended_at",
        ),
        QuotaGrant.objects.all(),
    )


@login_required
def bare_jobs(request):
    return page_of(
        request,
        GpuJob.objects.order_by("-created_at", "-id").values(
            "id",
            "name",
            "team__slug",
            "cluster__name",
            "submitted_by__username",
            "state",
            "reason",
            "message",
            "node",
            "exit_code",
            "created_at",
            "submitted_at",
            "started_at",
            "finished_at",
            "state_changed_at",
            "image",
            "command",
            "args",
            "env",
            "gpus",
            "gpu_resource",
            "gpu_model",
            "cpu_cores",
            "memory_gib",
            "max_runtime_seconds",
            "backoff_limit",
            "preprocess",
            "annotations",
            "pods",
            "cancelled_by__username",
            "kube_uid",
            "priority",
            "queue_name",
            "admitted_at",
            "preemptions",
            "preempted_at",
            "preempted_by",
            "preemption_reason",
        ),
        GpuJob.objects.all(),
    )


urlpatterns = [
    path("bare/quota-requests/", bare_quota_requests),
    path("bare/review-queue/", bare_review_queue),
    path("bare/quota-grants/", bare_grants),
    path("bare/jobs/", bare_jobs),
    path("", include("portal.urls")),
]

# Lists whose bare view writes the API's JSON field for field (``same_json`` checks it).
SAME_JSON = {"quota requests", "review queue"}


def same_json(api_rows: list[dict], bare_rows: list[dict]) -> bool:
    """Whether the two sides listed the same rows with the same fields and values: a joined
    column under its relation's name (``team__slug`` as ``team``), times to the millisecond
    (``JsonResponse`` writes no more)."""

    def comparable(row: dict) -> dict:
        return {
            key.split("__")[0]: value[:23]
            if isinstance(value, str) and value[10:11] == "T"
            else value
            for key, value in row.items()
        }

    return [comparable(row) for row in api_rows] == [comparable(row) for row in bare_rows]


# (name, API path, bare path, whether a team lead may read it)
LISTS = [
    ("quota requests", "/api/v1/quota-requests/", "/bare/quota-requests/", True),
    ("review queue", "/api/v1/quota-requests/review-queue/", "/bare/review-queue/", False),
    ("quota grants", "/api/v1/quota-grants/", "/bare/quota-grants/", True),
    ("jobs", "/api/v1/jobs/", "/bare/jobs/", True),
]


def seed() -> User:
    """The rows, in bulk, on a cluster of their own; reused if the scratch database has them."""
    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    cluster, _ = Cluster.objects.get_or_create(name=CLUSTER)
    requests = QuotaRequest.objects.filter(cluster=cluster)
    jobs = GpuJob.objects.filter(cluster=cluster)
    if (
        requests.filter(state=QuotaRequest.State.PENDING).count() == PENDING
        and QuotaGrant.objects.filter(cluster=cluster).count() == APPROVED
        and jobs.count() == JOBS
        and jobs.values("team").distinct().count() == TEAMS
        and requests.filter(state=QuotaRequest.State.PENDING, team__slug="bench-0").count()
        > REVIEW_PAGE_SIZE
    ):
        return admin
    jobs.delete()
    QuotaGrant.objects.filter(cluster=cluster).delete()
    requests.delete()
    GpuCapacity.objects.get_or_create(
        cluster=cluster, resource_name="nvidia.com/gpu", defaults={"allocatable": 4096}
    )
    teams = [
        Team.objects.get_or_create(slug=f"bench-{i}", name=f"Bench {i}")[0] for i in range(TEAMS)
    ]
    leads = []
    for i, team in enumerate(teams):
        lead, _ = User.objects.get_or_create(username=f"bench-lead-{i}")
        Membership.objects.get_or_create(team=team, user=lead, role=Membership.Role.LEAD)
        leads.append(lead)
    today = timezone.localdate()

    def quota_request(i: int, state: str) -> QuotaRequest:
        # The first team has two pages of pending requests more, so that the review page
        # filtered to it is full however many teams share the rest.
        first_team = state == QuotaRequest.State.PENDING and i < 2 * REVIEW_PAGE_SIZE
        team = 0 if first_team else i % TEAMS
        return QuotaRequest(
            team=teams[team],
            cluster=cluster,
            gpus=1 + i % 8,
            state=state,
            starts_on=today,
            ends_on=today + datetime.timedelta(days=30 + i % 60),
            justification=f"Benchmark request {i}",
            requested_by=leads[team],
        )

    QuotaRequest.objects.bulk_create(
        [quota_request(i, QuotaRequest.State.PENDING) for i in range(PENDING)], batch_size=2000
    )
    approved = QuotaRequest.objects.bulk_create(
        [quota_request(i, QuotaRequest.State.APPROVED) for i in range(APPROVED)], batch_size=2000
    )
    QuotaGrant.objects.bulk_create(
        grants_for(approved, granted_by=admin, state=QuotaGrant.State.EXPIRED), batch_size=2000
    )
    bulk_create_in_chunks(
        GpuJob,
        JOBS,
        lambda i: GpuJob(
            team=teams[i % TEAMS],
            cluster=cluster,
            submitted_by=leads[i % TEAMS],
            name=f"bench-job-{i}",
            image="registry.example.com/ml/trainer:1.0",
            gpus=1 + i % 4,
            max_runtime_seconds=3600,
            state=GpuJob.State.SUCCEEDED,
            command=["python", "train.py"],
            env=[{"name": "EPOCHS", "value": str(i % 9)}],
        ),
    )
    return admin


def analyze() -> None:
    """The tables as autovacuum leaves them after a bulk load: fresh planner statistics, and
    vacuumed (PostgreSQL vacuums a table that only had rows added too, which lets a count read
    an index alone). Done before every run rather than whenever autovacuum wakes up, so that
    it never lands in the middle of one."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def measure(client: Client, url: str, *, json_rows: bool = True) -> tuple[float, int, int]:
    """Median seconds per request over REPEATS, the queries one request ran, and its row count
    (with ``json_rows`` False: its size in bytes)."""
    client.get(url)  # warm caches and connections
    reset_queries()  # the query log is a bounded deque: start from empty so the count is right
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    query_count = len(queries)  # now: the log is cleared by the next request
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    rows = len(response.json()["results"]) if json_rows else len(response.content)
    timings = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        client.get(url)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings), query_count, rows


def page_measure(client: Client, url: str) -> dict:
    """A page of the portal: median ms over REPEATS, its bytes and its SQL queries."""
    seconds, queries, rows = measure(client, url, json_rows=False)
    return {"ms": round(seconds * 1000, 1), "kib": round(rows / 1024, 1), "queries": queries}


def side_by_side(client: Client, portal_url: str, bare_url: str) -> tuple[float, float]:
    """Median seconds per request of each URL over three times REPEATS requests of each, sent
    in turn (on a shared machine the load moves: both sides must meet the same)."""
    timings: dict[str, list[float]] = {portal_url: [], bare_url: []}
    for _ in range(3 * REPEATS):
        for url, seen in timings.items():
            started = time.perf_counter()
            client.get(url)
            seen.append(time.perf_counter() - started)
    return statistics.median(timings[portal_url]), statistics.median(timings[bare_url])


@override_settings(
    ALLOWED_HOSTS=["testserver"],
    STORAGES=in_process_storages(),
)
def review_page(admin: User) -> dict:
    """The admins' review page over the benchmark's pending requests (its cluster's: the
    scratch database may hold other benchmarks'), and over one team's (more than a page),
    beside the API's review queue at the page's size."""
    client = Client()
    client.force_login(admin)
    pending = review_queue().filter(cluster__name=CLUSTER)
    return {
        "pending": pending.count(),
        "team_pending": pending.filter(team__slug="bench-0").count(),
        "page": page_measure(client, f"/review/?cluster={CLUSTER}"),
        "page_3": page_measure(client, f"/review/?cluster={CLUSTER}&page=3"),
        "team_page": page_measure(client, f"/review/?cluster={CLUSTER}&team=bench-0"),
        "api": page_measure(
            client,
            f"/api/v1/quota-requests/review-queue/?cluster={CLUSTER}&page_size={REVIEW_PAGE_SIZE}",
        ),
    }


@override_settings(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"])
def run() -> dict:
    admin = seed()
    analyze()
    lead = User.objects.get(username="bench-lead-0")
    results = {
        "rows": {
            "quota requests": QuotaRequest.objects.count(),
            "review queue": review_queue().count(),
            "quota grants": QuotaGrant.objects.count(),
            "jobs": GpuJob.objects.count(),
        },
        "repeats": REPEATS,
        "lists": [],
    }
    clients = {"admin": Client(), "lead": Client()}
    clients["admin"].force_login(admin)
    clients["lead"].force_login(lead)
    for name, api, bare, leads_read in LISTS:
        for size in PAGE_SIZES:
            page = 3 if size * 3 <= results["rows"][name] else 1
            query = f"?page_size={size}&page={page}"
            api_s, api_q, api_rows = measure(clients["admin"], api + query)
            lead_s, lead_q = None, None
            if leads_read:
                lead_s, lead_q, _ = measure(clients["lead"], f"{api}?page_size={size}&page=1")
            bare_s, bare_q, bare_rows = measure(clients["admin"], bare + query)
            assert api_rows == bare_rows == size, (name, api_rows, bare_rows, size)
            api_page = clients["admin"].get(api + query).json()
            bare_page = clients["admin"].get(bare + query).json()
            assert api_page["count"] == bare_page["count"], (name, api_page["count"])
            if name in SAME_JSON:
                api_json, bare_json = api_page["results"], bare_page["results"]
                assert same_json(api_json, bare_json), (name, api_json[0], bare_json[0])
            # The comparison itself: the two sides in turn, so that both meet the same load.
            api_s, bare_s = side_by_side(clients["admin"], api + query, bare + query)
            results["lists"].append(
                {
                    "list": name,
                    "page_size": size,
                    "api_queries": api_q,
                    "api_queries_as_team_lead": lead_q,
                    "bare_queries": bare_q,
                    "api_ms": round(api_s * 1000, 2),
                    "api_as_team_lead_ms": lead_s and round(lead_s * 1000, 2),
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
    results["list_all_requests_via_api_s"] = round(time.perf_counter() - started, 3)
    assert listed == results["rows"]["quota requests"], listed
    results["api_queries_constant_across_page_sizes"] = all(
        len({p["api_queries"] for p in results["lists"] if p["list"] == name}) == 1
        for name, *_ in LISTS
    )
    results["review_page"] = review_page(admin)
    return results


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "api_lists.json").write_text(json.dumps(results, indent=2) + "\n")
    rows = ", ".join(f"{count:,} {name}" for name, count in results["rows"].items())
    lines = [
        "# The API's lists vs bare Django JSON views",
        "",
        f"Rows: {rows}. Median of {results['repeats']} requests per cell ({3 * results['repeats']} "
        "of the API and the bare view, in turn), in-process (Django test client), PostgreSQL. "
        "Bare: `values()` and `JsonResponse` behind "
        "`login_required`, no team scoping, no count; the review queue's capacity figures "
        "from the same selectors, written by hand.",
        "",
        "| list | page size | API queries (admin / lead) | bare queries | API ms (admin) "
        "| API ms (lead) | bare ms | API / bare |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in results["lists"]:
        lines.append(
            f"| {p['list']} | {p['page_size']} | {p['api_queries']} / "
            f"{p['api_queries_as_team_lead']} | {p['bare_queries']} | {p['api_ms']} "
            f"| {p['api_as_team_lead_ms']} | {p['bare_ms']} | {p['api_to_bare_ratio']} |"
        )
    lines += [
        "",
        f"Queries per API page constant across page sizes: "
        f"{results['api_queries_constant_across_page_sizes']}.",
        f"All {results['rows']['quota requests']:,} quota requests through the API at 1,000 a "
        f"page: {results['list_all_requests_via_api_s']} s.",
        "",
        "## The admins' review page",
        "",
        "| what | ms | KiB | SQL queries |",
        "| --- | ---: | ---: | ---: |",
    ]
    review = results["review_page"]
    for key, what in [
        ("page", f"/review/?cluster={CLUSTER}, {review['pending']:,} pending"),
        ("page_3", f"/review/?cluster={CLUSTER}&page=3"),
        (
            "team_page",
            f"/review/?cluster={CLUSTER}&team=bench-0, {review['team_pending']:,} pending",
        ),
        ("api", f"the API's review queue, {REVIEW_PAGE_SIZE} a page"),
    ]:
        r = review[key]
        lines.append(f"| {what} | {r['ms']} | {r['kib']} | {r['queries']} |")
    lines += [""]
    (RESULTS / "api_lists.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    for p in results["lists"]:
        board.row(
            f"list {results['rows'][p['list']]:,} {p['list']}, {p['page_size']:,} a page",
            portal=p["api_ms"],
            alternative=p["bare_ms"],
            alternative_is="bare values() view, the same rows as JSON",
            unit="ms",
            goal=Goal.ratio_at_most(1.5),
            note=f"{p['api_queries']} SQL queries",
        )
    review = results["review_page"]
    board.row(
        f"admin review page, {review['pending']:,} pending requests",
        portal=review["page"]["ms"],
        alternative=review["api"]["ms"],
        alternative_is=f"the API's review queue, {REVIEW_PAGE_SIZE} a page",
        unit="ms",
        goal=Goal.portal_at_most(200),
        note=f"{review['page']['kib']} KiB, {review['page']['queries']} SQL queries",
    )
    board.row(
        f"admin review page size, {review['pending']:,} pending vs {review['team_pending']:,}",
        portal=review["page"]["kib"],
        alternative=review["team_page"]["kib"],
        alternative_is=f"the page filtered to one team's {review['team_pending']:,}",
        unit="KiB",
        goal=Goal.ratio_at_most(1.1),
    )


if __name__ == "__main__":
    board = Summary("API lists")
    outcome = run()
    write(outcome)
    record(board, outcome)
    if not outcome["api_queries_constant_across_page_sizes"]:
        sys.exit("API queries per page grow with the page size")
