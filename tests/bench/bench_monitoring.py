"""Benchmark: building the monitoring pages over 7 days of DCGM history for 256 GPUs, beside
the raw PromQL queries those pages run.

The devcluster's Prometheus gets 7 days of history (one sample a minute) for 256 GPUs in 8
team namespaces of 32 GPUs (four 8-GPU pods each, every fourth pod idle), for the four DCGM
metrics the pages chart, and the portal's recording rules (loaded, and evaluated over that
history with promtool, as an operator backfills them). For each window (1h, 24h, 7d) the
benchmark then measures, through Django's test client:

* the team page (one team's 32 GPUs: utilisation, memory, power, temperature, GPUs held vs
  granted, pods and their idle verdict), the pod page (one 8-GPU pod, a line per GPU: the job
  page draws the same charts) and the cluster page (the admins' page: node inventory from the
  Kubernetes API, the utilisation heatmap of every GPU, the teams ranked by GPUs held and by
  utilisation);
* cold: with the portal's cache emptied first, so every query really goes to Prometheus; beside
  the same PromQL queries, recorded while the page was built, sent straight to Prometheus's HTTP
  API by a plain httpx client, all at once from threads as the page sends them (request, Prometheus
  evaluating, response body read; no JSON decoding, no figure): the least any page showing these
  charts must wait for; and the same with the answers decoded as JSON, the least a client that
  draws them must do. The page's side adds Django (session, user, the team's rows), decoding,
  figures, the template, and on the cluster page the Kubernetes API read (run beside the queries);
* warm: the same page again, everything the portal caches still there;
* bytes: the page's HTML, and what goes over the wire with gzip, beside the number of values the
  charts draw;
* the admins' usage page over the history's last days so far: cold (every period's GPU-hours
  measured, from the recording rules' series) beside the two queries an admin runs by hand for
  the same figures over every GPU's series, and warm (only what came after the last settled
  hour is asked).

It also times the raw queries one after another, as the pages sent them before they ran them
concurrently. Its sizes come from the environment: ``BENCH_MONITORING_GPUS`` (256),
``BENCH_MONITORING_DAYS`` (7), ``BENCH_MONITORING_TEAMS`` (8), ``BENCH_MONITORING_GPU_NODES``
(0: simulated 8-GPU nodes of the backfill's names, so that the cluster page's node chart has
them too), ``BENCH_MONITORING_WRITER`` (promtool; ``tsdb``, the Go block writer, for a
company's history), and its goals: ``BENCH_MONITORING_COLD_GOAL`` (1.2 times the raw PromQL),
``BENCH_MONITORING_WARM_GOAL_MS`` (100), ``BENCH_MONITORING_HTML_GOAL_KIB`` (500),
``BENCH_MONITORING_USAGE_COLD_GOAL`` (1.2) and ``BENCH_MONITORING_USAGE_WARM_GOAL_MS`` (100).
``make bench-scale`` sets the company's (``tests/bench/scale.py``). An admin's query by hand
over more samples than Prometheus lets one query load (``--query.max-samples``, 50 million by
default) is split into periods that fit, as the admin would have to. Results go to
``bench-results/monitoring.{json,md}`` (at a company's scale under ``bench-results/scale/``)
and rows to the summary table (``tests/bench/summary.py``). ``BENCH_PROFILE=1`` also writes a
pyinstrument profile of each page, cold and warm, to
``bench-results/monitoring-profile-<page>-<window>-<cold|warm>.txt``.

Run through ``make bench`` (scratch PostgreSQL database, Redis as the cache, DEBUG off). The
backfill is reused by a later run while it still ends within the hour
(``bench-results/monitoring-backfill.json``); ``BENCH_MONITORING_FRESH=1`` writes it again. It
never restarts the shared Prometheus (new blocks load within a minute; rules by a reload), and
old benchmark series are deleted before a new backfill.
"""

import datetime
import gzip
import json
import math
import os
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

import logging  # noqa: E402

import httpx  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402

from clusters import inventory  # noqa: E402
from clusters.models import Cluster, GpuCapacity  # noqa: E402
from devcluster import api as devcluster_api  # noqa: E402
from devcluster import nodes as devcluster_nodes  # noqa: E402
from devcluster.backfill import BackfillSpec  # noqa: E402
from devcluster.settings import Settings  # noqa: E402
from monitoring import promql  # noqa: E402
from monitoring.metrics import metrics_config  # noqa: E402
from monitoring.prometheus import QueryRecord, record_queries  # noqa: E402
from portal.heap import freeze_startup_objects  # noqa: E402
from tenants.models import Membership, Team, TeamCluster  # noqa: E402
from tests.bench.summary import Goal, Summary, results_dir  # noqa: E402

logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per query otherwise

GPUS = int(os.environ.get("BENCH_MONITORING_GPUS", "256"))
DAYS = int(os.environ.get("BENCH_MONITORING_DAYS", "7"))
TEAMS = int(os.environ.get("BENCH_MONITORING_TEAMS", "8"))
GPU_NODES = int(os.environ.get("BENCH_MONITORING_GPU_NODES", "0"))
WRITER = os.environ.get("BENCH_MONITORING_WRITER", "promtool")
NODE_PREFIX = "bench-node"
NODE_GPUS = 8
NAMESPACE_PREFIX = "bench-mon-"
METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
)
WINDOWS = ["1h", "24h", "7d"]
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
PROFILE = os.environ.get("BENCH_PROFILE", "") not in ("", "0")
RESULTS = results_dir()
CLUSTER = "bench-devcluster"
POD = "train-0"  # the first pod of the first team: up to 8 GPUs
COLD_GOAL = float(os.environ.get("BENCH_MONITORING_COLD_GOAL", "1.2"))
WARM_GOAL_MS = float(os.environ.get("BENCH_MONITORING_WARM_GOAL_MS", "100"))
HTML_GOAL_KIB = float(os.environ.get("BENCH_MONITORING_HTML_GOAL_KIB", "500"))
USAGE_COLD_GOAL = float(os.environ.get("BENCH_MONITORING_USAGE_COLD_GOAL", "1.2"))
USAGE_WARM_GOAL_MS = float(os.environ.get("BENCH_MONITORING_USAGE_WARM_GOAL_MS", "100"))
BY_HAND_SECONDS = 60  # the usage page's alternative is measured again while it took less
# What one query may load at most (Prometheus's --query.max-samples, left at its default).
PROMETHEUS_MAX_SAMPLES = 50_000_000
PROMETHEUS_QUERY_TIMEOUT = 120  # and how long one may take (--query.timeout, its default)
SIZE = f"{GPUS:,} GPUs x {DAYS} days"


def log(message: str) -> None:
    print(f"[bench-monitoring {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextmanager
def devcluster_lease():
    """Count as a session using the devcluster while the benchmark runs, as the test fixture
    does, so that the last test session to finish meanwhile does not stop it under us."""
    lease = Settings.from_env().state_dir / "pytest-sessions" / str(os.getpid())
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.touch()
    try:
        yield
    finally:
        lease.unlink(missing_ok=True)


# --- history in Prometheus ---------------------------------------------------------------------


STATE = RESULTS / "monitoring-backfill.json"
HEARTBEAT = promql.RECORDING_RULES_SERIES


def instant(url: str, query: str, at: float | None = None) -> list[dict]:
    params = {"query": query} if at is None else {"query": query, "time": at}
    response = httpx.get(f"{url}/api/v1/query", params=params, timeout=120)
    response.raise_for_status()
    return response.json()["data"]["result"]


def count_at(url: str, query: str, at: float) -> int:
    result = instant(url, f"count({query})", at)
    return int(float(result[0]["value"][1])) if result else 0


def loaded(url: str, state: dict) -> bool:
    """The history and the recorded series are queryable at both ends of the backfill."""
    metrics = f'{{__name__=~"{"|".join(METRICS)}",namespace=~"{NAMESPACE_PREFIX}.*"}}'
    recorded = f'{{__name__=~"namespace:.*",namespace=~"{NAMESPACE_PREFIX}.*"}}'
    ends = (state["start"], state["end"])
    try:
        return all(count_at(url, metrics, t) == GPUS * len(METRICS) for t in ends) and (
            # promtool's first evaluation is a step after the history's first sample
            not state.get("rules")
            or all(count_at(url, recorded, t) > 0 for t in (ends[0] + 300, ends[1]))
        )
    except httpx.TransportError:
        return False  # Prometheus restarting (another session shares the devcluster)


def wait_until_loaded(url: str, state: dict, what: str) -> None:
    deadline = time.monotonic() + 180
    while not loaded(url, state):
        devcluster_api.up()  # reuses a healthy cluster; restarts one someone else stopped
        if time.monotonic() > deadline:
            sys.exit(f"Prometheus did not load the {what} within 3 minutes")
        time.sleep(5)


def first_live_evaluation(url: str, since: float) -> float:
    """When Prometheus itself first evaluated the recording rules after ``since``."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        seconds = int(time.time() - since) + 1
        result = instant(url, f"min_over_time(timestamp({HEARTBEAT})[{seconds}s:1s])")
        if result:
            return float(result[0]["value"][1])
        time.sleep(2)
    sys.exit("Prometheus did not evaluate the recording rules within 2 minutes")


def delete_series(url: str, selector: str) -> None:
    """Drop the series ``selector`` matches from the shared Prometheus (admin API)."""
    httpx.post(
        f"{url}/api/v1/admin/tsdb/delete_series", params={"match[]": selector}, timeout=300
    ).raise_for_status()


def ensure_history(handle, cluster: Cluster) -> dict:
    """7 days of history ending within the last hour, with the recording rules evaluated over
    it (the rules the devcluster loads, for the cluster's layout, metric and exporter pin): the
    last run's, or written now."""
    url = handle.prometheus_url
    rules = promql.recording_rules_labels(metrics_config(cluster))
    if STATE.exists() and not os.environ.get("BENCH_MONITORING_FRESH"):
        previous = json.loads(STATE.read_text())
        age = time.time() - previous["end"]
        if (
            age < 3600
            and previous.get("rules") == rules
            and previous.get("size") == [GPUS, DAYS, TEAMS]
            and loaded(url, previous)
        ):
            log(f"reusing the backfill that ends {age:.0f} s ago")
            return {"backfill": "reused", "ends_seconds_ago": round(age)}
    log("deleting earlier benchmark series, and the record of when the rules ran")
    for match in (f'{{namespace=~"{NAMESPACE_PREFIX}.*"}}', HEARTBEAT):
        delete_series(url, match)
    spec = BackfillSpec(
        days=DAYS,
        gpus=GPUS,
        namespaces=tuple(f"{NAMESPACE_PREFIX}{i}" for i in range(TEAMS)),
        node_prefix=NODE_PREFIX,
        gpus_per_node=NODE_GPUS,
        metrics=METRICS,
    )
    log(f"backfilling {DAYS} days x {GPUS} GPUs x {len(METRICS)} metrics with {WRITER}")
    started = time.perf_counter()
    result = handle.backfill(spec, restart_prometheus=False, writer=WRITER)
    written = time.perf_counter() - started
    log(f"wrote {result.samples:,} samples in {written:.0f} s; waiting for Prometheus to load them")
    state = {
        "start": spec.start_timestamp,
        "end": spec.end_timestamp,
        "size": [GPUS, DAYS, TEAMS],
    }
    wait_until_loaded(url, state, "backfilled blocks")
    raw_loaded = time.perf_counter() - started

    reloaded_at = time.time()
    handle.load_prometheus_rules()
    live_from = first_live_evaluation(url, reloaded_at)
    log("evaluating the recording rules over the history with promtool")
    rules_started = time.perf_counter()
    # From an hour before the history (the rules were "recording" then, with nothing to record,
    # so a 7-day window that starts a little earlier is covered) to where Prometheus took over.
    handle.backfill_rules(start=spec.start_timestamp - 3600, end=int(live_from) - 1)
    state["rules"] = rules
    wait_until_loaded(url, state, "recording rules' blocks")
    RESULTS.mkdir(parents=True, exist_ok=True)
    STATE.write_text(json.dumps(state) + "\n")
    return {
        "backfill": "written",
        "writer": WRITER,
        "samples": result.samples,
        "backfill_seconds": round(written, 1),
        "loaded_after_seconds": round(raw_loaded, 1),
        "rules_backfilled_and_loaded_seconds": round(time.perf_counter() - rules_started, 1),
    }


def compaction_state(url: str) -> tuple[float, float]:
    """Prometheus's compactions so far, and whether it is writing a block now (its own
    metrics)."""
    response = httpx.get(f"{url}/metrics", timeout=30)
    response.raise_for_status()
    values = {}
    for line in response.text.splitlines():
        if not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return (
        values.get("prometheus_tsdb_compactions_total", 0.0),
        values.get("prometheus_tsdb_compaction_populating_block", 0.0),
    )


def forget_other_benchmarks_series(url: str) -> int:
    """Delete the series of the simulated nodes the benchmarks before this one added and
    removed (``make bench-scale`` runs the watcher's and Kueue's 625 nodes each just before):
    10,000 GPUs, twice this history's, whose pods' churn left Prometheus's head 36,000 series
    of each metric, made the cluster page's 1h heatmap query 2 to 7 s, past the portal's
    timeout with the page's other queries beside it. Returns how many GPUs' series there
    were."""
    selector = f'{{Hostname=~"bench-.+",Hostname!~"{NODE_PREFIX}-.+"}}'
    gpus = len(
        instant(url, f"count by (Hostname, gpu) (last_over_time({METRICS[0]}{selector}[3h]))")
    )
    if gpus:
        log(f"deleting the series of {gpus} GPUs that earlier benchmarks' nodes left")
        delete_series(url, selector)
        httpx.post(f"{url}/api/v1/admin/tsdb/clean_tombstones", timeout=300).raise_for_status()
    return gpus


def wait_for_compactions(url: str) -> float:
    """Wait until Prometheus has compacted what the backfill left overlapping (the history's
    blocks and the recorded series' cover the same time), so that no compaction shares the
    machine with the measurements: no block being written, and no compaction for a whole
    compaction cycle (a minute). Returns the seconds waited."""
    started = time.perf_counter()
    quiet_since, last = time.perf_counter(), compaction_state(url)
    while time.perf_counter() - quiet_since < 70:
        if time.perf_counter() - started > 3600:
            sys.exit("Prometheus was still compacting the backfill after an hour")
        time.sleep(5)
        state = compaction_state(url)
        if state != last or state[1]:
            quiet_since, last = time.perf_counter(), state
    waited = time.perf_counter() - started
    log(f"Prometheus compacted the backfill; waited {waited:.0f} s")
    return waited


# --- the portal's side -------------------------------------------------------------------------


def seed(handle) -> tuple[User, User, Cluster, Team]:
    cluster, _ = Cluster.objects.update_or_create(
        name=CLUSTER,
        defaults={
            "prometheus_url": handle.prometheus_url,
            "kubeconfig_path": str(handle.kubeconfig),
        },
    )
    GpuCapacity.objects.update_or_create(
        cluster=cluster, resource_name="nvidia.com/gpu", defaults={"allocatable": GPUS}
    )
    admin, _ = User.objects.get_or_create(username="bench-mon-admin", defaults={"is_staff": True})
    lead, _ = User.objects.get_or_create(username="bench-mon-lead")
    teams = []
    for i in range(TEAMS):
        team, _ = Team.objects.get_or_create(
            slug=f"{NAMESPACE_PREFIX}{i}", defaults={"name": f"Bench team {i}"}
        )
        teams.append(team)
    Membership.objects.get_or_create(team=teams[0], user=lead, defaults={"role": "lead"})
    for team in teams:  # as a reconcile that made their namespaces records it
        TeamCluster.objects.update_or_create(
            team=team,
            cluster=cluster,
            defaults={"status": TeamCluster.Status.IN_SYNC, "namespace_owned": True},
        )
    # No quota rows: the database is shared with bench_api_lists.py, which counts them.
    return admin, lead, cluster, teams[0]


def raw_seconds(
    http: httpx.Client,
    records,
    *,
    concurrently: bool,
    decode: bool = False,
    at_once: int | None = None,
) -> float:
    """The recorded queries, sent again straight to Prometheus: all at once from threads (as
    the page sends them; or ``at_once`` at a time), or one after another; the answers read, and
    with ``decode`` parsed as JSON too (the least a client drawing them must do)."""

    def send(record) -> None:
        response = http.get(record.path, params=record.params)
        response.raise_for_status()
        body = response.read()
        if decode:
            json.loads(body)

    started = time.perf_counter()
    if concurrently:
        with ThreadPoolExecutor(min(len(records), at_once or len(records))) as pool:
            list(pool.map(send, records))
    else:
        for record in records:
            send(record)
    return time.perf_counter() - started


FIGURE = re.compile(r'<script id="figure-[^"]+" type="application/json">(.*?)</script>', re.S)


def values_drawn(html: str) -> tuple[int, int]:
    """The number of values the page's charts draw (a line's points, a heatmap's cells, a
    bar's value), and the bytes of figure JSON it carries."""
    count, size = 0, 0
    for text in FIGURE.findall(html):
        size += len(text.encode())
        for trace in json.loads(text)["data"]:
            key = "z" if trace.get("type") == "heatmap" else "y"
            if trace.get("orientation") == "h":
                key = "x"
            values = trace.get(key) or []
            count += sum(len(v) if isinstance(v, list) else 1 for v in values)
    return count, size


def get(client: Client, url: str):
    response = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200, (url, response.status_code)
    body = response.content
    html = (gzip.decompress(body) if response.get("Content-Encoding") == "gzip" else body).decode()
    assert 'data-testid="metrics-error"' not in html, (url, "Prometheus failed")
    return len(body), html


def timed_get(client: Client, url: str) -> tuple[float, int, str, list]:
    """``get`` timed: seconds, bytes sent, the HTML, and the queries it sent to Prometheus
    (those its client answered from the cache left out)."""
    with record_queries() as recorded:
        started = time.perf_counter()
        sent, html = get(client, url)
        seconds = time.perf_counter() - started
    return seconds, sent, html, [r for r in recorded if not r.cached]


def profile(client: Client, url: str, name: str, *, cold: bool) -> None:
    try:
        from pyinstrument import Profiler
    except ImportError:
        log("BENCH_PROFILE=1 needs pyinstrument (requirements.txt): skipping the profile")
        return
    profiler = Profiler(interval=0.0005)
    profiler.start()
    for _ in range(REPEATS):
        if cold:
            cache.clear()
        client.get(url, HTTP_ACCEPT_ENCODING="gzip")
    profiler.stop()
    path = RESULTS / f"monitoring-profile-{name}-{'cold' if cold else 'warm'}.txt"
    path.write_text(profiler.output_text(unicode=False, color=False))


def measure_page(client: Client, url: str, http: httpx.Client, name: str) -> dict:
    """Median cold page time beside the median raw time of its queries sent concurrently (and
    one after another); median warm page time; bytes."""
    cache.clear()
    client.get(url)  # warm connections, imports and the template cache
    page_times, raw_times, decoded_times, sequential_times, records = [], [], [], [], []
    for _ in range(REPEATS):
        cache.clear()
        seconds, sent, html, records = timed_get(client, url)
        page_times.append(seconds)
        raw_times.append(raw_seconds(http, records, concurrently=True))
        decoded_times.append(raw_seconds(http, records, concurrently=True, decode=True))
        sequential_times.append(raw_seconds(http, records, concurrently=False))
    # Warm: the page again, its queries in the cache. When the window's end moves on meanwhile
    # (to the next whole step, or cache lifetime), the page is cold again: that one is not
    # counted, and the next is warm.
    warm_times = []
    for _ in range(REPEATS * 3):
        seconds, _, _, sent_queries = timed_get(client, url)
        if not sent_queries:
            warm_times.append(seconds)
        if len(warm_times) == REPEATS:
            break
    assert warm_times, (url, "no page was warm")
    if PROFILE:
        profile(client, url, name, cold=True)
        profile(client, url, name, cold=False)
    page, raw = statistics.median(page_times), statistics.median(raw_times)
    values, figure_bytes = values_drawn(html)
    html_bytes = len(html.encode())
    return {
        "url": url,
        "queries": len(records),
        "page_ms": round(page * 1000, 1),
        "raw_promql_concurrent_ms": round(raw * 1000, 1),
        "cold_ratio": round(page / raw, 2),
        "raw_promql_concurrent_decoded_ms": round(statistics.median(decoded_times) * 1000, 1),
        "raw_promql_sequential_ms": round(statistics.median(sequential_times) * 1000, 1),
        "page_warm_ms": round(statistics.median(warm_times) * 1000, 1),
        "html_kib": round(html_bytes / 1024, 1),
        "sent_kib": round(sent / 1024, 1),
        "figure_kib": round(figure_bytes / 1024, 1),
        "values_drawn": values,
        "figure_bytes_per_value": round(figure_bytes / values, 2) if values else None,
        "promql": [r.params["query"] for r in records],
    }


def usage_url() -> tuple[str, datetime.datetime]:
    """The admins' usage report for the history's last whole days so far, in one period (the
    page's "this month so far" on the 7th of a month), and where it starts."""
    first_day = timezone.localdate() - datetime.timedelta(days=DAYS - 1)
    start = datetime.datetime.combine(
        first_day, datetime.time(), tzinfo=timezone.get_current_timezone()
    )
    return f"/monitoring/usage/?start={first_day.isoformat()}&bucket=total", start


def usage_by_hand(cluster: Cluster, start: datetime.datetime) -> list:
    """What an admin runs by hand for the same figures: GPU-hours held and used per namespace,
    over every GPU's series, from the period's start to now (the page's own queries before it
    read the recording rules and kept a period's settled hours). A period over more samples
    than one query may load is asked in parts that fit, each to be summed."""
    config = metrics_config(cluster)
    end = time.time()
    resolution = 60
    samples = GPUS * (end - start.timestamp()) / resolution
    parts = math.ceil(samples / (PROMETHEUS_MAX_SAMPLES // 2))
    length = (end - start.timestamp()) / parts
    return [
        QueryRecord(
            path="/api/v1/query",
            params={
                "query": build(config, period_seconds=length, resolution=resolution, held=True),
                "time": f"{start.timestamp() + length * (part + 1):.3f}",
            },
            seconds=0.0,
            cached=False,
        )
        for build in (promql.gpu_seconds_held, promql.gpu_seconds_used)
        for part in range(parts)
    ]


def measure_usage_page(client: Client, http: httpx.Client, cluster: Cluster) -> dict:
    """The admins' usage page: cold (the cache emptied, so every period's hours are measured;
    from the recording rules' series where they cover it) beside the PromQL an admin runs by
    hand for the same figures, sent concurrently; warm (the page again: only what came after
    the last settled hour is asked); the queries each sent. Parts of a period asked by hand
    go as many at a time as there are CPUs: more would only wait in Prometheus past its query
    timeout (two minutes). They are measured again while they have taken less than a minute
    in all."""
    url, start = usage_url()
    cache.clear()
    client.get(url)  # warm connections, imports and the template cache
    cold_times, raw_times, cold_queries, warm_times, warm_queries = [], [], [], [], []
    for _ in range(REPEATS):
        cache.clear()
        seconds, _, html, sent_queries = timed_get(client, url)
        cold_times.append(seconds)
        cold_queries.append(len(sent_queries))
        if sum(raw_times) < BY_HAND_SECONDS:
            by_hand = usage_by_hand(cluster, start)
            raw_times.append(raw_seconds(http, by_hand, concurrently=True, at_once=os.cpu_count()))
        seconds, _, _, sent_queries = timed_get(client, url)
        warm_times.append(seconds)
        warm_queries.append(len(sent_queries))
    assert "GPU metrics are unavailable" not in html, (url, "Prometheus failed")
    csv_lines = client.get(url.replace("/usage/", "/usage.csv")).content.decode().splitlines()
    header = csv_lines[0].split(",")
    held = {
        cells[0]: float(cells[header.index("held_gpu_hours")])
        for cells in (line.split(",") for line in csv_lines[1:])
        if cells[0].startswith(NAMESPACE_PREFIX)
    }
    assert len(held) == TEAMS, ("not every benchmark team has a row", held)
    assert all(held.values()), ("a benchmark team held nothing", held)
    cold, raw = statistics.median(cold_times), statistics.median(raw_times)
    return {
        "url": url,
        "page_ms": round(cold * 1000, 1),
        "raw_promql_concurrent_ms": round(raw * 1000, 1),
        "cold_ratio": round(cold / raw, 2),
        "page_warm_ms": round(statistics.median(warm_times) * 1000, 1),
        "cold_queries": max(cold_queries),
        "warm_queries": max(warm_queries),
        "queries_by_hand": len(by_hand),
        "by_hand_measured": len(raw_times),
        "promql_by_hand": sorted({r.params["query"] for r in by_hand}),
    }


# Pages name static files; the manifest storage used with DEBUG off would need collectstatic.
PLAIN_STATIC = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


@override_settings(ALLOWED_HOSTS=["testserver"], STORAGES=PLAIN_STATIC)
def run(summary: Summary) -> dict:
    with devcluster_lease():
        handle = devcluster_api.up()
        admin, lead, cluster, team = seed(handle)
        results = {
            "gpus": GPUS,
            "days": DAYS,
            "teams": TEAMS,
            "metrics": list(METRICS),
            "repeats": REPEATS,
            "cache": cache.__class__.__name__,
            "load_average_at_start": summary.load_at_start,
            "cpus": os.cpu_count(),
            **ensure_history(handle, cluster),
            "other_benchmarks_series_deleted": forget_other_benchmarks_series(
                handle.prometheus_url
            ),
            "compactions_waited_seconds": round(wait_for_compactions(handle.prometheus_url)),
            "pages": [],
        }
        clients = {"lead": Client(), "admin": Client()}
        clients["lead"].force_login(lead)
        clients["admin"].force_login(admin)
        # As a served worker does once started (portal/asgi.py): this process is one here.
        freeze_startup_objects()
        with httpx.Client(base_url=cluster.prometheus_url, timeout=300) as http:
            # After the history, so that their live series (unheld) begin where it ends; gone
            # before the usage page, which does not read them, so that the devcluster's
            # simulators following them do not share the machine with its measurements.
            node_names = add_nodes(handle)
            try:
                results["prometheus_warm_up_seconds"] = warm_up(clients, team)
                measure_pages(summary, results, clients, http, cluster, team)
            finally:
                remove_nodes(handle, node_names)
            measure_usage(summary, results, clients["admin"], http, cluster)
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    return results


def add_nodes(handle) -> list[str]:
    """``GPU_NODES`` simulated nodes of ``NODE_GPUS`` GPUs named as the history's, Ready: the
    cluster page's node chart, and its read of the cluster's nodes and pods, at that size."""
    if not GPU_NODES:
        return []
    log(f"adding {GPU_NODES} GPU nodes of {NODE_GPUS} GPUs")
    names = [
        handle.add_gpu_node(name=f"{NODE_PREFIX}-{i}", gpus=NODE_GPUS, wait=False)
        for i in range(GPU_NODES)
    ]
    devcluster_nodes.wait_for_ready(handle.api_client(), names, timeout=600)
    return names


def remove_nodes(handle, names: list[str]) -> None:
    for name in names:
        handle.remove_node(name, wait=False)
    for name in names:
        devcluster_nodes.wait_for_deleted(handle.api_client(), name, timeout=300)


def page_urls(team: Team, window: str) -> list[tuple[str, str, str]]:
    """The monitoring pages measured: (page, who, URL)."""
    query = f"?window={window}&cluster={CLUSTER}"
    return [
        ("team", "lead", f"/monitoring/teams/{team.slug}/{query}"),
        ("pod", "lead", f"/monitoring/teams/{team.slug}/pods/{POD}/{query}"),
        ("cluster", "admin", f"/monitoring/clusters/{CLUSTER}/{query}"),
    ]


def warm_up(clients, team: Team) -> float:
    """Every page once in every window, each query given Prometheus's own time limit: the first
    query over a freshly loaded history can take many times the next (the cluster page's
    heatmap over 5,000 GPUs once took 52 s, past the portal's 10 s, then 2 s), a cost a
    Prometheus serving for a while has paid long before. Returns the seconds it took."""
    log("reading every page once, so that Prometheus has read the history's blocks")
    started = time.perf_counter()
    with override_settings(MONITORING_PROMETHEUS_TIMEOUT=PROMETHEUS_QUERY_TIMEOUT):
        for window in WINDOWS:
            for _, who, url in page_urls(team, window):
                cache.clear()
                get(clients[who], url)
    return round(time.perf_counter() - started, 1)


def measure_pages(summary: Summary, results: dict, clients, http, cluster, team) -> None:
    """Each page, cold and warm, beside its raw PromQL; then the cluster page's Kubernetes
    read on its own."""
    for window in WINDOWS:
        for page, who, url in page_urls(team, window):
            log(f"{page} page, {window}")
            outcome = measure_page(clients[who], url, http, f"{page}-{window}")
            results["pages"].append({"page": page, "window": window, **outcome})
            record_rows(
                summary,
                f"{page} page, {window}, {SIZE}",
                outcome,
                alternative_is=(f"its {outcome['queries']} PromQL queries, concurrently, raw"),
            )
            if page == "cluster":
                summary.row(
                    f"{page} page, {window}, {SIZE}: HTML",
                    portal=outcome["html_kib"],
                    unit="KiB",
                    goal=Goal.portal_at_most(HTML_GOAL_KIB),
                )
    timings = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        nodes = inventory.gpu_nodes(cluster)
        timings.append(time.perf_counter() - started)
    results["cluster_page_kubernetes_read_ms"] = round(statistics.median(timings) * 1000, 1)
    results["cluster_nodes"] = len(nodes)


def measure_usage(summary: Summary, results: dict, admin_client, http, cluster) -> None:
    log("usage page")
    results["usage"] = measure_usage_page(admin_client, http, cluster)
    by_hand = results["usage"]["queries_by_hand"]
    record_rows(
        summary,
        f"usage page (admin), {DAYS} days so far, {GPUS:,} GPUs of {TEAMS} teams",
        results["usage"],
        alternative_is=(
            f"GPU-hours held and used by hand: {by_hand} PromQL queries, raw"
            + (
                f" (the period in {by_hand // 2} parts, as one query may load "
                f"{PROMETHEUS_MAX_SAMPLES:,} samples; {os.cpu_count()} at a time; "
                f"measured {results['usage']['by_hand_measured']} times)"
                if by_hand > 2
                else ""
            )
        ),
        cold_goal=USAGE_COLD_GOAL,
        warm_goal_ms=USAGE_WARM_GOAL_MS,
    )


def record_rows(
    summary: Summary,
    work: str,
    outcome: dict,
    *,
    alternative_is: str,
    cold_goal: float = COLD_GOAL,
    warm_goal_ms: float = WARM_GOAL_MS,
) -> None:
    """A page's two rows: cold beside its raw PromQL, and warm."""
    summary.row(
        f"{work}, cold",
        portal=outcome["page_ms"],
        alternative=outcome["raw_promql_concurrent_ms"],
        alternative_is=alternative_is,
        unit="ms",
        goal=Goal.ratio_at_most(cold_goal),
    )
    summary.row(
        f"{work}, warm",
        portal=outcome["page_warm_ms"],
        unit="ms",
        goal=Goal.portal_at_most(warm_goal_ms),
    )


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "monitoring.json").write_text(json.dumps(results, indent=2) + "\n")
    history = (
        f"reused a backfill ending {results['ends_seconds_ago']} s before the run"
        if results["backfill"] == "reused"
        else f"{results['samples']:,} samples written by {results['writer']} in "
        f"{results['backfill_seconds']} s, "
        f"queryable after {results['loaded_after_seconds']} s; the recording rules evaluated "
        f"over them and loaded in {results['rules_backfilled_and_loaded_seconds']} s"
    )
    history += (
        f"; the series of {results['other_benchmarks_series_deleted']} GPUs that earlier "
        "benchmarks' nodes left deleted"
        f"; Prometheus's compactions waited out ({results['compactions_waited_seconds']} s), "
        f"then every page read once ({results['prometheus_warm_up_seconds']} s) before measuring"
    )
    lines = [
        f"# Monitoring pages over {results['days']} days of DCGM history for "
        f"{results['gpus']} GPUs",
        "",
        f"{results['teams']} teams of {results['gpus'] // results['teams']} GPUs, one sample a "
        f"minute for {', '.join(results['metrics'])} ({history}). Median of "
        f"{results['repeats']} page builds (Django test client, DEBUG off, cache: "
        f"{results['cache']}). Cold: the portal's cache emptied before each, beside the same "
        "PromQL sent straight to Prometheus by httpx, concurrently from threads as the page sends "
        "it (body read, not decoded; and once more also decoded as JSON); the queries one after "
        "another for reference. Warm: the "
        "page again with its cache in place. Sent: the response with gzip. Load average "
        f"{results['load_average_at_start']} at the start, {results['load_average_at_end']} at "
        f"the end, {results['cpus']} CPUs.",
        "",
        "| page | window | queries | cold ms | raw concurrent ms | cold / raw | raw + JSON "
        "decoding ms | raw one by one ms | warm ms | HTML KiB | sent KiB | values drawn | figure "
        "bytes / value |",
        "| --- | --- " + "| ---: " * 11 + "|",
    ]
    for p in results["pages"]:
        lines.append(
            f"| {p['page']} | {p['window']} | {p['queries']} | {p['page_ms']} | "
            f"{p['raw_promql_concurrent_ms']} | {p['cold_ratio']} | "
            f"{p['raw_promql_concurrent_decoded_ms']} | "
            f"{p['raw_promql_sequential_ms']} | {p['page_warm_ms']} | {p['html_kib']} | "
            f"{p['sent_kib']} | {p['values_drawn']:,} | {p['figure_bytes_per_value']} |"
        )
    usage = results["usage"]
    lines += [
        "",
        f"The admins' usage page ({usage['url']}, every team): cold {usage['page_ms']} ms "
        f"({usage['cold_queries']} queries), beside {usage['raw_promql_concurrent_ms']} ms for "
        f"the GPU-hours held and used by hand over every GPU's series "
        f"({usage['queries_by_hand']} queries; {usage['cold_ratio']}×); "
        f"warm {usage['page_warm_ms']} ms ({usage['warm_queries']} queries: the hours since the "
        "last settled hour).",
    ]
    lines += [
        "",
        f"The cluster page also reads the cluster's nodes and pods from the Kubernetes API "
        f"(beside its queries): {results['cluster_page_kubernetes_read_ms']} ms for "
        f"{results['cluster_nodes']} GPU nodes, in the cluster page's time, not in the raw "
        "PromQL time.",
    ]
    (RESULTS / "monitoring.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def forget_cluster() -> None:
    """Remove the benchmark's Cluster row: a later benchmark on the same database (the web
    tier's admins see every cluster) would otherwise read this Prometheus and its backfill
    of 256 GPUs on its pages. The next run makes the row again."""
    Cluster.objects.filter(name=CLUSTER).delete()


if __name__ == "__main__":
    try:
        write(run(Summary("monitoring")))
    finally:
        forget_cluster()
