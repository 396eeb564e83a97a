"""Benchmark: the watcher's resident memory while it follows 10,000 jobs on one cluster.

10,000 GPU jobs of one team are stored as the worker leaves them once their Job exists
(``submitted``, with the Job's uid) and their Jobs are made on the devcluster from the portal's own
manifests (``gpujobs.manifests.stored_job_manifest``), suspended, so that the devcluster makes no
10,000 pods (it has no kubelet: its simulated nodes would run them all). Then the watcher
(``manage.py watch_jobs``) starts, as production runs it, and lists, watches and records them
all; its resident set (``VmRSS``) is sampled until every row shows what the cluster holds, and
for a while after, and its peak (``VmHWM``) read at the end. The figure beside it is the same
watcher following no job (its floor: Python, Django, the kubernetes client).

Results go to ``bench-results/watcher_memory.{json,md}`` and a row to the summary. Run through
``make bench`` (a scratch database); ``BENCH_WATCHER_JOBS=2000`` runs smaller. The run's
database must hold no other cluster the watcher would follow.
"""

import json
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.utils import timezone  # noqa: E402
from kubernetes import client  # noqa: E402

from clusters.models import Cluster, GpuCapacity  # noqa: E402
from clusters.workloads import WorkloadClient  # noqa: E402
from devcluster import api as devcluster_api  # noqa: E402
from gpujobs import manifests  # noqa: E402
from gpujobs.models import GpuJob  # noqa: E402
from gpujobs.observe import State  # noqa: E402
from gpujobs.specs import JobRequest  # noqa: E402
from tenants.models import Membership, Team  # noqa: E402
from tests.bench.helpers import (  # noqa: E402
    delete_namespace,
    holding,
    make_namespace,
    start,
    stop,
)
from tests.bench.summary import Goal, Summary  # noqa: E402

JOBS = int(os.environ.get("BENCH_WATCHER_JOBS", "10000"))
CREATE_THREADS = 16
GOAL_MB = 200
SETTLE_SECONDS = 20  # sampled this long after every row shows its Job
TIMEOUT = 1200
CLUSTER_NAME = "bench-watcher"
# A row's message until the watcher writes what it sees of the job's Job.
SEEDED = "Seeded by the benchmark; not seen by the watcher yet."
RESULTS = REPO_ROOT / "bench-results"


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


def create_jobs(kube: WorkloadClient, jobs: list[GpuJob]) -> float:
    """Each job's Job, suspended, many at once; the rows get the Jobs' uids."""
    started = time.perf_counter()

    def create(job: GpuJob) -> None:
        manifest = manifests.stored_job_manifest(job)
        manifest["spec"]["suspend"] = True
        created, _ = kube.create_job(manifest)
        job.kube_uid = created["metadata"]["uid"]

    with ThreadPoolExecutor(max_workers=CREATE_THREADS) as pool:
        list(pool.map(create, jobs))
    GpuJob.objects.bulk_update(jobs, ["kube_uid"], batch_size=1000)
    return time.perf_counter() - started


def follow_watcher(env: dict, logs: Path, team: Team | None) -> dict:
    """Start the watcher, sample its memory until it shows every job (``team``'s rows all
    observed) and ``SETTLE_SECONDS`` more, and stop it."""
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
            if caught_up_at is None and (
                team is None or not GpuJob.objects.filter(team=team, message=SEEDED).exists()
            ):
                caught_up_at = time.monotonic()
            if caught_up_at is not None and time.monotonic() - caught_up_at > SETTLE_SECONDS:
                break
            time.sleep(0.5)
        else:
            sys.exit(f"the watcher did not show every job within {TIMEOUT} s")
        peak = memory_mb(process.pid)["VmHWM"]
    finally:
        stop(process)
    return {
        "caught_up_seconds": round(caught_up_at - started, 1),
        "rss_mb_peak": round(peak, 1),
        "rss_mb_at_end": round(samples[-1], 1),
        "rss_mb_max_sampled": round(max(samples), 1),
    }


def run() -> dict:
    handle = devcluster_api.up()
    core = client.CoreV1Api(handle.api_client())
    slug = f"bench-wm-{uuid.uuid4().hex[:6]}"
    results: dict = {"jobs": JOBS, "cpus": os.cpu_count(), "load_at_start": os.getloadavg()[0]}
    logs = Path(tempfile.mkdtemp(prefix="bench-watcher-"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # One watcher: no leader election (its Lease would need deploy/namespace.yaml's
    # namespace on the devcluster; tests/integration/gpujobs/test_watcher_replicas.py has it).
    env["GPUJOBS_WATCHER_LEADER_ELECTION"] = "0"
    with holding(handle):
        cluster, _ = Cluster.objects.update_or_create(
            name=CLUSTER_NAME, defaults={"kubeconfig_path": str(handle.kubeconfig)}
        )
        GpuCapacity.objects.get_or_create(cluster=cluster, resource_name="nvidia.com/gpu")
        # The watcher follows every cluster in the database: another benchmark's row for the
        # same devcluster (monitoring keeps one) would make it hold every Job twice.
        results["other_clusters"] = sorted(
            Cluster.objects.exclude(pk=cluster.pk).values_list("name", flat=True)
        )
        try:
            log("the watcher following no job")
            results["no_jobs"] = follow_watcher(env, logs, None)
            team, jobs = seed(cluster, slug)
            make_namespace(core, slug, gpus=None)
            log(f"creating {JOBS} suspended Jobs")
            results["create_seconds"] = round(
                create_jobs(WorkloadClient.for_cluster(cluster), jobs), 1
            )
            log("the watcher following them")
            results["with_jobs"] = follow_watcher(env, logs, team)
        finally:
            log("cleaning up")
            delete_namespace(core, slug, log=log)
            GpuJob.objects.filter(team__slug=slug).delete()
            User.objects.filter(username=f"{slug}-member").delete()
            Team.objects.filter(slug=slug).delete()
            Cluster.objects.filter(name=CLUSTER_NAME).delete()
    results["load_at_end"] = os.getloadavg()[0]
    return results


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
        f"| {results['jobs']:,} suspended Jobs | {full['rss_mb_peak']} | {full['rss_mb_at_end']} "
        f"| {full['caught_up_seconds']} s |",
        "",
        f"Jobs created in {results['create_seconds']} s ({CREATE_THREADS} at a time). Machine: "
        f"{results['cpus']} CPUs, load {results['load_at_start']:.1f} → "
        f"{results['load_at_end']:.1f}. Other clusters in the database, which the watcher "
        f"followed too: {', '.join(results['other_clusters']) or 'none'}.",
    ]
    (RESULTS / "watcher_memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    board.row(
        f"watcher following {results['jobs']:,} jobs on one cluster: resident memory, peak",
        portal=results["with_jobs"]["rss_mb_peak"],
        alternative=results["no_jobs"]["rss_mb_peak"],
        alternative_is="the same watcher following no job",
        unit="MiB",
        goal=Goal.portal_at_most(GOAL_MB),
    )


if __name__ == "__main__":
    board = Summary("watcher memory")
    outcome = run()
    write(outcome)
    record(board, outcome)
