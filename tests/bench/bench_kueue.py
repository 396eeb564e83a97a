"""Benchmark: 2,000 one-GPU jobs from 20 teams on 256 simulated GPUs of two models, queued by
Kueue through the portal, beside the same Jobs created with ``kubectl create`` straight into
Kueue, and the same workload under quota only.

Three runs of one workload on temporary GPU nodes of their own (8 nodes of 32 GPUs: 128
NVIDIA-A100-SXM4-80GB and 128 NVIDIA-H100-80GB-HBM3, labelled ``hardware-type:
gpu-kueue-bench`` so nobody else's pods land there), each pod finishing ``RUN_SECONDS`` after it
starts. The 20 teams' grants split the 256 GPUs evenly per model; their demand does not: ten
teams submit three times as many jobs as the other ten. Each team's first jobs, as many as it
has quota, are guaranteed, the rest opportunistic; no job names a model.

1. **Kueue through the portal**: ``POST /api/v1/jobs/`` for every job, one after another and
   round-robin over the teams (in-process, Django's test client), a real Celery worker creating
   the suspended Jobs in the teams' LocalQueues, Kueue admitting them, and the watcher following
   them (Workloads too) and reading the queues, as in production.
2. **Kueue alone**: the same 2,000 Job manifests (``gpujobs.manifests``, same queue and priority
   class labels), in the same order, created by one ``kubectl create -f``.
3. **Quota only, through the portal**: the cluster switched to quota only; the same jobs, each
   team's client submitting its next job until the API refuses it (the team's quota is used up)
   and trying again once a job of the team has finished.

Measured from the cluster by this process's own watches (pods, Jobs, Workloads) and a sampler
(every 0.5 s: GPUs busy, jobs waiting):

* admission throughput: jobs admitted per second from the first submission to the last
  admission, and the portal's as a ratio of Kueue alone's (goal: at least 0.9);
* submit-to-Running (from the API call, or the Job's creation for kubectl) p50 and p99;
* GPU occupancy while jobs wait: busy GPU-seconds over all GPU-seconds while any job waits
  (goal: at least 95%), and the GPU-hours left idle meanwhile;
* preemptions, and under quota only the jobs refused and the refusals in all.

The benchmark runs its portal under a name of its own (``PORTAL_NAME=gpu-portal-bench-kueue``: its
own flavors, cohort, priority classes and queues on the shared devcluster); the portal's reconcile
(run in this process) makes the teams' namespaces, ResourceQuotas and Kueue queues, and takes the
queues away again for the quota-only run. Results go to
``bench-results/kueue.{json,md}``. Run through ``make bench`` (a scratch database, DEBUG off);
it starts the devcluster if it is not running. Sizes: ``BENCH_KUEUE_JOBS``,
``BENCH_KUEUE_TEAMS``, ``BENCH_KUEUE_GPUS_PER_MODEL``, ``BENCH_KUEUE_NODE_GPUS`` (GPUs per
node), ``BENCH_KUEUE_GPUS_PER_JOB``, ``BENCH_KUEUE_RUN_SECONDS``; ``BENCH_KUEUE_RUNS`` (any of
``portal,kubectl,quota``) picks the runs, and ``BENCH_KUEUE_FOLLOW_UNTIL=admitted`` ends each
run at its last admission (the figures measured need nothing after it) and deletes its Jobs
before the next run starts, instead of waiting for every job to finish.

At the scale of ``make bench-scale`` (``tests/bench/scale.py``) the control plane is the bound:
through Kueue's webhooks it takes each Job in about a quarter of a second on this machine's 2
cores (``kubectl create`` makes them one after another: about 4 a second; the portal's worker,
8 at a time, about 9). Filling 5,000 GPUs with one-GPU jobs would take about 20 minutes of
``kubectl create`` before any job waits, so that run submits 4-GPU jobs (1,250 fill the GPUs)
over the same 625 nodes, 500 teams and their queues.
"""

import contextlib
import datetime
import json
import os
import statistics
import subprocess
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
# Its own Kueue objects on the shared devcluster, and its own Celery queue.
from tests.bench.helpers import run_apart  # noqa: E402

run_apart("kueue")
# A busy team may run more pods at once than the default bound of a team namespace.
os.environ.setdefault("PORTAL_TEAM_MAX_PODS", "1000")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db.models import ProtectedError  # noqa: E402
from django.test import override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402
from kubernetes import client  # noqa: E402

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity, QuotaMode  # noqa: E402
from devcluster import api as devcluster_api  # noqa: E402
from devcluster import builder, nodes  # noqa: E402
from devcluster.gpu_models import DEFAULT_GPU_MODEL, DEFAULT_SECOND_GPU_MODEL  # noqa: E402
from gpujobs import manifests  # noqa: E402
from gpujobs.models import GpuJob, QueueSnapshot  # noqa: E402
from gpujobs.specs import JobRequest  # noqa: E402
from reconcile import cluster_pass  # noqa: E402
from reconcile import team_pass as team_reconcile  # noqa: E402
from tenants.models import AuditEvent, Membership, QuotaGrant, QuotaRequest, Team  # noqa: E402
from tests.bench.following import Following  # noqa: E402
from tests.bench.helpers import (  # noqa: E402
    SHARED_SERVICES,
    CpuMeter,
    holding,
    patiently,
    percentile,
    signed_in_client,
    start,
    stop,
)
from tests.bench.summary import Goal, Summary, results_dir, scale  # noqa: E402
from workloads.manifests import cluster_placement  # noqa: E402
from workloads.specs import ContainerRequest  # noqa: E402

JOBS = int(os.environ.get("BENCH_KUEUE_JOBS", "2000"))
TEAMS = int(os.environ.get("BENCH_KUEUE_TEAMS", "20"))
GPUS_PER_MODEL = int(os.environ.get("BENCH_KUEUE_GPUS_PER_MODEL", "128"))
# Long enough for the first wave to fill the GPUs while the rest are still being created: on the
# devcluster (2 busy cores) a Job is created, through Kueue's webhooks, about 3 times a second.
RUN_SECONDS = int(os.environ.get("BENCH_KUEUE_RUN_SECONDS", "120"))
TIMEOUT = float(os.environ.get("BENCH_KUEUE_TIMEOUT", "1800"))
WORKER_THREADS = int(os.environ.get("BENCH_KUEUE_WORKER_THREADS", "8"))
MODELS = (DEFAULT_GPU_MODEL, DEFAULT_SECOND_GPU_MODEL)
NODE_GPUS = int(os.environ.get("BENCH_KUEUE_NODE_GPUS", "32"))
GPUS_PER_JOB = int(os.environ.get("BENCH_KUEUE_GPUS_PER_JOB", "1"))
RUNS = tuple(os.environ.get("BENCH_KUEUE_RUNS", "portal,kubectl,quota").split(","))
FOLLOW_UNTIL = os.environ.get("BENCH_KUEUE_FOLLOW_UNTIL", "succeeded")
GPUS = GPUS_PER_MODEL * len(MODELS)
BENCH_LABEL = "gpu-kueue-bench"
CLUSTER_NAME = "bench-kueue"
SAMPLE_SECONDS = 0.5
# Admissions per second against Kueue alone's: the lab's goal, and a company's (make bench-scale).
ADMISSION_GOAL, ADMISSION_GOAL_AT_SCALE = 0.9, 0.95
RESULTS = results_dir()
COMPLETE_AFTER = "devcluster.gpuportal.io/complete-after-seconds"


def log(message: str) -> None:
    print(f"[bench_kueue {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def durations(values: list[float]) -> dict:
    if not values:
        return {"count": 0, "p50_s": None, "p99_s": None, "max_s": None, "mean_s": None}
    return {
        "count": len(values),
        "p50_s": round(percentile(values, 50), 2),
        "p99_s": round(percentile(values, 99), 2),
        "max_s": round(max(values), 2),
        "mean_s": round(statistics.fmean(values), 2),
    }


# --- the workload ------------------------------------------------------------------------------


def demands() -> list[int]:
    """Jobs per team: the first half of the teams three times as many as the others."""
    weights = [3 if i < TEAMS // 2 else 1 for i in range(TEAMS)]
    counts = [JOBS * w // sum(weights) for w in weights]
    for i in range(JOBS - sum(counts)):
        counts[i % TEAMS] += 1
    return counts


def grants() -> list[dict[str, int]]:
    """Each team's GPUs per model: every model's GPUs split evenly."""
    per_team = []
    for i in range(TEAMS):
        per_team.append(
            {m: GPUS_PER_MODEL // TEAMS + (1 if i < GPUS_PER_MODEL % TEAMS else 0) for m in MODELS}
        )
    return per_team


def workload(slugs: list[str]) -> list[tuple[int, str, str]]:
    """(team index, slug, priority) per job, round-robin over the teams; a team's first jobs,
    as many as its quota, are guaranteed."""
    counts = demands()
    own = [sum(gpus // GPUS_PER_JOB for gpus in g.values()) for g in grants()]
    order, made = [], [0] * TEAMS
    while len(order) < JOBS:
        for i in range(TEAMS):
            if made[i] < counts[i]:
                priority = "guaranteed" if made[i] < own[i] else "opportunistic"
                order.append((i, slugs[i], priority))
                made[i] += 1
    return order


# --- following the cluster ---------------------------------------------------------------------


class Sampler(threading.Thread):
    """Every half second: GPUs busy (pods of the run's jobs running) and jobs waiting (submitted
    or created, neither running nor done)."""

    def __init__(self, following: Following, keys: set, submitted):
        super().__init__(daemon=True)
        self.following, self.keys, self.submitted = following, keys, submitted
        self.samples: list[tuple[float, int, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            f = self.following
            with f.lock:
                running = len(f.running_now & self.keys)
                done = len(self.keys & f.succeeded.keys())
            waiting = max(self.submitted() - running - done, 0)
            self.samples.append((time.time(), running * GPUS_PER_JOB, waiting))
            self.stop.wait(SAMPLE_SECONDS)


def occupancy(samples: list[tuple[float, int, int]]) -> dict:
    """Busy GPU-seconds over all GPU-seconds while any job waits, from the first sample with a
    job waiting to the last; and the same from the first moment every GPU was busy (steady
    state)."""
    waiting = [i for i, (_, _, w) in enumerate(samples) if w > 0]
    if not waiting:
        return {"while_waiting": None, "steady": None, "idle_gpu_hours_while_waiting": 0.0}
    first, last = waiting[0], waiting[-1]
    busy = total = 0.0
    steady_busy = steady_total = 0.0
    full = False
    for i in range(first, min(last + 1, len(samples) - 1)):
        at, gpus, _ = samples[i]
        dt = samples[i + 1][0] - at
        busy += gpus * dt
        total += GPUS * dt
        full = full or gpus >= GPUS
        if full:
            steady_busy += gpus * dt
            steady_total += GPUS * dt
    return {
        "while_waiting": round(busy / total, 4) if total else None,
        "steady": round(steady_busy / steady_total, 4) if steady_total else None,
        "seconds_with_jobs_waiting": round(samples[last][0] - samples[first][0], 1),
        "idle_gpu_hours_while_waiting": round((total - busy) / 3600, 2),
    }


def measure(following, keys: set, submitted_at: dict, started: float, samples) -> dict:
    f = following
    with f.lock:
        created = [f.created[k] for k in keys if k in f.created]
        admitted = [f.admitted[k] for k in keys if k in f.admitted]
        to_running = [f.running[k] - submitted_at[k] for k in keys if k in f.running]
        to_admitted = [f.admitted[k] - submitted_at[k] for k in keys if k in f.admitted]
        done = [f.succeeded[k] for k in keys if k in f.succeeded]
        preemptions = sum(f.preemptions.get(k, 0) for k in keys)
    last_admission = max(admitted) if admitted else None
    result = {
        "jobs": len(keys),
        "succeeded": len(done),
        "admitted": len(admitted),
        # When the last Job was on the cluster: through the portal, whether its worker kept
        # ahead of Kueue's admissions (a job not created yet waits in the portal, not Kueue).
        "seconds_to_last_job_created": round(max(created) - started, 2) if created else None,
        "seconds_to_last_admission": round(last_admission - started, 2) if admitted else None,
        "seconds_to_all_succeeded": round(max(done) - started, 2)
        if done and len(done) == len(keys)
        else None,
        "admission_jobs_per_s": round(len(admitted) / (last_admission - started), 2)
        if admitted
        else None,
        "submit_to_admitted": durations(to_admitted),
        "submit_to_running": durations(to_running),
        "preemptions": preemptions,
        "occupancy": occupancy(samples),
    }
    if len(admitted) >= GPUS // GPUS_PER_JOB:
        first_wave = sorted(admitted)[GPUS // GPUS_PER_JOB - 1]
        result["seconds_to_first_wave_admitted"] = round(first_wave - started, 2)
    return result


def wait_until_done(following, keys: set, what: str) -> None:
    """Until every job has succeeded, or with ``BENCH_KUEUE_FOLLOW_UNTIL=admitted`` until every
    job is admitted (then the run's Jobs are deleted, see ``clear``)."""
    seen = following.admitted if FOLLOW_UNTIL == "admitted" else following.succeeded
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        with following.lock:
            done = len(keys & seen.keys())
        if done >= len(keys):
            return
        time.sleep(1)
    sys.exit(f"{what}: {done} of {len(keys)} jobs {FOLLOW_UNTIL} within {TIMEOUT:.0f} s")


def clear(batch, following, keys: set, what: str) -> None:
    """Delete a run's Jobs (and so their pods) and wait until none of its pods runs, so that the
    next run starts on idle GPUs. Only when a run ends at its last admission: otherwise every
    Job has finished."""
    if FOLLOW_UNTIL != "admitted":
        return
    log(f"{what}: deleting its {len(keys)} Jobs")
    for namespace, name in sorted(keys):
        patiently(
            f"delete Job {namespace}/{name}",
            lambda n=namespace, j=name: batch.delete_namespaced_job(
                j, n, propagation_policy="Background"
            ),
            log=log,
        )
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        with following.lock:
            left = len(following.running_now & keys)
        if not left:
            return
        time.sleep(1)
    sys.exit(f"{what}: {left} pods still running {TIMEOUT:.0f} s after their Jobs were deleted")


# --- the cluster and the teams -----------------------------------------------------------------


def add_nodes(handle, run_id: str) -> list[str]:
    names = []
    for model in MODELS:
        for i in range(-(-GPUS_PER_MODEL // NODE_GPUS)):
            gpus = min(NODE_GPUS, GPUS_PER_MODEL - i * NODE_GPUS)
            names.append(
                handle.add_gpu_node(
                    name=f"bench-kq-{run_id}-{model.split('-')[1].lower()}-{i}",
                    gpus=gpus,
                    gpu_model=model,
                    labels={"hardware-type": BENCH_LABEL},
                    wait=False,
                )
            )
    nodes.wait_for_ready(handle.api_client(), names, timeout=max(120, len(names)))
    return names


def reconcile_all(cluster: Cluster, core, slugs: list[str]) -> None:
    """The portal's reconcile of the cluster's Kueue objects and of every team (namespace,
    ResourceQuota, queues), in this process, as the worker runs it; then until every team's
    ResourceQuota is counted (the API server refuses pods until then)."""
    cluster_pass.reconcile_cluster(cluster_id=cluster.pk)
    for team in Team.objects.filter(slug__in=slugs):
        team_reconcile.reconcile_team_on_cluster(team_id=team.pk, cluster_id=cluster.pk)
    deadline = time.monotonic() + 120
    for slug in slugs:
        while time.monotonic() < deadline:
            quotas = core.list_namespaced_resource_quota(slug).items
            if quotas and all(q.status and q.status.hard == q.spec.hard for q in quotas):
                break
            time.sleep(0.2)
        else:
            sys.exit(f"the quota of {slug} was never counted")


def seed(cluster: Cluster, slugs: list[str]) -> list[User]:
    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    users, today = [], timezone.localdate()
    for slug, per_model in zip(slugs, grants(), strict=True):
        team = Team.objects.create(slug=slug, name=f"Bench {slug}")
        user = User.objects.create(username=f"{slug}-member")
        Membership.objects.create(team=team, user=user, role=Membership.Role.MEMBER)
        for model, gpus in per_model.items():
            if not gpus:
                continue
            request = QuotaRequest.objects.create(
                team=team,
                cluster=cluster,
                gpus=gpus,
                gpu_model=model,
                starts_on=today,
                justification="Benchmark.",
                requested_by=user,
                state=QuotaRequest.State.APPROVED,
            )
            QuotaGrant.objects.create(
                request=request,
                team=team,
                cluster=cluster,
                gpus=gpus,
                gpu_model=model,
                starts_on=today,
                granted_by=admin,
            )
        users.append(user)
    return users


def forget(slugs: list[str]) -> None:
    from django.db import connection

    connection.close()
    for team in Team.objects.filter(slug__in=slugs):
        GpuJob.objects.filter(team=team).delete()
        AuditEvent.objects.filter(team=team).delete()
        QuotaGrant.objects.filter(team=team).delete()
        QuotaRequest.objects.filter(team=team).delete()
        User.objects.filter(username=f"{team.slug}-member").delete()
        team.delete()
    QueueSnapshot.objects.filter(cluster__name=CLUSTER_NAME).delete()
    with contextlib.suppress(ProtectedError):
        Cluster.objects.filter(name=CLUSTER_NAME).delete()


# --- the three runs ----------------------------------------------------------------------------


def job_body(cluster: Cluster, slug: str, priority: str, name: str) -> dict:
    return {
        "team": slug,
        "cluster": cluster.name,
        "name": name,
        "image": "registry.example.com/bench/trainer:1",
        "gpus": GPUS_PER_JOB,
        "priority": priority,
        "max_runtime_seconds": 3600,
        "annotations": {COMPLETE_AFTER: str(RUN_SECONDS)},
    }


def portal_kueue_run(cluster, users, slugs, following, batch) -> dict:
    order = workload(slugs)
    clients = {slug: signed_in_client(user) for user, slug in zip(users, slugs, strict=True)}
    keys, submitted_at = set(), {}
    sampler = Sampler(following, keys, lambda: len(submitted_at))
    started = time.time()
    sampler.start()
    with override_settings(ALLOWED_HOSTS=["testserver"]):
        for n, (_, slug, priority) in enumerate(order):
            at = time.time()
            response = clients[slug].post(
                "/api/v1/jobs/",
                job_body(cluster, slug, priority, f"kq-{n}"),
                content_type="application/json",
            )
            if response.status_code != 201:
                sys.exit(f"submission {n} failed: {response.status_code} {response.content[:300]}")
            key = (slug, manifests.job_name(response.json()["id"]))
            keys.add(key)
            submitted_at[key] = at
    api_seconds = time.time() - started
    log(f"portal: {len(order)} jobs submitted in {api_seconds:.1f} s; following them")
    wait_until_done(following, keys, "Kueue through the portal")
    sampler.stop.set()
    sampler.join()
    result = measure(following, keys, submitted_at, started, sampler.samples)
    result["api_seconds"] = round(api_seconds, 2)
    clear(batch, following, keys, "Kueue through the portal")
    return result


def kubectl_run(kubectl, kubeconfig, cluster, slugs, following, batch) -> dict:
    placement = cluster_placement(cluster)
    items = []
    for n, (_, slug, priority) in enumerate(workload(slugs)):
        request = JobRequest(
            name=f"kk-{n}",
            main=ContainerRequest(image="registry.example.com/bench/trainer:1"),
            gpus=GPUS_PER_JOB,
            max_runtime_seconds=3600,
            priority=priority,
            annotations=((COMPLETE_AFTER, str(RUN_SECONDS)),),
        )
        spec = manifests.JobSpec(
            job_id=100_000 + n,
            namespace=slug,
            request=request,
            ttl_seconds_after_finished=600,
            queue=priority,
        )
        manifest = manifests.job_manifest(spec, placement)
        manifest["metadata"]["name"] = f"kubectl-{n}"
        items.append(manifest)
    keys = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in items}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, file)
        path = file.name
    submitted_at: dict = {}

    def created() -> int:
        with following.lock:
            return len(keys & following.created.keys())

    sampler = Sampler(following, keys, created)
    started = time.time()
    sampler.start()
    run = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), "create", "-f", path, "-o", "name"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    create_seconds = time.time() - started
    Path(path).unlink()
    if run.returncode != 0:
        sys.exit(f"kubectl create failed:\n{run.stderr[-3000:]}")
    log(f"kubectl: {len(items)} Jobs created in {create_seconds:.1f} s; following them")
    wait_until_done(following, keys, "Kueue alone")
    sampler.stop.set()
    sampler.join()
    with following.lock:
        submitted_at = {k: following.created.get(k, started) for k in keys}
    result = measure(following, keys, submitted_at, started, sampler.samples)
    result["kubectl_create_seconds"] = round(create_seconds, 2)
    clear(batch, following, keys, "Kueue alone")
    return result


def portal_quota_run(cluster, users, slugs, following, batch) -> dict:
    """Each team's client submits its next job until the API refuses it, and tries again when
    a job of the team has finished (polled every second). A job's submit-to-Running counts from
    its first try."""
    counts = demands()
    backlog = {slug: counts[i] for i, slug in enumerate(slugs)}
    clients = {slug: signed_in_client(user) for user, slug in zip(users, slugs, strict=True)}
    keys, submitted_at = set(), {}
    refusals, refused_jobs, blocked, first_try = 0, 0, {}, {}
    sampler = Sampler(following, keys, lambda: len(submitted_at) + sum(backlog.values()))
    started = time.time()
    sampler.start()
    serial = 0
    deadline = time.monotonic() + TIMEOUT
    with override_settings(ALLOWED_HOSTS=["testserver"]):
        while any(backlog.values()):
            if time.monotonic() > deadline:
                sys.exit("quota only: the backlog did not drain in time")
            for slug in slugs:
                with following.lock:
                    done = sum(1 for k in keys if k[0] == slug and k in following.succeeded)
                if blocked.get(slug) == done:
                    continue  # refused, and none of its jobs finished since
                while backlog[slug]:
                    # A refused job's wait counts from its first try.
                    at = first_try.setdefault(slug, time.time())
                    response = clients[slug].post(
                        "/api/v1/jobs/",
                        job_body(cluster, slug, "guaranteed", f"qo-{serial}"),
                        content_type="application/json",
                    )
                    if response.status_code == 400 and "gpus" in response.json():
                        refusals += 1
                        if slug not in blocked or blocked[slug] is None:
                            refused_jobs += 1
                        blocked[slug] = done
                        break
                    if response.status_code != 201:
                        sys.exit(f"quota only: {response.status_code} {response.content[:300]}")
                    blocked[slug] = None
                    first_try.pop(slug)
                    serial += 1
                    backlog[slug] -= 1
                    key = (slug, manifests.job_name(response.json()["id"]))
                    keys.add(key)
                    submitted_at[key] = at
            time.sleep(1)
    log("quota only: every job accepted; following them")
    wait_until_done(following, keys, "quota only")
    sampler.stop.set()
    sampler.join()
    result = measure(following, keys, submitted_at, started, sampler.samples)
    result["refusals"] = refusals
    result["jobs_refused_at_least_once"] = refused_jobs
    clear(batch, following, keys, "quota only")
    return result


def run() -> dict:
    handle = devcluster_api.up()
    kubectl = str(builder.binary("kubectl"))
    api_client = handle.api_client()
    core = client.CoreV1Api(api_client)
    run_id = uuid.uuid4().hex[:5]
    slugs = [f"bkq-{run_id}-{i:02d}" for i in range(TEAMS)]
    results: dict = {
        "jobs": JOBS,
        "teams": TEAMS,
        "gpus": GPUS,
        "gpus_per_node": NODE_GPUS,
        "gpus_per_job": GPUS_PER_JOB,
        "follow_until": FOLLOW_UNTIL,
        "models": list(MODELS),
        "run_seconds_per_job": RUN_SECONDS,
        "demand_per_team": demands(),
        "grants_per_team": [sum(g.values()) for g in grants()],
        "worker_threads": WORKER_THREADS,
        "cpus": os.cpu_count(),
        "load_average_at_start": round(os.getloadavg()[0], 2),
    }
    log(f"adding {GPUS} GPUs on nodes of {NODE_GPUS}")
    node_names = add_nodes(handle, run_id)
    processes, cluster = [], None
    try:
        cluster, _ = Cluster.objects.update_or_create(
            name=CLUSTER_NAME,
            defaults={
                "kubeconfig_path": str(handle.kubeconfig),
                "quota_mode": QuotaMode.KUEUE,
                "gpu_node_selector": {"hardware-type": BENCH_LABEL},
                # The image policy is checked as on any cluster: the bench image's registry is
                # the one allowed.
                "allowed_registries": ["registry.example.com"],
                "allow_all_registries": False,
            },
        )
        GpuCapacity.objects.update_or_create(
            cluster=cluster,
            resource_name="nvidia.com/gpu",
            defaults={"allocatable": GPUS, "gpu_model": ",".join(MODELS)},
        )
        for model in MODELS:
            GpuModelCapacity.objects.update_or_create(
                cluster=cluster,
                resource_name="nvidia.com/gpu",
                gpu_model=model,
                defaults={
                    "allocatable": GPUS_PER_MODEL,
                    "max_per_node": NODE_GPUS,
                    "nodes": -(-GPUS_PER_MODEL // NODE_GPUS),
                },
            )
        users = seed(cluster, slugs)
        log("reconciling the cluster's flavors and the teams' namespaces and queues")
        reconcile_all(cluster, core, slugs)

        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GPUJOBS_TTL_SECONDS_AFTER_FINISHED": "600"}
        # One watcher: no leader election (its Lease would need deploy/namespace.yaml's
        # namespace on the devcluster; tests/integration/gpujobs/test_watcher_replicas.py has it).
        env["GPUJOBS_WATCHER_LEADER_ELECTION"] = "0"
        logs = Path(tempfile.mkdtemp(prefix="bench-kueue-"))
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
                    f"bench-kueue-{run_id}@%h",
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
        following = Following(api_client, set(slugs))
        following.start()
        time.sleep(3)  # the watches' first lists

        worker, watcher = processes

        def metered(run_one):
            # Where each run's CPU went: the portal's processes, this one (the API calls, the
            # watches, kubectl), the control plane with Kueue, PostgreSQL and Redis.
            meter = CpuMeter(
                pids={"Celery worker": worker.pid, "watcher": watcher.pid},
                names=SHARED_SERVICES,
            )
            meter.start()
            result = run_one()
            result["cpu_seconds"] = meter.stop()
            return result

        batch = client.BatchV1Api(api_client)
        if "portal" in RUNS:
            log(f"Kueue through the portal: {JOBS} jobs")
            results["portal_kueue"] = metered(
                lambda: portal_kueue_run(cluster, users, slugs, following, batch)
            )
        if "kubectl" in RUNS:
            log(f"Kueue alone: the same {JOBS} Jobs with kubectl create")
            results["kubectl_kueue"] = metered(
                lambda: kubectl_run(kubectl, handle.kubeconfig, cluster, slugs, following, batch)
            )
        if "quota" in RUNS:
            log(f"quota only through the portal: {JOBS} jobs")
            Cluster.objects.filter(pk=cluster.pk).update(quota_mode=QuotaMode.QUOTA_ONLY)
            cluster.refresh_from_db()
            reconcile_all(cluster, core, slugs)  # the queues go, the quotas are the grants again
            results["portal_quota_only"] = metered(
                lambda: portal_quota_run(cluster, users, slugs, following, batch)
            )
        following.stop.set()

        if "portal_kueue" in results and "kubectl_kueue" in results:
            portal, alone = results["portal_kueue"], results["kubectl_kueue"]
            results["admission_throughput_ratio"] = round(
                portal["admission_jobs_per_s"] / alone["admission_jobs_per_s"], 3
            )
        results["watcher_log_tail"] = (logs / "watcher.log").read_text()[-600:]
    finally:
        for process in processes:
            stop(process)
        log("cleaning up: Kueue objects, namespaces, nodes and the benchmark's rows")
        if cluster is not None:
            # Quota only: the reconcile takes the teams' queues and the cluster's flavors away.
            Cluster.objects.filter(pk=cluster.pk).update(quota_mode=QuotaMode.QUOTA_ONLY)
            patiently(
                "reconcile the cluster to quota only",
                lambda: reconcile_all(cluster, core, slugs),
                log=log,
            )
        forget(slugs)
        for slug in slugs:
            patiently(
                f"delete namespace {slug}",
                lambda s=slug: core.delete_namespace(s, propagation_policy="Background"),
                log=log,
            )
        for name in node_names:
            patiently(
                f"remove node {name}", lambda n=name: handle.remove_node(n, wait=False), log=log
            )
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    results["finished_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return results


def write(results: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = {k: v for k, v in results.items() if k != "watcher_log_tail"}
    (RESULTS / "kueue.json").write_text(json.dumps(results, indent=2) + "\n")
    runs = [
        (name, results[key])
        for name, key in (
            ("Kueue through the portal", "portal_kueue"),
            ("Kueue alone (`kubectl create -f`)", "kubectl_kueue"),
            ("quota only, through the portal", "portal_quota_only"),
        )
        if key in results
    ]
    lines = [
        f"# {results['jobs']} {job_size()} jobs from {results['teams']} teams on "
        f"{results['gpus']} GPUs of two models",
        "",
        f"{results['gpus'] // 2} × {results['models'][0]} and {results['gpus'] // 2} × "
        f"{results['models'][1]} on temporary simulated nodes of {NODE_GPUS}; every pod "
        f"finishes {results['run_seconds_per_job']} s after it starts. Grants split the GPUs "
        f"evenly ({min(results['grants_per_team'])}-{max(results['grants_per_team'])} per team); "
        f"demand does not ({max(results['demand_per_team'])} jobs for each of the busy half of "
        f"the teams, {min(results['demand_per_team'])} for the others). A team's first jobs, up "
        "to its quota, are guaranteed, the rest opportunistic. One Celery worker "
        f"({results['worker_threads']} threads) and the watcher, DEBUG off, PostgreSQL; "
        f"{results['cpus']} CPUs shared with everything else (load average "
        f"{results['load_average_at_start']} at the start, {results['load_average_at_end']} at "
        "the end).",
        "",
        f"**Admission throughput, portal / Kueue alone: "
        f"{results.get('admission_throughput_ratio', '—')}** (goal: at least "
        f"{ADMISSION_GOAL_AT_SCALE if scale() else ADMISSION_GOAL}).",
        "",
        "| | admitted/s | s to last admission | s to all done | submit→Running p50 s "
        "| p99 s | occupancy while jobs wait | steady | idle GPU-h while waiting | preemptions |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in runs:
        occ = r["occupancy"]
        lines.append(
            f"| {name} | {_value(r['admission_jobs_per_s'])} "
            f"| {_value(r['seconds_to_last_admission'])} "
            f"| {_value(r['seconds_to_all_succeeded'])} "
            f"| {r['submit_to_running']['p50_s']} | {r['submit_to_running']['p99_s']} "
            f"| {_percent(occ['while_waiting'])} | {_percent(occ['steady'])} "
            f"| {occ['idle_gpu_hours_while_waiting']} | {r['preemptions']} |"
        )
    if FOLLOW_UNTIL == "admitted":
        lines += [
            "",
            "Each run ended at its last admission and its Jobs were then deleted, so no run "
            "has a time for all its jobs done: what is measured needs nothing later.",
        ]
    portal, alone = results.get("portal_kueue"), results.get("kubectl_kueue")
    if portal is None or alone is None:
        (RESULTS / "kueue.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        return
    first_portal = _value(portal.get("seconds_to_first_wave_admitted"))
    first_alone = _value(alone.get("seconds_to_first_wave_admitted"))
    lines += [
        "",
        f"Submitting: {results['jobs']} API calls took {portal['api_seconds']} s (one after "
        f"another, in-process); `kubectl create -f` took {alone['kubectl_create_seconds']} s "
        "(every Job goes through Kueue's webhooks). The first "
        f"{results['gpus'] // GPUS_PER_JOB} jobs (every GPU) were admitted {first_portal} s "
        "after the first submission "
        f"through the portal, {first_alone} s after `kubectl create` began. The last Job was "
        f"on the cluster {_value(portal['seconds_to_last_job_created'])} s after the first "
        f"submission through the portal (its worker), "
        f"{_value(alone['seconds_to_last_job_created'])} s with kubectl.",
        "",
        "CPU seconds of each run (the benchmark process: the API calls, its watches, kubectl):",
        "",
        "| | " + " | ".join(portal["cpu_seconds"]) + " |",
        "| --- |" + " ---: |" * len(portal["cpu_seconds"]),
    ]
    for name, r in runs:
        lines.append(f"| {name} | " + " | ".join(str(v) for v in r["cpu_seconds"].values()) + " |")
    quota = results.get("portal_quota_only")
    if quota:
        lines += [
            "",
            f"Under quota only, {quota['jobs_refused_at_least_once']} submissions were refused "
            f"(the team's quota used up; {quota['refusals']} refusals in all, each retried once "
            "a job of the team had finished).",
        ]
    lines += [
        "",
        "Occupancy: busy GPU-seconds over all GPU-seconds while any job waits (submitted, not "
        "yet running); steady: the same from the first moment every GPU was busy. Under Kueue a "
        "job is admitted when it is un-suspended; under quota only, when its pod is created. "
        f"Sampled every {SAMPLE_SECONDS} s.",
    ]
    (RESULTS / "kueue.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def job_size() -> str:
    return "one-GPU" if GPUS_PER_JOB == 1 else f"{GPUS_PER_JOB}-GPU"


def _percent(value) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _value(value) -> str:
    return "—" if value is None else str(value)


def record(board: Summary, results: dict) -> None:
    """Admission throughput beside Kueue alone (same Jobs through ``kubectl create -f``), and the
    GPUs kept busy while jobs wait, through the portal."""
    if "portal_kueue" not in results or "kubectl_kueue" not in results:
        return
    portal, alone = results["portal_kueue"], results["kubectl_kueue"]
    quota = results.get("portal_quota_only")
    board.row(
        f"admit {portal['jobs']} {job_size()} jobs of {TEAMS} teams through Kueue",
        portal=portal["admission_jobs_per_s"],
        alternative=alone["admission_jobs_per_s"],
        alternative_is="the same Jobs by kubectl create -f into Kueue",
        unit="admitted/s",
        goal=Goal.ratio_at_least(ADMISSION_GOAL_AT_SCALE if scale() else ADMISSION_GOAL),
    )
    busy, alone_busy = (r["occupancy"]["while_waiting"] for r in (portal, alone))
    board.row(
        "GPUs busy while jobs wait (Kueue through the portal)",
        portal=None if busy is None else round(busy * 100, 1),
        alternative=None if alone_busy is None else round(alone_busy * 100, 1),
        alternative_is="Kueue alone, the same Jobs by kubectl create -f",
        unit="%",
        # At a company's scale: no more than a point below Kueue alone.
        goal=Goal.difference_at_least(-1) if scale() else Goal.portal_at_least(95),
        note=(
            f"steady {_percent(portal['occupancy']['steady'])}, Kueue alone "
            f"{_percent(alone['occupancy']['steady'])}"
            + (f"; quota only: {_percent(quota['occupancy']['while_waiting'])}" if quota else "")
        ),
    )


if __name__ == "__main__":
    board = Summary("kueue")
    handle = devcluster_api.up()
    with holding(handle):
        results = run()
    write(results)
    record(board, results)
