"""Benchmark: the web tier under load, as users browse it.

1,000 teams, 5,000 grants (with their approved requests), 1,000 pending requests and 20,000 jobs
in PostgreSQL; gunicorn serving the portal as the Dockerfile does (its ASGI worker, 3 workers,
the image's environment with its pool of database connections per worker,
DEBUG off, behind the TLS proxy's ``X-Forwarded-Proto``); 50 users signed in, each browsing
home, one of their teams, the job list, one of their jobs and the usage report (admins, five of
the fifty, the review queue too), with a pause of 0.5 to 1.5 s between pages, as a locust
``between(0.5, 1.5)`` user would. (locust is not installed: the users are asyncio tasks over
httpx, one connection each.) Per page: p50/p95/p99, errors, bytes and the SQL queries one view
of the page runs, for a member of one team and for a lead of twenty (the same count: queries
do not grow with the rows behind a page). The CPU each part used meanwhile (gunicorn's workers,
PostgreSQL, Redis, the users' client) says what bounds the figures on a machine of few CPUs; a
second, lighter load (``BENCH_LOAD_LIGHT_USERS``, 10 users) then shows what the same machine
serves within the goal. Results go to ``bench-results/web_load.{json,md}`` and rows of the
summary table.

Environment: ``BENCH_LOAD_USERS`` (50), ``BENCH_LOAD_SECONDS`` (60), ``BENCH_LOAD_WORKERS``
(3), ``BENCH_LOAD_TEAMS`` (1,000; grants, requests and jobs scale with it) for a quicker run;
``BENCH_LOAD_JOBS_PER_TEAM`` (20) and ``BENCH_LOAD_GOAL_MS`` (200, the p95 goal) for
``make bench-scale``'s 500 teams of 400 jobs.
Run through ``make bench`` (scratch database, DEBUG off).
"""

import asyncio
import datetime
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from clusters.models import Cluster, GpuCapacity  # noqa: E402
from gpujobs.models import GpuJob  # noqa: E402
from tenants.models import Membership, QuotaGrant, QuotaRequest, Team  # noqa: E402
from tests.bench.helpers import (  # noqa: E402
    DATABASE_AND_BROKER,
    CpuMeter,
    bulk_create_in_chunks,
    children_of,
    grants_for,
    in_process_storages,
    percentile,
)
from tests.bench.summary import Goal, Summary, results_dir  # noqa: E402
from tests.dockerfile import dockerfile_environment, gunicorn_arguments  # noqa: E402

TEAMS = int(os.environ.get("BENCH_LOAD_TEAMS", "1000"))
GRANTS_PER_TEAM = 5
PENDING_PER_TEAM = 1
JOBS_PER_TEAM = int(os.environ.get("BENCH_LOAD_JOBS_PER_TEAM", "20"))
USERS = int(os.environ.get("BENCH_LOAD_USERS", "50"))
# A second, lighter load after the first: what the same machine serves within the goal.
LIGHT_USERS = int(os.environ.get("BENCH_LOAD_LIGHT_USERS", "10"))
ADMINS = max(1, USERS // 10)
SECONDS = float(os.environ.get("BENCH_LOAD_SECONDS", "60"))
WORKERS = int(os.environ.get("BENCH_LOAD_WORKERS", "3"))
THINK = (0.5, 1.5)
CLUSTER = "bench-load"
PREFIX = "load-"
RESULTS = results_dir()
BEHIND_TLS_PROXY = {"X-Forwarded-Proto": "https"}
GOAL_P95_MS = int(os.environ.get("BENCH_LOAD_GOAL_MS", "200"))
JOB_STATES = [
    GpuJob.State.SUCCEEDED,
    GpuJob.State.FAILED,
    GpuJob.State.RUNNING,
    GpuJob.State.QUEUED,
    GpuJob.State.CANCELLED,
]
logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
PAGES = ["home", "team", "job list", "job detail", "review queue", "usage"]


def seed() -> None:
    """Everything in bulk, under the ``load-`` prefix on a cluster of its own; kept when a
    previous run left the same amount."""
    cluster, _ = Cluster.objects.get_or_create(name=CLUSTER)
    teams = Team.objects.filter(slug__startswith=PREFIX)
    if (
        teams.count() == TEAMS
        and GpuJob.objects.filter(cluster=cluster).count() == TEAMS * JOBS_PER_TEAM
        and QuotaGrant.objects.filter(cluster=cluster).count() == TEAMS * GRANTS_PER_TEAM
    ):
        return
    GpuJob.objects.filter(cluster=cluster).delete()
    QuotaGrant.objects.filter(cluster=cluster).delete()
    QuotaRequest.objects.filter(cluster=cluster).delete()
    Membership.objects.filter(team__slug__startswith=PREFIX).delete()
    teams.delete()
    GpuCapacity.objects.get_or_create(
        cluster=cluster, resource_name="nvidia.com/gpu", defaults={"allocatable": 100_000}
    )
    admins = [
        User.objects.update_or_create(username=f"{PREFIX}admin-{i}", defaults={"is_staff": True})[0]
        for i in range(ADMINS)
    ]
    users = [User.objects.get_or_create(username=f"{PREFIX}user-{i}")[0] for i in range(USERS)]
    solo = User.objects.get_or_create(username=f"{PREFIX}solo")[0]
    teams = Team.objects.bulk_create(
        [Team(slug=f"{PREFIX}{i}", name=f"Load team {i}") for i in range(TEAMS)], batch_size=1000
    )
    Membership.objects.bulk_create(
        [
            Membership(team=t, user=users[i % USERS], role=Membership.Role.LEAD)
            for i, t in enumerate(teams)
        ]
        + [Membership(team=teams[0], user=solo, role=Membership.Role.MEMBER)],
        batch_size=1000,
    )
    today = timezone.localdate()

    def quota_request(i: int, state: str) -> QuotaRequest:
        team = teams[i % TEAMS]
        return QuotaRequest(
            team=team,
            cluster=cluster,
            gpus=1 + i % 4,
            state=state,
            starts_on=today,
            ends_on=today + datetime.timedelta(days=30 + i % 60),
            justification=f"Load request {i}",
            requested_by=users[(i % TEAMS) % USERS],
        )

    approved = QuotaRequest.objects.bulk_create(
        [quota_request(i, QuotaRequest.State.APPROVED) for i in range(TEAMS * GRANTS_PER_TEAM)],
        batch_size=2000,
    )
    QuotaRequest.objects.bulk_create(
        [quota_request(i, QuotaRequest.State.PENDING) for i in range(TEAMS * PENDING_PER_TEAM)],
        batch_size=2000,
    )
    QuotaGrant.objects.bulk_create(grants_for(approved, granted_by=admins[0]), batch_size=2000)
    bulk_create_in_chunks(
        GpuJob,
        TEAMS * JOBS_PER_TEAM,
        lambda i: GpuJob(
            team=teams[i % TEAMS],
            cluster=cluster,
            submitted_by=users[(i % TEAMS) % USERS],
            name=f"load-job-{i}",
            image="registry.example.com/ml/trainer:1.0",
            gpus=1 + i % 4,
            max_runtime_seconds=3600,
            state=JOB_STATES[i % len(JOB_STATES)],
            command=["python", "train.py"],
        ),
    )
    with connection.cursor() as cursor:  # fresh planner statistics, as autovacuum would gather
        cursor.execute("ANALYZE")


def page_urls(user: User) -> dict[str, str]:
    """A URL of each page the user browses: their first team (an admin's: any), its newest
    job."""
    teams = Team.objects.filter(slug__startswith=PREFIX).order_by("pk")
    team = teams.filter(memberships__user=user).first() or teams[user.pk % TEAMS]
    job = GpuJob.objects.filter(team=team).order_by("-pk").first()
    urls = {
        "home": "/",
        "team": f"/teams/{team.slug}/",
        "job list": "/jobs/",
        "job detail": f"/jobs/{job.pk}/",
        "usage": "/monitoring/usage/",
    }
    if user.is_staff:
        urls["review queue"] = "/review/"
    return urls


@override_settings(
    ALLOWED_HOSTS=["testserver"],
    SECURE_SSL_REDIRECT=False,
    STORAGES=in_process_storages(),
)
def queries_per_page(users: list[User]) -> dict[str, dict[str, int]]:
    """SQL queries of one view of each page, per user (in-process, the same code)."""
    counts: dict[str, dict[str, int]] = {}
    for user in users:
        client = Client()
        client.force_login(user)
        for page, url in page_urls(user).items():
            client.get(url)
            reset_queries()
            with CaptureQueriesContext(connection) as queries:
                response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
            counts.setdefault(page, {})[user.username] = len(queries)
    return counts


def session_cookies(users: list[User]) -> dict[str, str]:
    """A signed-in session per user, made as a login makes it (no password hashing)."""
    cookies = {}
    for user in users:
        client = Client()
        client.force_login(user)
        cookies[user.username] = client.cookies[settings.SESSION_COOKIE_NAME].value
    return cookies


def start_server(log_path: Path) -> tuple[subprocess.Popen, str]:
    """gunicorn as the Dockerfile runs it, after collectstatic (into the ignored default
    ``staticfiles/``: a second run copies nothing)."""
    env = {
        **os.environ,
        **dockerfile_environment(),  # its pool of database connections among them
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
    }
    env.setdefault("DJANGO_SECRET_KEY", "bench-only-secret")
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    port = 18000 + os.getpid() % 1000
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                *gunicorn_arguments(bind=f"127.0.0.1:{port}", workers=WORKERS),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            sys.exit(f"gunicorn did not answer:\n{log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base}/login/", headers=BEHIND_TLS_PROXY, timeout=5).status_code == 200:
                return server, base
        except httpx.HTTPError:
            pass
        time.sleep(0.5)


async def browse(
    base: str, cookie: str, urls: dict[str, str], until: float, seen: list, reconnects: list
) -> None:
    """One user: a page, a pause, another page, until the time is up."""
    headers = {**BEHIND_TLS_PROXY, "Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}
    pages = list(urls)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
        await asyncio.sleep(random.uniform(*THINK))
        while time.monotonic() < until:
            page = random.choice(pages)
            started = time.perf_counter()
            try:
                try:
                    response = await http.get(urls[page])
                except httpx.RemoteProtocolError:
                    # The server closed the kept-alive connection while the user paused
                    # (gunicorn keeps one 2 s): a browser sends the GET again on a new one.
                    reconnects.append(page)
                    response = await http.get(urls[page])
                status, size = response.status_code, len(response.content)
            except httpx.HTTPError as error:
                status, size = type(error).__name__, 0
            seen.append((page, time.perf_counter() - started, status, size))
            await asyncio.sleep(random.uniform(*THINK))


async def load(base: str, browsers: list[tuple[str, dict[str, str]]]) -> tuple[list, list]:
    """Every user browsing at once (cookie, page URLs each); what each request saw."""
    seen: list = []
    reconnects: list = []
    until = time.monotonic() + SECONDS
    await asyncio.gather(
        *(browse(base, cookie, urls, until, seen, reconnects) for cookie, urls in browsers)
    )
    return seen, reconnects


def page_figures(seen: list, queries: dict, solo: User, member: User) -> dict:
    figures = {}
    for page in PAGES:
        rows = [r for r in seen if r[0] == page]
        times = [r[1] * 1000 for r in rows]
        errors = [r for r in rows if r[2] != 200]
        counts = queries.get(page, {})
        figures[page] = {
            "requests": len(rows),
            "errors": len(errors),
            "error_statuses": sorted({str(r[2]) for r in errors}),
            "p50_ms": round(percentile(times, 50) or 0, 1),
            "p95_ms": round(percentile(times, 95) or 0, 1),
            "p99_ms": round(percentile(times, 99) or 0, 1),
            "mean_kib": round(statistics.mean(r[3] for r in rows) / 1024, 1) if rows else 0,
            "queries": counts,
            # A member of one team and a lead of twenty run the same queries: none grows.
            "queries_grow": len({counts[u.username] for u in (solo, member)} - {None}) > 1
            if page != "review queue"
            else False,
        }
    return figures


def measure_load(server, base: str, browsers: list) -> dict:
    """``browsers`` browsing for ``SECONDS``: what each request saw, and the CPU each part
    used meanwhile (gunicorn's workers, PostgreSQL, Redis, and this process: the users)."""
    meter = CpuMeter(
        pids={"gunicorn workers": children_of(server.pid)},
        names=DATABASE_AND_BROKER,
    )
    meter.start()
    started = time.perf_counter()
    seen, reconnects = asyncio.run(load(base, browsers))
    seconds = time.perf_counter() - started
    cpu = meter.stop()
    cpu["the users (this process)"] = cpu.pop("benchmark process")
    serving = cpu["gunicorn workers"] + cpu["PostgreSQL"] + cpu["Redis"]
    return {
        "seen": seen,
        "users": len(browsers),
        "seconds": round(seconds, 1),
        "requests": len(seen),
        "requests_per_s": round(len(seen) / seconds, 1),
        "sent_again_on_a_new_connection": len(reconnects),
        "cpu_seconds": cpu,
        # What serving a page costs the machine, and how many of its CPUs that kept busy.
        "serving_cpu_ms_per_request": round(serving / max(len(seen), 1) * 1000, 1),
        "cpus_busy": round(sum(cpu.values()) / seconds, 2),
        "load_average": [round(n, 2) for n in os.getloadavg()],
    }


def run() -> dict:
    started = time.perf_counter()
    seed()
    seeded_s = time.perf_counter() - started
    admins = list(User.objects.filter(username__startswith=f"{PREFIX}admin-").order_by("pk"))
    members = list(User.objects.filter(username__startswith=f"{PREFIX}user-").order_by("pk"))
    browsing = admins[:ADMINS] + members[: USERS - ADMINS]
    solo = User.objects.get(username=f"{PREFIX}solo")
    queries = queries_per_page([solo, members[0], admins[0]])
    cookies = session_cookies(browsing)
    browsers = [(cookies[u.username], page_urls(u)) for u in browsing]
    # The lighter load: as many admins among its users as among the fifty.
    light_admins = max(1, LIGHT_USERS * ADMINS // USERS)
    light = browsers[:light_admins] + browsers[ADMINS : ADMINS + LIGHT_USERS - light_admins]
    RESULTS.mkdir(exist_ok=True)
    server, base = start_server(RESULTS / "web_load_gunicorn.log")
    try:
        loads = [measure_load(server, base, browsers)]
        if LIGHT_USERS and LIGHT_USERS < USERS:
            loads.append(measure_load(server, base, light))
    finally:
        server.terminate()
        server.wait(timeout=30)
    results = {
        "teams": Team.objects.filter(slug__startswith=PREFIX).count(),
        "grants": QuotaGrant.objects.filter(cluster__name=CLUSTER).count(),
        "pending_requests": QuotaRequest.objects.filter(
            cluster__name=CLUSTER, state=QuotaRequest.State.PENDING
        ).count(),
        "jobs": GpuJob.objects.filter(cluster__name=CLUSTER).count(),
        "seed_s": round(seeded_s, 1),
        "admins": ADMINS,
        "workers": WORKERS,
        "cpus": os.cpu_count(),
        "loads": [],
    }
    for measured in loads:
        seen = measured.pop("seen")
        measured["pages"] = page_figures(seen, queries, solo, members[0])
        results["loads"].append(measured)
    return results


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "web_load.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# The web tier under load",
        "",
        f"{results['teams']:,} teams, {results['grants']:,} grants, "
        f"{results['pending_requests']:,} pending requests, {results['jobs']:,} jobs in "
        f"PostgreSQL (seeded in {results['seed_s']} s). gunicorn, the Dockerfile's ASGI worker "
        f"and environment, {results['workers']} workers, DEBUG off, on {results['cpus']} CPUs "
        "shared with PostgreSQL, Redis and the users' client.",
    ]
    for measured in results["loads"]:
        cpu = measured["cpu_seconds"]
        lines += [
            "",
            f"## {measured['users']} users",
            "",
            f"{measured['users']} users for {measured['seconds']} s, {THINK[0]}–{THINK[1]} s "
            f"between pages: {measured['requests']:,} requests, {measured['requests_per_s']} a "
            f"second ({measured['sent_again_on_a_new_connection']} sent again on a new "
            "connection after the server closed a kept-alive one). CPU meanwhile: "
            + ", ".join(f"{group} {seconds} s" for group, seconds in cpu.items())
            + f"; {measured['cpus_busy']} of {results['cpus']} CPUs busy; serving a page cost "
            f"{measured['serving_cpu_ms_per_request']} ms of CPU (gunicorn, PostgreSQL, Redis). "
            f"Load average at the end {'/'.join(map(str, measured['load_average']))}.",
            "",
            "| page | requests | errors | p50 ms | p95 ms | p99 ms | KiB | queries (member of 1 "
            f"team / lead of {TEAMS // USERS} / admin) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for page, p in measured["pages"].items():
            counts = " / ".join(str(n) for n in p["queries"].values())
            lines.append(
                f"| {page} | {p['requests']} | {p['errors']} | {p['p50_ms']} | {p['p95_ms']} "
                f"| {p['p99_ms']} | {p['mean_kib']} | {counts} |"
            )
    (RESULTS / "web_load.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    for measured in results["loads"]:
        bound = (
            f"serving a page: {measured['serving_cpu_ms_per_request']} ms CPU; "
            f"{measured['cpus_busy']} of {results['cpus']} CPUs busy"
        )
        for page, p in measured["pages"].items():
            counts = "/".join(str(n) for n in p["queries"].values())
            board.row(
                f"{page} page p95, {measured['users']} users on {results['teams']:,} teams, "
                f"{results['jobs']:,} jobs",
                portal=p["p95_ms"],
                unit="ms",
                goal=Goal.portal_at_most(GOAL_P95_MS),
                note=f"p50 {p['p50_ms']} ms, p99 {p['p99_ms']} ms, {p['requests']} requests, "
                f"{p['errors']} errors, {p['mean_kib']} KiB, {counts} SQL queries; {bound}",
            )
        board.row(
            f"errors under load, {measured['users']} users, {measured['requests']:,} requests",
            portal=sum(p["errors"] for p in measured["pages"].values()),
            unit="",
            goal=Goal.portal_at_most(0),
        )


if __name__ == "__main__":
    board = Summary("web tier under load")
    outcome = run()
    write(outcome)
    record(board, outcome)
    if any(p["queries_grow"] for m in outcome["loads"] for p in m["pages"].values()):
        sys.exit("a page's queries grow with the rows behind it")
