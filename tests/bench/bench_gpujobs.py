"""Benchmark: submit 500 one-GPU jobs through the portal's API on the devcluster, beside creating
the same 500 Jobs with one ``kubectl create -f``.

The portal's side is what production runs: the API (the checks, the team's quota under its row
lock, the rows, the enqueue), a real Celery worker creating the Jobs, and the watcher
(``manage.py watch_jobs``) writing back what the cluster does. The jobs are submitted twice, by
two teams of their own: in one call (``POST /api/v1/jobs/batch/``, as ``kubectl create -f``
creates a list in one call: the like-with-like pair, measured back to back) and then with a call
per job (``POST /api/v1/jobs/``, one after another). It reports

* submission throughput: the API calls (accepted jobs per second), and from the first call to
  the last Job created on the cluster (end to end, through the worker);
* the lag from a pod's state change to the portal showing it: this process watches the pods
  itself and notes when each one is seen Running and Succeeded, and polls the jobs' rows (what
  the pages and the API read) for when each shows ``running`` and ``succeeded``; p50 and p99;
* ``kubectl create -f`` of the same 500 Job manifests (``gpujobs.manifests``, another
  namespace, with the same ResourceQuota as the portal's team namespace) in one call.

The cluster's load is bounded: the jobs run on temporary GPU nodes of their own (labelled
``hardware-type: gpu-bench``, so nobody else's GPU pods land there and the benchmark never takes
the shared nodes' GPUs), each pod finishes 5 s after it starts, and the namespaces and nodes are
removed at the end. Results go to ``bench-results/gpujobs.{json,md}``. Run through ``make
bench`` (a scratch database, DEBUG off); it starts the devcluster if it is not running.
"""

import contextlib
import datetime
import functools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_LOG_LEVEL", "WARNING")
from tests.bench.helpers import run_apart  # noqa: E402

run_apart("gpujobs")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db.models import Max, ProtectedError  # noqa: E402
from django.test import override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402
from kubernetes import client, watch  # noqa: E402

from clusters.models import Cluster, GpuCapacity  # noqa: E402
from clusters.vocabulary import JOB_ID_LABEL  # noqa: E402
from devcluster import api as devcluster_api  # noqa: E402
from devcluster import builder  # noqa: E402
from gpujobs import manifests  # noqa: E402
from gpujobs.models import GpuJob  # noqa: E402
from gpujobs.specs import JobRequest  # noqa: E402
from tenants.models import Membership, QuotaGrant, QuotaRequest, Team  # noqa: E402
from tests.bench.helpers import (  # noqa: E402
    SHARED_SERVICES,
    CpuMeter,
    delete_namespace,
    make_namespace,
    patiently,
    percentile,
    run_kubectl,
    signed_in_client,
    start,
    stop,
)
from tests.bench.summary import Goal, Summary  # noqa: E402
from workloads.manifests import cluster_placement  # noqa: E402
from workloads.specs import ContainerRequest  # noqa: E402

JOBS = int(os.environ.get("BENCH_GPUJOBS", "500"))
# Pairs of the portal's one call and kubectl's, each side's median reported.
RUNS = int(os.environ.get("BENCH_GPUJOBS_RUNS", "5"))
RUN_SECONDS = int(os.environ.get("BENCH_GPUJOBS_RUN_SECONDS", "5"))
NODE_GPUS = 64
NODE_PODS = 110  # the simulated nodes' pod capacity
BENCH_LABEL = "gpu-bench"
CLUSTER_NAME = "bench-gpujobs"
WORKER_THREADS = int(os.environ.get("BENCH_GPUJOBS_WORKER_THREADS", "8"))
TIMEOUT = float(os.environ.get("BENCH_GPUJOBS_TIMEOUT", "900"))
POLL_SECONDS = 0.02
ROW_POLL_MARGIN_SECONDS = 2.0
# The portal's own share of a run's CPU (CpuMeter, beside the shared services): its worker and
# watcher and this process (the API calls, in-process, and the measuring threads; on kubectl's
# side this process is the kubectl it ran).
PORTAL_PROCESSES = ("Celery worker", "watcher", "benchmark process")
RESULTS = REPO_ROOT / "bench-results"


def log(message: str) -> None:
    print(f"[bench_gpujobs {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def summary(values: list[float]) -> dict:
    if not values:
        return {"count": 0, "p50_ms": None, "p99_ms": None, "max_ms": None, "mean_ms": None}
    return {
        "count": len(values),
        "p50_ms": round(percentile(values, 50) * 1000, 1),
        "p99_ms": round(percentile(values, 99) * 1000, 1),
        "max_ms": round(max(values) * 1000, 1) if values else None,
        "mean_ms": round(statistics.fmean(values) * 1000, 1) if values else None,
    }


# --- the cluster -------------------------------------------------------------------------------


def add_bench_nodes(handle, run_id: str) -> list[str]:
    count = max(1, -(-JOBS // min(NODE_GPUS, NODE_PODS - 10)))
    names = []
    for i in range(count):
        names.append(
            handle.add_gpu_node(
                name=f"bench-gpujobs-{run_id}-{i}",
                gpus=NODE_GPUS,
                labels={"hardware-type": BENCH_LABEL},
                wait=False,
            )
        )
    from devcluster import nodes

    nodes.wait_for_ready(handle.api_client(), names)
    return names


class PodWatch(threading.Thread):
    """This process's own watch of a namespace's pods: when each job's pod was first seen
    Running and Succeeded (wall clock), keyed by the job-id label."""

    def __init__(self, api_client, namespace: str):
        super().__init__(daemon=True)
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.seen: dict[str, dict[int, float]] = {"Running": {}, "Succeeded": {}}
        self.stop = threading.Event()
        self.ready = threading.Event()

    def _list_pods(self, *args, **kwargs):
        # No docstring naming a return type: the watch hands each event's object over as
        # parsed JSON, without building a V1Pod (which costs more than the rest of the event),
        # so that this measuring thread takes little CPU from the portal it measures.
        return self.core.list_namespaced_pod(*args, **kwargs)

    def run(self) -> None:
        version = None
        while not self.stop.is_set():
            try:
                if version is None:
                    listed = self.core.list_namespaced_pod(self.namespace)
                    version = listed.metadata.resource_version
                    self.ready.set()
                stream = watch.Watch().stream(
                    self._list_pods,
                    self.namespace,
                    resource_version=version,
                    timeout_seconds=30,
                )
                for event in stream:
                    now = time.time()
                    pod = event["raw_object"]
                    version = pod["metadata"]["resourceVersion"]
                    job_id = (pod["metadata"].get("labels") or {}).get(JOB_ID_LABEL)
                    phase = (pod.get("status") or {}).get("phase")
                    if job_id and phase in self.seen:
                        self.seen[phase].setdefault(int(job_id), now)
                    if self.stop.is_set():
                        return
            except Exception as error:  # the shared cluster's API server may restart
                log(f"pod watch interrupted ({type(error).__name__}); resuming")
                time.sleep(1)


# --- the two sides -----------------------------------------------------------------------------


def seed(cluster: Cluster, slug: str) -> tuple[Team, User]:
    team = Team.objects.create(slug=slug, name=f"Bench {slug}")
    user = User.objects.create(username=f"{slug}-member")
    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    Membership.objects.create(team=team, user=user, role=Membership.Role.MEMBER)
    today = timezone.localdate()
    request = QuotaRequest.objects.create(
        team=team,
        cluster=cluster,
        gpus=JOBS,
        starts_on=today,
        justification="Benchmark.",
        requested_by=user,
        state=QuotaRequest.State.APPROVED,
    )
    QuotaGrant.objects.create(
        request=request,
        team=team,
        cluster=cluster,
        gpus=JOBS,
        starts_on=today,
        granted_by=admin,
    )
    return team, user


def forget(slug: str) -> None:
    """Take the benchmark's rows out of the shared benchmark database (other benchmarks count
    theirs), whatever state the run left them in."""
    from django.db import connection

    from tenants.models import AuditEvent

    connection.close()  # the threads may have left it broken
    team = Team.objects.filter(slug=slug).first()
    if team is None:
        return
    GpuJob.objects.filter(team=team).delete()
    AuditEvent.objects.filter(team=team).delete()
    QuotaGrant.objects.filter(team=team).delete()
    QuotaRequest.objects.filter(team=team).delete()
    User.objects.filter(username=f"{slug}-member").delete()
    team.delete()
    with contextlib.suppress(ProtectedError):  # another run's rows may still name it
        Cluster.objects.filter(name=CLUSTER_NAME).delete()


JOB_FIELDS = {
    "image": "registry.example.com/bench/trainer:1",
    "command": ["python", "train.py"],
    "gpus": 1,
    "max_runtime_seconds": 3600,
    "annotations": {"devcluster.gpuportal.io/complete-after-seconds": str(RUN_SECONDS)},
}


@override_settings(ALLOWED_HOSTS=["testserver"])
def submit_in_one_call(user: User, team: Team, cluster: Cluster) -> tuple[float, float]:
    """``POST /api/v1/jobs/batch/`` of every job: the portal's ``kubectl create -f`` of a list."""
    api = signed_in_client(user)
    body = {
        "team": team.slug,
        "cluster": cluster.name,
        "jobs": [{**JOB_FIELDS, "name": f"bench-{i}"} for i in range(JOBS)],
    }
    started_wall = time.time()
    started = time.perf_counter()
    response = api.post("/api/v1/jobs/batch/", body, content_type="application/json")
    if response.status_code != 201:
        sys.exit(f"the batch submission failed: {response.status_code} {response.content[:500]}")
    return started_wall, time.perf_counter() - started


@override_settings(ALLOWED_HOSTS=["testserver"])
def submit_one_by_one(user: User, team: Team, cluster: Cluster) -> tuple[float, float]:
    """``POST /api/v1/jobs/`` once per job, one after another."""
    api = signed_in_client(user)
    body = {"team": team.slug, "cluster": cluster.name, **JOB_FIELDS}
    started_wall = time.time()
    started = time.perf_counter()
    for i in range(JOBS):
        response = api.post(
            "/api/v1/jobs/", {**body, "name": f"bench-{i}"}, content_type="application/json"
        )
        if response.status_code != 201:
            sys.exit(f"submission {i} failed: {response.status_code} {response.content[:500]}")
    return started_wall, time.perf_counter() - started


class RowPoller(threading.Thread):
    """Polls the jobs' rows (what the pages and the API read) from before the first submission
    until every job ended: when each first showed ``running`` and ``succeeded``, and when the
    last one reached the cluster."""

    def __init__(self, team: Team):
        super().__init__(daemon=True)
        self.team = team
        self.shown: dict[str, dict[int, float]] = {"running": {}, "succeeded": {}}
        self.created_all_at: float | None = None
        self.done_at: float | None = None
        self.error = ""

    def run(self) -> None:
        from django.db import connection

        deadline = time.monotonic() + TIMEOUT
        states: dict[int, str] = {}
        submitted: dict[int, datetime.datetime] = {}
        changed_since = None
        try:
            while time.monotonic() < deadline:
                # Only the rows changed lately (and again those changed within the margin: a
                # change committed just after a poll began may carry an earlier time), so that
                # polling 50 times a second takes little CPU from the portal it measures.
                polled_at = timezone.now()
                rows = GpuJob.objects.filter(team=self.team)
                if changed_since is not None:
                    rows = rows.filter(state_changed_at__gte=changed_since)
                changed = list(rows.values_list("pk", "state", "submitted_at"))
                changed_since = polled_at - datetime.timedelta(seconds=ROW_POLL_MARGIN_SECONDS)
                now = time.time()
                for pk, state, submitted_at in changed:
                    states[pk] = state
                    if submitted_at is not None:
                        submitted[pk] = submitted_at
                    if state in self.shown:
                        self.shown[state].setdefault(pk, now)
                if len(states) == JOBS:
                    if self.created_all_at is None and len(submitted) == JOBS:
                        self.created_all_at = max(submitted.values()).timestamp()
                    if set(states.values()) <= {"succeeded", "failed", "cancelled"}:
                        if self.created_all_at is None:  # a submitted_at set without a change
                            last = GpuJob.objects.filter(team=self.team).aggregate(
                                last=Max("submitted_at")
                            )["last"]
                            self.created_all_at = last.timestamp() if last else None
                        failed = sum(1 for state in states.values() if state != "succeeded")
                        if failed:
                            self.error = f"{failed} benchmark jobs did not succeed"
                        self.done_at = now
                        return
                time.sleep(POLL_SECONDS)
            self.error = f"the benchmark jobs did not all finish within {TIMEOUT:.0f} s"
        finally:
            connection.close()


def lags(pods: PodWatch, shown: dict) -> dict:
    result = {}
    for phase, state in (("Running", "running"), ("Succeeded", "succeeded")):
        values = [
            max(shown[state][job] - seen, 0.0)
            for job, seen in pods.seen[phase].items()
            if job in shown[state]
        ]
        result[state] = summary(values)
    return result


def kubectl_side(kubectl: str, kubeconfig: Path, namespace: str, placement) -> dict:
    """The same Job manifests, in one file, created by one ``kubectl create -f``."""
    items = []
    for i in range(1, JOBS + 1):
        request = JobRequest(
            name=f"bench-{i}",
            main=ContainerRequest(
                image="registry.example.com/bench/trainer:1", command=("python", "train.py")
            ),
            gpus=1,
            max_runtime_seconds=3600,
            annotations=(("devcluster.gpuportal.io/complete-after-seconds", str(RUN_SECONDS)),),
        )
        spec = manifests.JobSpec(
            job_id=i, namespace=namespace, request=request, ttl_seconds_after_finished=600
        )
        items.append(manifests.job_manifest(spec, placement))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, file)
        path = file.name
    with tempfile.TemporaryDirectory(prefix="bench-gpujobs-kubectl-") as cache:
        timing = run_kubectl(
            [kubectl, "--kubeconfig", str(kubeconfig), "create", "-f", path, "-o", "name"],
            cache=Path(cache),
            timeout=TIMEOUT,
        )
    Path(path).unlink()
    created = len(timing.pop("stdout").split())
    return {
        "jobs": created,
        **timing,
        "jobs_per_s": round(created / timing["seconds"], 1),
        "jobs_per_s_creating": round(created / timing["apply_seconds"], 1),
    }


def wait_kubectl_jobs_done(batch, namespace: str, started: float) -> float:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        jobs = batch.list_namespaced_job(namespace).items
        if len(jobs) >= JOBS and all((j.status.succeeded or 0) >= 1 for j in jobs):
            return time.perf_counter() - started
        time.sleep(1)
    sys.exit("the kubectl benchmark jobs did not all finish")


# The portal's two ways of submitting, in the report's words.
PORTAL_SIDES = {
    "portal_one_call": "one `POST /api/v1/jobs/batch/` of every job",
    "portal_call_per_job": "`POST /api/v1/jobs/` once per job, one after another",
}


def kubectl_run(handle, kubectl: str, cluster: Cluster, namespace: str) -> dict:
    """The same Jobs, created by one ``kubectl create -f`` in ``namespace`` of their own, and
    followed until every one succeeded."""
    api_client = handle.api_client()
    # The same ResourceQuota as the portal's team namespace: the cluster's quota admission
    # weighs every pod of either side alike.
    make_namespace(client.CoreV1Api(api_client), namespace, gpus=JOBS)
    # The same watch of the pods as on the portal's side: what measuring costs the cluster and
    # this process is paid on both sides.
    pods = PodWatch(api_client, namespace)
    pods.start()
    if not pods.ready.wait(120):
        sys.exit("could not list the benchmark's pods")
    cpu = CpuMeter(names=SHARED_SERVICES)
    cpu.start()
    started = time.perf_counter()
    result = kubectl_side(kubectl, handle.kubeconfig, namespace, cluster_placement(cluster))
    result["seconds_to_all_succeeded"] = round(
        wait_kubectl_jobs_done(client.BatchV1Api(api_client), namespace, started), 2
    )
    result["cpu_seconds_to_all_succeeded"] = cpu.stop()
    pods.stop.set()
    return result


def median_run(runs: list[dict], figure) -> dict:
    """The run whose ``figure`` is the median (the lower of the two middle ones)."""
    return sorted(runs, key=figure)[(len(runs) - 1) // 2]


def portal_side(handle, core, cluster: Cluster, worker, watcher, *, slug: str, submit) -> dict:
    """Submit the jobs of a team of their own in namespace ``slug`` with ``submit``, and follow
    them until every one succeeded: throughput, lags, and the CPU the run took."""
    team, user = seed(cluster, slug)
    make_namespace(core, slug, gpus=JOBS)
    pods = PodWatch(handle.api_client(), slug)
    pods.start()
    if not pods.ready.wait(120):
        sys.exit("could not list the benchmark's pods")
    rows = RowPoller(team)
    rows.start()
    cpu = CpuMeter(
        pids={"Celery worker": worker.pid, "watcher": watcher.pid}, names=SHARED_SERVICES
    )
    cpu.start()
    started_wall, api_seconds = submit(user, team, cluster)
    log(f"submitted in {api_seconds:.1f} s; following them to the end")
    rows.join(TIMEOUT + 60)
    pods.stop.set()
    if rows.error or rows.done_at is None:
        sys.exit(rows.error or "the row poller did not finish")
    end_to_end = rows.created_all_at - started_wall
    return {
        "api": {
            "seconds": round(api_seconds, 2),
            "jobs_per_s": round(JOBS / api_seconds, 1),
            "ms_per_job": round(api_seconds / JOBS * 1000, 1),
        },
        "end_to_end": {
            "seconds_to_all_jobs_on_cluster": round(end_to_end, 2),
            "jobs_per_s": round(JOBS / end_to_end, 1),
            "seconds_to_all_succeeded": round(rows.done_at - started_wall, 2),
        },
        "cpu_seconds_to_all_succeeded": cpu.stop(),
        "lag_from_pod_change_to_portal": lags(pods, rows.shown),
    }


def run() -> dict:
    handle = devcluster_api.up()
    kubectl = str(builder.binary("kubectl"))
    api_client = handle.api_client()
    core = client.CoreV1Api(api_client)
    run_id = uuid.uuid4().hex[:6]
    portal_namespaces: list[str] = []
    kubectl_namespaces: list[str] = []
    results: dict = {
        "jobs": JOBS,
        "pairs_run": RUNS,
        "run_seconds_per_job": RUN_SECONDS,
        "worker_threads": WORKER_THREADS,
        "cpus": os.cpu_count(),
        "load_average_at_start": round(os.getloadavg()[0], 2),
    }
    log(f"adding GPU nodes for {JOBS} one-GPU jobs")
    nodes = add_bench_nodes(handle, run_id)
    results["bench_nodes"] = {"count": len(nodes), "gpus_each": NODE_GPUS}
    processes = []
    try:
        cluster, _ = Cluster.objects.update_or_create(
            name=CLUSTER_NAME,
            defaults={
                "kubeconfig_path": str(handle.kubeconfig),
                "gpu_node_selector": {"hardware-type": BENCH_LABEL},
                # The image policy is checked as for any cluster: the bench image's registry
                # is the one allowed.
                "allowed_registries": ["registry.example.com"],
                "allow_all_registries": False,
            },
        )
        GpuCapacity.objects.update_or_create(
            cluster=cluster,
            resource_name="nvidia.com/gpu",
            defaults={"allocatable": len(nodes) * NODE_GPUS},
        )

        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GPUJOBS_TTL_SECONDS_AFTER_FINISHED": "600"}
        # One watcher: no leader election (its Lease would need deploy/namespace.yaml's
        # namespace on the devcluster; tests/integration/gpujobs/test_watcher_replicas.py has it).
        env["GPUJOBS_WATCHER_LEADER_ELECTION"] = "0"
        logs = Path(tempfile.mkdtemp(prefix="bench-gpujobs-"))
        processes.append(
            start(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "portal",
                    "worker",
                    "--pool=threads",
                    f"--concurrency={WORKER_THREADS}",
                    "--loglevel=INFO",
                    "--without-gossip",
                    "--without-mingle",
                    "-n",
                    f"bench-{run_id}@%h",
                ],
                logs / "worker.log",
                "ready.",
                {**env, "PORTAL_LOG_LEVEL": "INFO"},
            )
        )
        processes.append(
            start(
                [sys.executable, "manage.py", "watch_jobs", "--discover-every", "1"],
                logs / "watcher.log",
                "following GPU jobs",
                env,
            )
        )
        worker, watcher = processes
        run_portal = functools.partial(portal_side, handle, core, cluster, worker, watcher)

        # The like-with-like pairs first, back to back: the portal's one call and kubectl's,
        # in turn first (the machine's noise shows in the spread of the pairs).
        pairs = []
        for index in range(RUNS):
            pair: dict = {}
            first_kubectl = index % 2 == 1
            for side in ("kubectl_create", "portal_one_call")[:: 1 if first_kubectl else -1]:
                if side == "kubectl_create":
                    namespace = f"bench-gk-{run_id}-{index}"
                    kubectl_namespaces.append(namespace)
                    log(f"pair {index + 1}/{RUNS}: the same Jobs with one kubectl create -f")
                    pair[side] = kubectl_run(handle, kubectl, cluster, namespace)
                else:
                    namespace = f"bench-gb-{run_id}-{index}"
                    portal_namespaces.append(namespace)
                    log(f"pair {index + 1}/{RUNS}: {JOBS} jobs through the API in one call")
                    pair[side] = run_portal(slug=namespace, submit=submit_in_one_call)
            pairs.append(pair)
        results["pairs"] = pairs
        results["portal_one_call"] = median_run(
            [pair["portal_one_call"] for pair in pairs], lambda r: r["end_to_end"]["jobs_per_s"]
        )
        results["kubectl_create"] = median_run(
            [pair["kubectl_create"] for pair in pairs], lambda r: r["jobs_per_s_creating"]
        )

        log(f"submitting {JOBS} jobs through the API, a call each")
        namespace = f"bench-gj-{run_id}"
        portal_namespaces.append(namespace)
        results["portal_call_per_job"] = run_portal(slug=namespace, submit=submit_one_by_one)
        # Only like with like: an API-only figure (accepted and queued) is not divided by
        # kubectl's, which includes creating the Jobs.
        for side in PORTAL_SIDES:
            results[side]["end_to_end_to_kubectl_creating_time_ratio"] = round(
                results[side]["end_to_end"]["seconds_to_all_jobs_on_cluster"]
                / results["kubectl_create"]["apply_seconds"],
                2,
            )
        results["watcher_log_tail"] = (logs / "watcher.log").read_text()[-400:]
    finally:
        for process in processes:
            stop(process)
        log("cleaning up: namespaces, nodes and the benchmark's rows")
        for namespace in portal_namespaces:
            forget(namespace)
            delete_namespace(core, namespace, log=log)
        for namespace in kubectl_namespaces:
            delete_namespace(core, namespace, log=log)
        for name in nodes:
            patiently(
                f"remove node {name}", lambda n=name: handle.remove_node(n, wait=False), log=log
            )
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    results["finished_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return results


def cpu_ms_per_job(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds / JOBS * 1000:.1f}"


def portal_own_cpu(cpu: dict) -> float:
    return sum(cpu[group] for group in PORTAL_PROCESSES)


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    results = {k: v for k, v in results.items() if k != "watcher_log_tail"}
    (RESULTS / "gpujobs.json").write_text(json.dumps(results, indent=2) + "\n")
    kc = results["kubectl_create"]
    lines = [
        f"# Submitting {results['jobs']} one-GPU jobs on the devcluster",
        "",
        f"{results['bench_nodes']['count']} temporary simulated nodes of "
        f"{results['bench_nodes']['gpus_each']} GPUs; every pod finishes "
        f"{results['run_seconds_per_job']} s after it starts. One Celery worker "
        f"({results['worker_threads']} threads) and the watcher, DEBUG off, PostgreSQL; "
        f"{results['cpus']} CPUs shared with everything else (load average "
        f"{results['load_average_at_start']} at the start, {results['load_average_at_end']} at "
        "the end). API calls are made in-process (Django test client). In this order: pairs of "
        "the portal's one call and kubectl's, then the portal's call per job; each side's jobs "
        "in a namespace of their own with the same ResourceQuota, each followed until every job "
        "succeeded before the next.",
        "",
        "| | jobs | seconds | jobs/s |",
        "| --- | ---: | ---: | ---: |",
    ]
    for side, words in PORTAL_SIDES.items():
        api, e2e = results[side]["api"], results[side]["end_to_end"]
        lines += [
            f"| portal API, {words} (accepted and queued) | {results['jobs']} "
            f"| {api['seconds']} | {api['jobs_per_s']} |",
            f"| portal end to end, {words} (first POST to last Job created by the worker) "
            f"| {results['jobs']} | {e2e['seconds_to_all_jobs_on_cluster']} "
            f"| {e2e['jobs_per_s']} |",
        ]
    lines += [
        f"| `kubectl create -f` (one call, same manifests) | {kc['jobs']} | {kc['seconds']} "
        f"| {kc['jobs_per_s']} |",
        f"| of which creating (first write to exit; before it, process start and discovery "
        f"{kc['start_and_discovery_seconds']} s) | {kc['jobs']} | {kc['apply_seconds']} "
        f"| {kc['jobs_per_s_creating']} |",
        "",
        f"The portal's one call and kubectl's ran as {results['pairs_run']} pairs, in turn "
        "first; above, each side's median run. Each pair (jobs/s end to end, portal / kubectl "
        "creating): "
        + "; ".join(
            f"{pair['portal_one_call']['end_to_end']['jobs_per_s']} / "
            f"{pair['kubectl_create']['jobs_per_s_creating']}"
            f" ({'kubectl' if index % 2 else 'portal'} first)"
            for index, pair in enumerate(results["pairs"])
        )
        + ".",
        "",
        "Every job succeeded: "
        + "; ".join(
            f"{results[side]['end_to_end']['seconds_to_all_succeeded']} s after the first POST "
            f"({words})"
            for side, words in PORTAL_SIDES.items()
        )
        + f"; {kc['seconds_to_all_succeeded']} s after `kubectl create` started.",
        "",
        "Lag from a pod's state change (seen by this benchmark's own watch) to the portal "
        "showing it (the job's row, which the pages and the API read):",
        "",
        "| submitted by | pod change | portal state | pods | p50 ms | p99 ms | max ms |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for side, words in PORTAL_SIDES.items():
        lag = results[side]["lag_from_pod_change_to_portal"]
        for phase, state in (("Running", "running"), ("Succeeded", "succeeded")):
            lines.append(
                f"| {words} | {phase} | {state} | {lag[state]['count']} | {lag[state]['p50_ms']} "
                f"| {lag[state]['p99_ms']} | {lag[state]['max_ms']} |"
            )
    lines += [
        "",
        "Pods that went from Pending to Succeeded between two watch events show no Running "
        f"state; the rows are polled every {POLL_SECONDS * 1000:.0f} ms, which bounds the "
        "lags' resolution.",
        "",
        "CPU per job, from the first call until every job succeeded (ms; the machine has "
        f"{results['cpus']} CPUs):",
        "",
        "| process | portal, one call | portal, a call per job | kubectl |",
        "| --- | ---: | ---: | ---: |",
    ]
    one = results["portal_one_call"]["cpu_seconds_to_all_succeeded"]
    each = results["portal_call_per_job"]["cpu_seconds_to_all_succeeded"]
    kubectl = kc["cpu_seconds_to_all_succeeded"]
    for group in [*one, *[g for g in kubectl if g not in one]]:
        lines.append(
            f"| {group} | {cpu_ms_per_job(one.get(group))} | {cpu_ms_per_job(each.get(group))} "
            f"| {cpu_ms_per_job(kubectl.get(group))} |"
        )
    lines.append(
        f"| all | {cpu_ms_per_job(sum(one.values()))} | {cpu_ms_per_job(sum(each.values()))} "
        f"| {cpu_ms_per_job(sum(kubectl.values()))} |"
    )
    lines += [
        "",
        "The benchmark process is, on the portal's side, the API calls (in-process) and the "
        "threads measuring the lags; on kubectl's side, the kubectl it ran and the same watch "
        "of the pods.",
    ]
    (RESULTS / "gpujobs.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    """End to end (API call to Job on the cluster) beside kubectl creating the same Jobs: the
    API-only figure (accepted and queued) is not compared with anything that creates objects.
    One call for every job is kubectl's one ``create -f`` of them all; a call per job is
    reported beside it."""
    one, each = results["portal_one_call"], results["portal_call_per_job"]
    cpu = one["cpu_seconds_to_all_succeeded"]
    kubectl = results["kubectl_create"]
    board.row(
        f"submit {results['jobs']} one-GPU jobs in one API call, end to end",
        note=(
            f"CPU per job until all succeeded: portal {cpu_ms_per_job(sum(cpu.values()))} ms, "
            f"of which its worker, watcher and API call (with this benchmark's measuring) "
            f"{cpu_ms_per_job(portal_own_cpu(cpu))} ms; kubectl "
            f"{cpu_ms_per_job(sum(kubectl['cpu_seconds_to_all_succeeded'].values()))} ms. "
            f"Each side's median of {results['pairs_run']} pairs. "
            f"A call per job: {each['end_to_end']['jobs_per_s']} jobs/s"
        ),
        portal=one["end_to_end"]["jobs_per_s"],
        alternative=kubectl["jobs_per_s_creating"],
        alternative_is=(
            "kubectl create -f of the same Jobs, creating only (+"
            f"{kubectl['start_and_discovery_seconds']} s process start and discovery)"
        ),
        unit="jobs/s",
        goal=Goal.ratio_at_least(1.0),
    )
    board.row(
        "pod Running to portal showing it, p99",
        note=(
            "jobs submitted in one call; a call per job: "
            f"{each['lag_from_pod_change_to_portal']['running']['p99_ms']} ms"
        ),
        portal=one["lag_from_pod_change_to_portal"]["running"]["p99_ms"],
        unit="ms",
        goal=Goal.portal_at_most(1000),
    )


if __name__ == "__main__":
    board = Summary("gpujobs")
    outcome = run()
    write(outcome)
    record(board, outcome)
