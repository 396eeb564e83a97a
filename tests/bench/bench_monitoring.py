"""Benchmark: building the monitoring pages over 7 days of DCGM history for 256 GPUs, beside
the raw PromQL queries those pages run.

The devcluster's Prometheus gets 7 days of history (one sample a minute) for 256 GPUs in 8
team namespaces of 32 GPUs (four 8-GPU pods each, every fourth pod idle), for the four DCGM
metrics the pages chart. For each window (1h, 24h, 7d) the benchmark then times

* the team page (one team's 32 GPUs: utilisation, memory, power, temperature, GPUs held vs
  granted, pods and their idle verdict) and the cluster page (the admins' page: node inventory
  from the Kubernetes API, the utilisation heatmap of every GPU, the teams ranked by GPUs held and
  by utilisation), through Django's test client with the portal's cache emptied first, so every
  query really goes to Prometheus;
* the same PromQL queries, recorded while the page was built, sent straight to Prometheus's
  HTTP API with httpx (request and response body, no JSON decoding): the least any page
  showing these charts must wait for.

The ratio page / raw is the portal's overhead (decoding, figure building with plotly, template
rendering, the database). The cluster page's Kubernetes read is timed on its own too. Results go
to ``bench-results/monitoring.{json,md}``.

Run through ``make bench`` (scratch PostgreSQL database, DEBUG off). The backfill is reused by
a later run while it still ends within the hour (``bench-results/monitoring-backfill.json``);
``BENCH_MONITORING_FRESH=1`` writes it again. It never restarts the shared Prometheus (which
loads new blocks within a minute), and old benchmark series are deleted before a new backfill.
"""

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

import httpx  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.test import Client, override_settings  # noqa: E402

from clusters import inventory  # noqa: E402
from clusters.models import Cluster, GpuCapacity  # noqa: E402
from devcluster import api as devcluster_api  # noqa: E402
from devcluster.backfill import BackfillSpec  # noqa: E402
from monitoring.prometheus import record_queries  # noqa: E402
from tenants.models import Membership, Team  # noqa: E402

GPUS = 256
DAYS = 7
TEAMS = 8
NAMESPACE_PREFIX = "bench-mon-"
METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
)
WINDOWS = ["1h", "24h", "7d"]
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
RESULTS = REPO_ROOT / "bench-results"
CLUSTER = "bench-devcluster"


def log(message: str) -> None:
    print(f"[bench-monitoring {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- history in Prometheus ---------------------------------------------------------------------


STATE = RESULTS / "monitoring-backfill.json"


def series_at(url: str, at: float) -> int:
    """How many of the benchmark's series (GPUs x metrics) have a sample at ``at``."""
    selector = f'{{__name__=~"{"|".join(METRICS)}",namespace=~"{NAMESPACE_PREFIX}.*"}}'
    response = httpx.get(
        f"{url}/api/v1/query", params={"query": f"count({selector})", "time": at}, timeout=120
    )
    response.raise_for_status()
    result = response.json()["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


def loaded(url: str, spec: dict) -> bool:
    expected = GPUS * len(METRICS)
    try:
        return all(series_at(url, t) == expected for t in (spec["start"], spec["end"]))
    except httpx.TransportError:
        return False  # Prometheus restarting (another session shares the devcluster)


def ensure_history(handle) -> dict:
    """7 days of history ending within the last hour: the last run's, or written now."""
    url = handle.prometheus_url
    if STATE.exists() and not os.environ.get("BENCH_MONITORING_FRESH"):
        previous = json.loads(STATE.read_text())
        age = time.time() - previous["end"]
        if age < 3600 and loaded(url, previous):
            log(f"reusing the backfill that ends {age:.0f} s ago")
            return {"backfill": "reused", "ends_seconds_ago": round(age)}
    log("deleting earlier benchmark series")
    httpx.post(
        f"{url}/api/v1/admin/tsdb/delete_series",
        params={"match[]": f'{{namespace=~"{NAMESPACE_PREFIX}.*"}}'},
        timeout=120,
    ).raise_for_status()
    spec = BackfillSpec(
        days=DAYS,
        gpus=GPUS,
        namespaces=tuple(f"{NAMESPACE_PREFIX}{i}" for i in range(TEAMS)),
        node_prefix="bench-node",
        metrics=METRICS,
    )
    log(f"backfilling {DAYS} days x {GPUS} GPUs x {len(METRICS)} metrics")
    started = time.perf_counter()
    result = handle.backfill(spec, restart_prometheus=False)
    written = time.perf_counter() - started
    log(f"wrote {result.samples:,} samples in {written:.0f} s; waiting for Prometheus to load them")
    state = {"start": spec.start_timestamp, "end": spec.end_timestamp}
    deadline = time.monotonic() + 180
    while not loaded(url, state):
        devcluster_api.up()  # reuses a healthy cluster; restarts one someone else stopped
        if time.monotonic() > deadline:
            sys.exit("Prometheus did not load the backfilled blocks within 3 minutes")
        time.sleep(5)
    RESULTS.mkdir(exist_ok=True)
    STATE.write_text(json.dumps(state) + "\n")
    return {
        "backfill": "written",
        "samples": result.samples,
        "backfill_seconds": round(written, 1),
        "loaded_after_seconds": round(time.perf_counter() - started, 1),
    }


# --- the portal's side -------------------------------------------------------------------------


def seed(handle) -> tuple[User, User, Cluster, Team]:
    cluster, _ = Cluster.objects.update_or_create(
        name=CLUSTER,
        defaults={
            "prometheus_url": handle.prometheus_url,
            "kubeconfig_path": str(handle.kubeconfig),
        },
    )
    GpuCapacity.objects.get_or_create(
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
    # No quota rows: the database is shared with bench_quota_requests_api.py, which counts them.
    return admin, lead, cluster, teams[0]


def raw_seconds(base_url: str, records) -> float:
    """The recorded queries, sent again straight to Prometheus, one after another."""
    started = time.perf_counter()
    with httpx.Client(base_url=base_url, timeout=120) as http:
        for record in records:
            response = http.get(record.path, params=record.params)
            response.raise_for_status()
            response.read()
    return time.perf_counter() - started


def measure_page(client: Client, url: str, prometheus_url: str) -> dict:
    """Median page time (cache emptied first) beside the median raw time of its queries."""
    cache.clear()
    client.get(url)  # warm connections, imports and the template cache
    page_times, raw_times, records = [], [], []
    for _ in range(REPEATS):
        cache.clear()
        with record_queries() as recorded:
            started = time.perf_counter()
            response = client.get(url)
            page_times.append(time.perf_counter() - started)
        assert response.status_code == 200, (url, response.status_code)
        body = response.content.decode()
        assert 'data-testid="metrics-error"' not in body, (url, "Prometheus failed")
        records = [r for r in recorded if not r.cached]
        raw_times.append(raw_seconds(prometheus_url, records))
    cache.clear()
    client.get(url)
    started = time.perf_counter()
    client.get(url)  # every query answered from the portal's cache
    cached = time.perf_counter() - started
    page, raw = statistics.median(page_times), statistics.median(raw_times)
    return {
        "url": url,
        "queries": len(records),
        "page_ms": round(page * 1000, 1),
        "raw_promql_ms": round(raw * 1000, 1),
        "overhead_ratio": round(page / raw, 2),
        "page_cached_ms": round(cached * 1000, 1),
        "html_kib": round(len(body.encode()) / 1024, 1),
        "promql": [r.params["query"] for r in records],
    }


# Pages name static files; the manifest storage used with DEBUG off would need collectstatic.
PLAIN_STATIC = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


@override_settings(ALLOWED_HOSTS=["testserver"], STORAGES=PLAIN_STATIC)
def run() -> dict:
    handle = devcluster_api.up()
    admin, lead, cluster, team = seed(handle)
    results = {
        "gpus": GPUS,
        "days": DAYS,
        "teams": TEAMS,
        "metrics": list(METRICS),
        "repeats": REPEATS,
        **ensure_history(handle),
        "pages": [],
    }
    clients = {"lead": Client(), "admin": Client()}
    clients["lead"].force_login(lead)
    clients["admin"].force_login(admin)
    for window in WINDOWS:
        for page, who, url in (
            ("team", "lead", f"/monitoring/teams/{team.slug}/?window={window}&cluster={CLUSTER}"),
            ("cluster", "admin", f"/monitoring/clusters/{CLUSTER}/?window={window}"),
        ):
            log(f"{page} page, {window}")
            outcome = measure_page(clients[who], url, cluster.prometheus_url)
            results["pages"].append({"page": page, "window": window, **outcome})
    timings = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        nodes = inventory.gpu_nodes(cluster)
        timings.append(time.perf_counter() - started)
    results["cluster_page_kubernetes_read_ms"] = round(statistics.median(timings) * 1000, 1)
    results["cluster_nodes"] = len(nodes)
    return results


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "monitoring.json").write_text(json.dumps(results, indent=2) + "\n")
    history = (
        f"reused a backfill ending {results['ends_seconds_ago']} s before the run"
        if results["backfill"] == "reused"
        else f"{results['samples']:,} samples written in {results['backfill_seconds']} s, "
        f"queryable after {results['loaded_after_seconds']} s"
    )
    lines = [
        f"# Monitoring pages over {results['days']} days of DCGM history for "
        f"{results['gpus']} GPUs",
        "",
        f"{results['teams']} teams of {results['gpus'] // results['teams']} GPUs, one sample a "
        f"minute for {', '.join(results['metrics'])} ({history}). Median of "
        f"{results['repeats']} page builds (Django test client, DEBUG off, the portal's cache "
        "emptied before each) beside the median of sending the same PromQL straight to "
        "Prometheus (httpx, one query after another, body read, not decoded).",
        "",
        "| page | window | PromQL queries | page ms | raw PromQL ms | page / raw | page, cached ms "
        "| HTML KiB |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in results["pages"]:
        lines.append(
            f"| {p['page']} | {p['window']} | {p['queries']} | {p['page_ms']} | "
            f"{p['raw_promql_ms']} | {p['overhead_ratio']} | {p['page_cached_ms']} | "
            f"{p['html_kib']} |"
        )
    lines += [
        "",
        f"The cluster page also reads the cluster's nodes and pods from the Kubernetes API: "
        f"{results['cluster_page_kubernetes_read_ms']} ms for {results['cluster_nodes']} GPU "
        "nodes (inside the cluster page's time, not in the raw PromQL time).",
    ]
    (RESULTS / "monitoring.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    write(run())
