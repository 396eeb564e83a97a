"""Benchmark: the watcher's resident memory while it follows 10,000 jobs on one cluster, and
(at a company's scale) how soon it shows a pod that starts running.

10,000 GPU jobs of one team are stored as the worker leaves them once their Job exists
(``submitted``, with the Job's uid) and their Jobs are made on the devcluster from the portal's own
manifests (``gpujobs.manifests.stored_job_manifest``), suspended, so that the devcluster makes no
10,000 pods (it has no kubelet: its simulated nodes would run them all). Then the watcher
(``manage.py watch_jobs``) starts, as production runs it, and lists, watches and records them
all; its resident set (``VmRSS``) is sampled until every row shows what the cluster holds, and
for a while after, and its peak (``VmHWM``) read at the end. The figure beside it is the same
watcher following no job (its floor: Python, Django, the kubernetes client).

With ``BENCH_WATCHER_RUNNING=1`` (``make bench-scale``) the Jobs are not suspended: they run on
``BENCH_WATCHER_GPU_NODES`` simulated nodes of 8 GPUs of their own (625: 5,000 GPUs, beside
``BENCH_WATCHER_CPU_NODES`` CPU nodes), one GPU each, so that as many pods run as there are GPUs
and the rest wait Pending, as a busy company's do. Once the watcher shows them all, the
benchmark deletes ``BENCH_WATCHER_TRANSITIONS`` running Jobs a few a second; each frees a GPU,
on which a waiting pod starts. From the moment a bare pod watch in this process (what
``kubectl get pods -w`` shows) sees such a pod Running to the moment the watcher's row says
Running: p50, p99 and the worst, while it follows the 10,000.

Results go to ``bench-results/watcher_memory.{json,md}`` and rows to the summary. Run through
``make bench`` (a scratch database); ``BENCH_WATCHER_JOBS=2000`` runs smaller. The run's
database must hold no other cluster the watcher would follow.
"""

import json
import os
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_LOG_LEVEL", "WARNING")
# Its pods run on nodes of its own: its namespace must not be one that another benchmark's
# reconcile (under the default name) confines to ``hardware-type=gpu``.
from tests.bench.helpers import run_apart  # noqa: E402

run_apart("watcher")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.utils import timezone  # noqa: E402
from kubernetes import client, watch  # noqa: E402

from clusters.models import Cluster, GpuCapacity  # noqa: E402
from clusters.workloads import WorkloadClient  # noqa: E402
from devcluster import api as devcluster_api  # noqa: E402
from devcluster import nodes  # noqa: E402
from gpujobs import manifests  # noqa: E402
from gpujobs.models import GpuJob  # noqa: E402
from gpujobs.observe import State  # noqa: E402
from gpujobs.specs import JobRequest  # noqa: E402
from tenants.models import Membership, Team  # noqa: E402
from tests.bench.helpers import (  # noqa: E402
    delete_namespace,
    holding,
    make_namespace,
    percentile,
    start,
    stop,
)
from tests.bench.summary import Goal, Summary, results_dir  # noqa: E402

JOBS = int(os.environ.get("BENCH_WATCHER_JOBS", "10000"))
RUNNING = os.environ.get("BENCH_WATCHER_RUNNING", "") not in ("", "0")
GPU_NODES = int(os.environ.get("BENCH_WATCHER_GPU_NODES", "625"))
CPU_NODES = int(os.environ.get("BENCH_WATCHER_CPU_NODES", "50"))
NODE_GPUS = 8
NODE_LABEL = "gpu-watcher-bench"
TRANSITIONS = int(os.environ.get("BENCH_WATCHER_TRANSITIONS", "300"))
TRANSITIONS_PER_SECOND = 5
CREATE_THREADS = 16
GOAL_MB = int(os.environ.get("BENCH_WATCHER_GOAL_MB", "200"))
LATENCY_GOAL_S = 1.0
SETTLE_SECONDS = 20  # sampled this long after every row shows its Job
TIMEOUT = 1200
CLUSTER_NAME = "bench-watcher"
# A row's message until the watcher writes what it sees of the job's Job.
SEEDED = "Seeded by the benchmark; not seen by the watcher yet."
RESULTS = results_dir()


def log(message: str) -> None:
    print(f"[bench_watcher_memory {time.strftime('%H:%M:%S')}] {message}", flush=True)


def memory_mb(pid: int) -> dict[str, float]:
    """The process's resident set now and its peak, in MiB (from /proc)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def seed(cluster: Cluster, slug: str) -> tuple[Team, list[GpuJob]]:
    team = Team.objects.create(slug=slug, name=slug)
    user = User.objects.create(username=f"{slug}-member")
    Membership.objects.create(team=team, user=user, role=Membership.Role.MEMBER)
    request, errors = JobRequest.read(
        {
            "name": "watch",
            "image": "registry.example.com/bench/trainer:1",
            "command": ["python", "train.py"],
            "gpus": 1,
            "max_runtime_seconds": 3600,
        }
    )
    assert not errors, errors
    now = timezone.now()
    GpuJob.objects.bulk_create(
        [
            GpuJob(
                team=team,
                cluster=cluster,
                submitted_by=user,
                state=State.SUBMITTED,
                state_changed_at=now,
                submitted_at=now,
                message=SEEDED,
                **{**request.model_fields(), "name": f"watch-{i}"},
            )
            for i in range(JOBS)
        ],
        batch_size=1000,
    )
    return team, list(
        GpuJob.objects.filter(team=team).select_related("team", "cluster", "submitted_by")
    )


def add_nodes(handle, run_id: str) -> list[str]:
    """The company's simulated nodes, of this run's own: ``GPU_NODES`` of ``NODE_GPUS`` GPUs
    and ``CPU_NODES`` without, Ready."""
    names = [
        handle.add_gpu_node(
            name=f"bench-wm-{run_id}-gpu-{i}",
            gpus=NODE_GPUS,
            labels={"hardware-type": NODE_LABEL},
            wait=False,
        )
        for i in range(GPU_NODES)
    ]
    names += [
        handle.add_cpu_node(name=f"bench-wm-{run_id}-cpu-{i}", wait=False) for i in range(CPU_NODES)
    ]
    nodes.wait_for_ready(handle.api_client(), names, timeout=600)
    return names


def create_jobs(kube: WorkloadClient, jobs: list[GpuJob]) -> float:
    """Each job's Job, many at once (suspended, but for a run of ``RUNNING`` pods); the rows
    get the Jobs' uids."""
    started = time.perf_counter()

    def create(job: GpuJob) -> None:
        manifest = manifests.stored_job_manifest(job)
        manifest["spec"]["suspend"] = not RUNNING
        created, _ = kube.create_job(manifest)
        job.kube_uid = created["metadata"]["uid"]

    with ThreadPoolExecutor(max_workers=CREATE_THREADS) as pool:
        list(pool.map(create, jobs))
    GpuJob.objects.bulk_update(jobs, ["kube_uid"], batch_size=1000)
    return time.perf_counter() - started


def shows_every_job(team: Team) -> bool:
    """Every row of the team observed and, for a run of ``RUNNING`` pods, every Job's pod made
    and as many Running as the nodes have GPUs for (the cluster has started them all, and the
    watcher has seen it)."""
    rows = GpuJob.objects.filter(team=team)
    if rows.filter(message=SEEDED).exists():
        return False
    if RUNNING and rows.filter(state=State.SUBMITTED).exists():  # a Job without its pod yet
        return False
    return not RUNNING or rows.filter(state=State.RUNNING).count() >= min(
        JOBS, GPU_NODES * NODE_GPUS
    )


def follow_watcher(env: dict, logs: Path, team: Team | None, then=None) -> dict:
    """Start the watcher, sample its memory until it shows every job (``team``'s rows all
    observed) and ``SETTLE_SECONDS`` more, run ``then()`` (its figures go under ``"then"``)
    while the watcher still follows them, and stop it."""
    process = start(
        [sys.executable, "manage.py", "watch_jobs", "--discover-every", "1"],
        logs / "watcher.log",
        "following GPU jobs",
        env,
    )
    samples: list[float] = []
    started = time.monotonic()
    caught_up_at = None
    try:
        while time.monotonic() - started < TIMEOUT:
            samples.append(memory_mb(process.pid)["VmRSS"])
            if caught_up_at is None and (team is None or shows_every_job(team)):
                caught_up_at = time.monotonic()
            if caught_up_at is not None and time.monotonic() - caught_up_at > SETTLE_SECONDS:
                break
            time.sleep(0.5)
        else:
            sys.exit(f"the watcher did not show every job within {TIMEOUT} s")
        figures = then() if then is not None else None
        samples.append(memory_mb(process.pid)["VmRSS"])
        peak = memory_mb(process.pid)["VmHWM"]
    finally:
        stop(process)
    return {
        "caught_up_seconds": round(caught_up_at - started, 1),
        "rss_mb_peak": round(peak, 1),
        "rss_mb_at_end": round(samples[-1], 1),
        "rss_mb_max_sampled": round(max(samples), 1),
        **({"then": figures} if figures is not None else {}),
    }


class RunningSeen:
    """A bare watch of the namespace's pods, as ``kubectl get pods -w`` shows them: when this
    process first saw each Job's pod Running (wall-clock seconds, by the Job's uid)."""

    def __init__(self, core, namespace: str) -> None:
        self.core, self.namespace = core, namespace
        self.at: dict[str, float] = {}
        self.gaps = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        since = core.list_namespaced_pod(namespace, limit=1).metadata.resource_version
        self.thread = threading.Thread(target=self._watch, args=(since,), daemon=True)
        self.thread.start()

    def _watch(self, since: str) -> None:
        stream = watch.Watch()
        while not self.stopping.is_set():
            for event in stream.stream(
                self.core.list_namespaced_pod,
                self.namespace,
                resource_version=since,
                timeout_seconds=300,
                allow_watch_bookmarks=True,
            ):
                pod = event["object"]
                if event["type"] == "ERROR" or isinstance(pod, dict):
                    # The API server no longer has ``since`` (410 Gone): go on from now. The
                    # pods that started meanwhile are not counted (``gaps`` says how often).
                    self.gaps += 1
                    since = self.core.list_namespaced_pod(
                        self.namespace, limit=1
                    ).metadata.resource_version
                    break
                since = pod.metadata.resource_version
                uid = (pod.metadata.labels or {}).get("batch.kubernetes.io/controller-uid")
                if uid and pod.status and pod.status.phase == "Running":
                    with self.lock:
                        self.at.setdefault(uid, time.time())
                if self.stopping.is_set():
                    stream.stop()

    def running_since(self, uids: set[str]) -> dict[str, float]:
        with self.lock:
            return {uid: at for uid, at in self.at.items() if uid in uids}

    def stop(self) -> None:
        self.stopping.set()


def transitions(core, batch, team: Team) -> dict:
    """Delete ``TRANSITIONS`` running Jobs, ``TRANSITIONS_PER_SECOND`` a second: each frees a GPU
    on which a waiting pod starts. The time from the bare watch seeing each such pod Running
    to the watcher's row saying so."""
    jobs = GpuJob.objects.filter(team=team)
    waiting = set(jobs.exclude(state=State.RUNNING).values_list("kube_uid", flat=True))
    running = [
        manifests.job_name(pk)
        for pk in jobs.filter(state=State.RUNNING).order_by("pk").values_list("pk", flat=True)
    ]
    pods_before = pod_phases(core, team.slug)
    seen = RunningSeen(core, team.slug)
    started = time.monotonic()
    try:
        for i, name in enumerate(running[:TRANSITIONS]):
            time.sleep(max(0.0, started + i / TRANSITIONS_PER_SECOND - time.monotonic()))
            batch.delete_namespaced_job(name, team.slug, propagation_policy="Background")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            started_pods = seen.running_since(waiting)
            shown = dict(
                jobs.filter(kube_uid__in=started_pods, state=State.RUNNING).values_list(
                    "kube_uid", "state_changed_at"
                )
            )
            if len(started_pods) >= TRANSITIONS and len(shown) == len(started_pods):
                break
            time.sleep(1)
    finally:
        seen.stop()
    latencies = [shown[uid].timestamp() - at for uid, at in started_pods.items() if uid in shown]
    return {
        "pods_before": pods_before,
        "deleted": min(TRANSITIONS, len(running)),
        "watch_gaps": seen.gaps,
        "started": len(started_pods),
        "shown": len(shown),
        "latency_p50_s": round(percentile(latencies, 50), 3) if latencies else None,
        "latency_p99_s": round(percentile(latencies, 99), 3) if latencies else None,
        "latency_max_s": round(max(latencies), 3) if latencies else None,
    }


def run() -> dict:
    handle = devcluster_api.up()
    core = client.CoreV1Api(handle.api_client())
    batch = client.BatchV1Api(handle.api_client())
    run_id = uuid.uuid4().hex[:6]
    slug = f"bench-wm-{run_id}"
    results: dict = {
        "jobs": JOBS,
        "running": RUNNING,
        "cpus": os.cpu_count(),
        "load_at_start": os.getloadavg()[0],
    }
    logs = Path(tempfile.mkdtemp(prefix="bench-watcher-"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # One watcher: no leader election (its Lease would need deploy/namespace.yaml's
    # namespace on the devcluster; tests/integration/gpujobs/test_watcher_replicas.py has it).
    env["GPUJOBS_WATCHER_LEADER_ELECTION"] = "0"
    node_names: list[str] = []
    with holding(handle):
        cluster, _ = Cluster.objects.update_or_create(
            name=CLUSTER_NAME,
            defaults={
                "kubeconfig_path": str(handle.kubeconfig),
                **({"gpu_node_selector": {"hardware-type": NODE_LABEL}} if RUNNING else {}),
            },
        )
        GpuCapacity.objects.get_or_create(cluster=cluster, resource_name="nvidia.com/gpu")
        # The watcher follows every cluster in the database: another benchmark's row for the
        # same devcluster (monitoring keeps one) would make it hold every Job twice.
        results["other_clusters"] = sorted(
            Cluster.objects.exclude(pk=cluster.pk).values_list("name", flat=True)
        )
        try:
            if RUNNING:
                log(f"adding {GPU_NODES} GPU nodes of {NODE_GPUS} GPUs and {CPU_NODES} CPU nodes")
                started = time.perf_counter()
                node_names = add_nodes(handle, run_id)
                results["nodes"] = {
                    "gpu": GPU_NODES,
                    "gpus": GPU_NODES * NODE_GPUS,
                    "cpu": CPU_NODES,
                    "ready_seconds": round(time.perf_counter() - started, 1),
                }
            log("the watcher following no job")
            results["no_jobs"] = follow_watcher(env, logs, None)
            team, jobs = seed(cluster, slug)
            make_namespace(core, slug, gpus=None)
            log(f"creating {JOBS} {'' if RUNNING else 'suspended '}Jobs")
            results["create_seconds"] = round(
                create_jobs(WorkloadClient.for_cluster(cluster), jobs), 1
            )
            log("the watcher following them")
            results["with_jobs"] = follow_watcher(
                env,
                logs,
                team,
                then=(lambda: transitions(core, batch, team)) if RUNNING else None,
            )
        finally:
            log("cleaning up")
            delete_namespace(core, slug, log=log)
            if node_names:
                # Pods on a node that is gone stay Terminating (no kubelet confirms them): the
                # nodes go once their pods have.
                pods_gone(core, slug)
            for name in node_names:
                handle.remove_node(name, wait=False)
            GpuJob.objects.filter(team__slug=slug).delete()
            User.objects.filter(username=f"{slug}-member").delete()
            Team.objects.filter(slug=slug).delete()
            Cluster.objects.filter(name=CLUSTER_NAME).delete()
    results["load_at_end"] = os.getloadavg()[0]
    return results


def pods_gone(core, namespace: str, timeout: float = 900) -> None:
    """Wait until the namespace's pods are deleted; force those left after ``timeout``."""
    deadline = time.monotonic() + timeout
    while core.list_namespaced_pod(namespace, limit=1).items:
        if time.monotonic() > deadline:
            log(f"pods of {namespace} still there after {timeout:.0f} s: forcing them")
            for pod in core.list_namespaced_pod(namespace).items:
                core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
            return
        time.sleep(5)


def pod_phases(core, namespace: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in core.list_namespaced_pod(namespace).items:
        counts[pod.status.phase] = counts.get(pod.status.phase, 0) + 1
    return counts


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "watcher_memory.json").write_text(json.dumps(results, indent=2) + "\n")
    none, full = results["no_jobs"], results["with_jobs"]
    lines = [
        f"# The watcher's memory following {results['jobs']:,} jobs on one cluster",
        "",
        "| | resident MiB, peak | at the end | shows every job after |",
        "| --- | ---: | ---: | ---: |",
        f"| no job | {none['rss_mb_peak']} | {none['rss_mb_at_end']} | — |",
        f"| {results['jobs']:,} {jobs_are(results)} | {full['rss_mb_peak']} "
        f"| {full['rss_mb_at_end']} | {full['caught_up_seconds']} s |",
        "",
        f"Jobs created in {results['create_seconds']} s ({CREATE_THREADS} at a time). Machine: "
        f"{results['cpus']} CPUs, load {results['load_at_start']:.1f} → "
        f"{results['load_at_end']:.1f}. Other clusters in the database, which the watcher "
        f"followed too: {', '.join(results['other_clusters']) or 'none'}.",
    ]
    if results["running"]:
        nodes_made, moved = results["nodes"], full["then"]
        lines += [
            "",
            f"Nodes: {nodes_made['gpu']:,} of {NODE_GPUS} GPUs ({nodes_made['gpus']:,} GPUs) and "
            f"{nodes_made['cpu']} CPU nodes, Ready after {nodes_made['ready_seconds']} s.",
            "",
            "## A waiting pod starts: from a bare pod watch seeing it Running to the watcher's row",
            "",
            f"{moved['deleted']} running Jobs deleted, {TRANSITIONS_PER_SECOND} a second; "
            f"{moved['started']} waiting pods started on the GPUs they freed, "
            f"{moved['shown']} shown Running by the watcher. The bare watch restarted from the "
            f"present {moved['watch_gaps']} times (the API server no longer had its place).",
            "",
            "| p50 | p99 | worst |",
            "| ---: | ---: | ---: |",
            f"| {moved['latency_p50_s']} s | {moved['latency_p99_s']} s "
            f"| {moved['latency_max_s']} s |",
        ]
    (RESULTS / "watcher_memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def jobs_are(results: dict) -> str:
    if not results["running"]:
        return "suspended Jobs"
    phases = results["with_jobs"]["then"]["pods_before"]
    return "Jobs (" + ", ".join(f"{n:,} pods {phase}" for phase, n in sorted(phases.items())) + ")"


def record(board: Summary, results: dict) -> None:
    board.row(
        f"watcher following {results['jobs']:,} jobs on one cluster: resident memory, peak",
        portal=results["with_jobs"]["rss_mb_peak"],
        alternative=results["no_jobs"]["rss_mb_peak"],
        alternative_is="the same watcher following no job",
        unit="MiB",
        goal=Goal.portal_at_most(GOAL_MB),
        note=jobs_are(results) if results["running"] else "",
    )
    if results["running"]:
        moved = results["with_jobs"]["then"]
        board.row(
            f"a waiting pod starts Running → the watcher's row says so, p99, while it follows "
            f"{results['jobs']:,} jobs",
            portal=moved["latency_p99_s"],
            unit="s",
            goal=Goal.portal_at_most(LATENCY_GOAL_S),
            note=f"p50 {moved['latency_p50_s']} s, worst {moved['latency_max_s']} s, "
            f"{moved['shown']} of {moved['started']} pods started; from a bare pod watch",
        )


if __name__ == "__main__":
    board = Summary("watcher memory")
    outcome = run()
    write(outcome)
    record(board, outcome)
