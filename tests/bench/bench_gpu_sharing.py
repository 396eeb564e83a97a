"""Benchmark: 70 light jobs on 10 A100s, as whole GPUs and as MIG slices, side by side.

A light job (a notebook's worth, a small test, an evaluation) needs about a seventh of an A100:
one ``1g.10gb`` MIG slice. Two runs of the same 70 jobs of one team, through the portal in Kueue
mode (``POST /api/v1/jobs/``, a real Celery worker creating the Jobs, Kueue admitting them, the
watcher following them), on the same 10 simulated NVIDIA-A100-SXM4-80GB GPUs (two temporary
nodes of 5, labelled ``hardware-type: gpu-sharing-bench`` so nobody else's pods land there):

1. **as whole GPUs**: the team holds a grant of ten ``nvidia.com/gpu``; each job asks for one
   GPU and uses a seventh of it (the DCGM simulator reads 14%); Kueue runs ten at a time.
2. **as slices**: the nodes are repartitioned the way the GPU Operator's MIG manager does it
   (the ``nvidia.com/mig.config=all-1g.10gb`` label; the devcluster's sharing manager answers
   with 70 ``nvidia.com/mig-1g.10gb``), the team's grant becomes 70 slices, and each job asks
   for one slice, which it fills.

Every pod finishes ``RUN_SECONDS`` after it starts. Measured by this process's own watches:

* jobs finished per hour: the 70 jobs over the time from the first submission to the last
  success, scaled to an hour;
* GPU-hours idle: the 10 GPUs' GPU-hours from the first submission to the last success, less the
  work done (each job a seventh of a GPU for ``RUN_SECONDS``); and of those, the GPU-hours that
  were held by a job and idle (a whole GPU held for a seventh's work);
* the repartitioning's own time (label set to 70 slices allocatable).

Results go to ``bench-results/gpu_sharing.{json,md}``. Run through ``make bench`` (a scratch
database, DEBUG off) or ``scripts/bench.sh gpu_sharing``; it starts the devcluster if it is not
running. Sizes: ``BENCH_SHARING_RUN_SECONDS``.
"""

import contextlib
import datetime
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_LOG_LEVEL", "WARNING")
from tests.bench.helpers import run_apart  # noqa: E402

run_apart("sharing")
os.environ.setdefault("PORTAL_TEAM_MAX_PODS", "1000")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db.models import ProtectedError  # noqa: E402
from django.test import override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402
from kubernetes import client  # noqa: E402

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity, QuotaMode  # noqa: E402
from clusters.vocabulary import (  # noqa: E402
    DEFAULT_GPU_RESOURCE,
    MIG_CONFIG_DISABLED,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_STATE_SUCCESS,
    mig_config_name,
)
from devcluster import api as devcluster_api  # noqa: E402
from devcluster import nodes  # noqa: E402
from gpujobs import manifests  # noqa: E402
from gpujobs.models import GpuJob, QueueSnapshot  # noqa: E402
from reconcile import cluster_pass  # noqa: E402
from reconcile import team_pass as team_reconcile  # noqa: E402
from tenants.models import AuditEvent, Membership, QuotaGrant, QuotaRequest, Team  # noqa: E402
from tests.bench.following import Following  # noqa: E402
from tests.bench.helpers import holding, patiently, signed_in_client, start, stop  # noqa: E402
from tests.bench.summary import Goal, Summary  # noqa: E402

JOBS = 70
GPUS = 10
NODE_GPUS = 5
MODEL = "NVIDIA-A100-SXM4-80GB"
PROFILE = "1g.10gb"
SLICES_PER_GPU = 7
SLICE_RESOURCE = f"nvidia.com/mig-{PROFILE}"
RUN_SECONDS = int(os.environ.get("BENCH_SHARING_RUN_SECONDS", "30"))
TIMEOUT = float(os.environ.get("BENCH_SHARING_TIMEOUT", "900"))
BENCH_LABEL = "gpu-sharing-bench"
CLUSTER_NAME = "bench-sharing"
RESULTS = REPO_ROOT / "bench-results"
COMPLETE_AFTER = "devcluster.gpuportal.io/complete-after-seconds"
GPU_UTIL = "devcluster.gpuportal.io/gpu-util"
# A light job's work: a seventh of one GPU, for RUN_SECONDS.
WORK_GPU_SECONDS = JOBS * RUN_SECONDS / SLICES_PER_GPU


def log(message: str) -> None:
    print(f"[bench_gpu_sharing {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def add_nodes(handle, run_id: str) -> list[str]:
    names = [
        handle.add_gpu_node(
            name=f"bench-share-{run_id}-{i}",
            gpus=NODE_GPUS,
            gpu_model=MODEL,
            labels={"hardware-type": BENCH_LABEL},
            wait=False,
        )
        for i in range(GPUS // NODE_GPUS)
    ]
    nodes.wait_for_ready(handle.api_client(), names, timeout=120)
    return names


def set_inventory(cluster: Cluster, resource: str, count: int) -> None:
    """What the capacity sync would write for the benchmark's nodes alone (the sync reads every
    node of the devcluster, the default GPU nodes too)."""
    GpuCapacity.objects.filter(cluster=cluster).delete()
    GpuModelCapacity.objects.filter(cluster=cluster).delete()
    GpuCapacity.objects.create(
        cluster=cluster, resource_name=resource, allocatable=count, gpu_model=MODEL
    )
    GpuModelCapacity.objects.create(
        cluster=cluster,
        resource_name=resource,
        gpu_model=MODEL,
        allocatable=count,
        nodes=GPUS // NODE_GPUS,
        max_per_node=count // (GPUS // NODE_GPUS),
    )


def grant(team: Team, cluster: Cluster, admin: User, user: User, resource: str, count: int):
    """The team's only active grant: ``count`` of ``resource`` (the earlier one revoked)."""
    QuotaGrant.objects.filter(team=team, state="active").update(state="revoked")
    request = QuotaRequest.objects.create(
        team=team,
        cluster=cluster,
        gpu_resource=resource,
        gpu_model=MODEL,
        gpus=count,
        starts_on=timezone.localdate(),
        justification="Benchmark.",
        requested_by=user,
        state=QuotaRequest.State.APPROVED,
    )
    QuotaGrant.objects.create(
        request=request,
        team=team,
        cluster=cluster,
        gpu_resource=resource,
        gpu_model=MODEL,
        gpus=count,
        starts_on=timezone.localdate(),
        granted_by=admin,
    )


def reconcile(cluster: Cluster, team: Team, core) -> None:
    """The portal's reconcile of the cluster's Kueue objects and of the team, in this process,
    then until the team's ResourceQuota is counted."""
    cluster_pass.reconcile_cluster(cluster_id=cluster.pk)
    team_reconcile.reconcile_team_on_cluster(team_id=team.pk, cluster_id=cluster.pk)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        quotas = core.list_namespaced_resource_quota(team.slug).items
        if quotas and all(q.status and q.status.hard == q.spec.hard for q in quotas):
            return
        time.sleep(0.2)
    sys.exit(f"the quota of {team.slug} was never counted")


def repartition(core, names: list[str], config: str, resource: str, count: int) -> float:
    """Label the nodes as an operator (or the portal's layout) does and wait for the MIG
    manager's ``success`` and ``count`` of ``resource`` on each; returns the seconds it took."""
    started = time.monotonic()
    for name in names:
        core.patch_node(name, {"metadata": {"labels": {MIG_CONFIG_LABEL: config}}})
    deadline = started + 120
    while time.monotonic() < deadline:
        done = 0
        for name in names:
            node = core.read_node(name)
            state = (node.metadata.labels or {}).get(MIG_CONFIG_STATE_LABEL)
            offered = int((node.status.allocatable or {}).get(resource, "0") or 0)
            done += state == MIG_STATE_SUCCESS and offered == count
        if done == len(names):
            return time.monotonic() - started
        time.sleep(0.2)
    sys.exit(f"the nodes never showed {count} × {resource} under {config}")


def job_body(cluster: Cluster, team: Team, name: str, resource: str, util: int) -> dict:
    return {
        "team": team.slug,
        "cluster": cluster.name,
        "name": name,
        "image": "registry.example.com/bench/eval:1",
        "gpus": 1,
        "gpu_resource": resource,
        "gpu_model": MODEL,
        "max_runtime_seconds": 3600,
        "annotations": {COMPLETE_AFTER: str(RUN_SECONDS), GPU_UTIL: str(util)},
    }


def one_run(label: str, cluster, team, user, following, resource: str, util: int) -> dict:
    api = signed_in_client(user)
    keys, started = set(), time.time()
    with override_settings(ALLOWED_HOSTS=["testserver"]):
        for n in range(JOBS):
            response = api.post(
                "/api/v1/jobs/",
                job_body(cluster, team, f"{label}-{n}", resource, util),
                content_type="application/json",
            )
            if response.status_code != 201:
                sys.exit(f"submission {n} failed: {response.status_code} {response.content[:300]}")
            keys.add((team.slug, manifests.job_name(response.json()["id"])))
    log(f"{label}: {JOBS} jobs submitted in {time.time() - started:.1f} s; following them")
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        with following.lock:
            done = len(keys & following.succeeded.keys())
        if done == len(keys):
            break
        time.sleep(0.5)
    else:
        sys.exit(f"{label}: {done} of {JOBS} jobs succeeded within {TIMEOUT:.0f} s")
    with following.lock:
        finished = [following.succeeded[k] for k in keys]
        held = sum(following.succeeded[k] - following.running[k] for k in keys)
    makespan = max(finished) - started
    # A whole GPU held by a job is held whole; a slice is a seventh of one.
    held_gpu_seconds = held if resource == DEFAULT_GPU_RESOURCE else held / SLICES_PER_GPU
    return {
        "gpu_resource": resource,
        "seconds_to_all_succeeded": round(makespan, 1),
        "jobs_per_hour": round(JOBS * 3600 / makespan, 1),
        "gpu_hours_idle": round((GPUS * makespan - WORK_GPU_SECONDS) / 3600, 3),
        "gpu_hours_held_idle": round(max(held_gpu_seconds - WORK_GPU_SECONDS, 0) / 3600, 3),
        "gpu_hours_in_all": round(GPUS * makespan / 3600, 3),
    }


def run() -> dict:
    handle = devcluster_api.up()
    api_client = handle.api_client()
    core = client.CoreV1Api(api_client)
    run_id = uuid.uuid4().hex[:5]
    slug = f"bsh-{run_id}"
    results: dict = {
        "jobs": JOBS,
        "gpus": GPUS,
        "model": MODEL,
        "profile": PROFILE,
        "run_seconds_per_job": RUN_SECONDS,
        "cpus": os.cpu_count(),
        "load_average_at_start": round(os.getloadavg()[0], 2),
    }
    log(f"adding {GPUS} × {MODEL} on nodes of {NODE_GPUS}")
    node_names = add_nodes(handle, run_id)
    processes, cluster = [], None
    try:
        cluster, _ = Cluster.objects.update_or_create(
            name=CLUSTER_NAME,
            defaults={
                "kubeconfig_path": str(handle.kubeconfig),
                "quota_mode": QuotaMode.KUEUE,
                "gpu_node_selector": {"hardware-type": BENCH_LABEL},
                "allowed_registries": ["registry.example.com"],
                "allow_all_registries": False,
            },
        )
        admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
        team = Team.objects.create(slug=slug, name=f"Bench {slug}")
        user = User.objects.create(username=f"{slug}-member")
        Membership.objects.create(team=team, user=user, role=Membership.Role.MEMBER)
        set_inventory(cluster, DEFAULT_GPU_RESOURCE, GPUS)
        grant(team, cluster, admin, user, DEFAULT_GPU_RESOURCE, GPUS)
        reconcile(cluster, team, core)

        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GPUJOBS_WATCHER_LEADER_ELECTION": "0"}
        logs = Path(tempfile.mkdtemp(prefix="bench-sharing-"))
        processes.append(
            start(
                [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=threads",
                 "--concurrency=4", "--without-gossip", "--without-mingle", "--loglevel=INFO",
                 "-n", f"bench-sharing-{run_id}@%h"],
                logs / "worker.log",
                "ready.",
                {**env, "PORTAL_LOG_LEVEL": "INFO"},
            )
        )  # fmt: skip
        processes.append(
            start(
                [sys.executable, "manage.py", "watch_jobs", "--discover-every", "1"],
                logs / "watcher.log",
                "following GPU jobs",
                env,
            )
        )
        following = Following(api_client, {slug})
        following.start()
        time.sleep(3)

        log(f"1/2 as whole GPUs: {JOBS} jobs of one GPU each on {GPUS} GPUs")
        results["whole"] = one_run(
            "whole", cluster, team, user, following, DEFAULT_GPU_RESOURCE, 100 // SLICES_PER_GPU
        )
        log(f"repartitioning the nodes: {mig_config_name(PROFILE)}")
        slices = GPUS * SLICES_PER_GPU
        results["repartition_seconds"] = round(
            repartition(
                core,
                node_names,
                mig_config_name(PROFILE),
                SLICE_RESOURCE,
                slices // len(node_names),
            ),
            1,
        )
        set_inventory(cluster, SLICE_RESOURCE, slices)
        grant(team, cluster, admin, user, SLICE_RESOURCE, slices)
        reconcile(cluster, team, core)
        log(f"2/2 as slices: {JOBS} jobs of one {PROFILE} slice each on {slices} slices")
        results["slices"] = one_run("slices", cluster, team, user, following, SLICE_RESOURCE, 100)
        following.stop.set()
        whole, sliced = results["whole"], results["slices"]
        results["jobs_per_hour_ratio"] = round(sliced["jobs_per_hour"] / whole["jobs_per_hour"], 2)
    finally:
        for process in processes:
            stop(process)
        log("cleaning up: the team's namespace, the nodes and the benchmark's rows")
        if cluster is not None:
            Cluster.objects.filter(pk=cluster.pk).update(quota_mode=QuotaMode.QUOTA_ONLY)
            cluster.refresh_from_db()
            patiently(
                "reconcile the cluster to quota only",
                lambda: cluster_pass.reconcile_cluster(cluster_id=cluster.pk),
                log=log,
            )
        forget(slug)
        patiently(
            f"delete namespace {slug}",
            lambda: core.delete_namespace(slug, propagation_policy="Background"),
            log=log,
        )
        for name in node_names:
            patiently(
                f"remove node {name}", lambda n=name: handle.remove_node(n, wait=False), log=log
            )
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    results["finished_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return results


def forget(slug: str) -> None:
    from django.db import connection

    connection.close()
    for team in Team.objects.filter(slug=slug):
        GpuJob.objects.filter(team=team).delete()
        AuditEvent.objects.filter(team=team).delete()
        QuotaGrant.objects.filter(team=team).delete()
        QuotaRequest.objects.filter(team=team).delete()
        User.objects.filter(username=f"{slug}-member").delete()
        team.delete()
    QueueSnapshot.objects.filter(cluster__name=CLUSTER_NAME).delete()
    with contextlib.suppress(ProtectedError):
        Cluster.objects.filter(name=CLUSTER_NAME).delete()


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gpu_sharing.json").write_text(json.dumps(results, indent=2) + "\n")
    whole, sliced = results["whole"], results["slices"]
    lines = [
        f"# {results['jobs']} light jobs on {results['gpus']} × {results['model']}: whole GPUs "
        f"or {results['profile']} MIG slices",
        "",
        f"One team, Kueue mode, through the portal's API, its Celery worker and watcher. Every job "
        f"needs a seventh of a GPU and its pod finishes {results['run_seconds_per_job']} s after "
        f"it starts; the work done is the same in both runs ({WORK_GPU_SECONDS / 3600:.3f} "
        f"GPU-hours). {results['cpus']} CPUs shared with everything else (load average "
        f"{results['load_average_at_start']} at the start, {results['load_average_at_end']} at "
        "the end).",
        "",
        f"**Jobs finished per hour, slices / whole GPUs: {results['jobs_per_hour_ratio']}×**",
        "",
        "| | GPU kind | s to all done | jobs finished per hour | GPU-hours in all "
        "| GPU-hours idle | of which held by a job and idle |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in (("whole GPUs", whole), (f"{results['profile']} slices", sliced)):
        lines.append(
            f"| {name} | `{r['gpu_resource']}` | {r['seconds_to_all_succeeded']} "
            f"| {r['jobs_per_hour']} | {r['gpu_hours_in_all']} | {r['gpu_hours_idle']} "
            f"| {r['gpu_hours_held_idle']} |"
        )
    lines += [
        "",
        f"Repartitioning the two nodes ({mig_config_name(PROFILE)} on the "
        f"`{MIG_CONFIG_LABEL}` label, the devcluster's MIG manager answering after its delay) "
        f"took {results['repartition_seconds']} s; going back is the `{MIG_CONFIG_DISABLED}` "
        "config.",
        "",
        "GPU-hours idle: the GPUs' hours from the first submission to the last success, less the "
        "work done. Held and idle: what jobs held (a whole GPU, or a seventh of one per slice) "
        "less the work done.",
    ]
    (RESULTS / "gpu_sharing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    whole, sliced = results["whole"], results["slices"]
    board.row(
        f"{results['jobs']} light jobs on {results['gpus']} A100s: jobs finished per hour",
        portal=sliced["jobs_per_hour"],
        alternative=whole["jobs_per_hour"],
        alternative_is="the same jobs on the same GPUs as whole GPUs",
        unit="jobs/h",
        goal=Goal.ratio_at_least(3),
        note=f"{results['profile']} MIG slices vs whole GPUs, Kueue mode",
    )
    board.row(
        f"{results['jobs']} light jobs on {results['gpus']} A100s: GPU-hours idle",
        portal=sliced["gpu_hours_idle"],
        alternative=whole["gpu_hours_idle"],
        alternative_is="the same jobs on the same GPUs as whole GPUs",
        unit="GPU-h",
        goal=Goal.ratio_at_most(0.5),
        note=(
            f"held and idle: {sliced['gpu_hours_held_idle']} as slices, "
            f"{whole['gpu_hours_held_idle']} as whole GPUs"
        ),
    )


if __name__ == "__main__":
    board = Summary("gpu sharing")
    handle = devcluster_api.up()
    with holding(handle):
        results = run()
    write(results)
    record(board, results)
