"""Benchmark: roll out a 10-replica inference service through the portal until every replica is
Ready, beside ``kubectl apply --server-side`` of the same objects plus ``kubectl rollout status``.

The portal's side is what production runs: ``POST /api/v1/services/`` (the checks, the team's
quota under its row lock, the rows, the enqueue), a real Celery worker applying the service's
objects (the reconcile: discovery, lists, server-side apply), and the watcher (``manage.py
watch_jobs``) writing each replica's readiness back. It is timed from the POST to the portal
showing 10 of 10 replicas ready (what the API and the page read), and, for the lag, to the
Deployment's own status saying so (polled by this process). The other side applies the very
objects the portal builds (``serving.manifests.service_objects``: the Deployment, its Services
and, as the portal's reconcile chose for the cluster, the Gateway API's HTTPRoute) with kubectl,
and waits with ``kubectl rollout status``. The ratio of the two is in the results. The API call
is made by one signed-in client throughout, its middleware loaded as a running portal's is.

The replicas run on temporary GPU nodes of their own (labelled ``hardware-type: gpu-bench``: the
benchmark's cluster row places GPU pods there, so the shared nodes' GPUs are never taken); kwok
marks pods Ready without a readiness probe ever running, and no traffic is served. Namespaces,
nodes and rows are removed at the end. Results go to ``bench-results/serving.{json,md}``. Run
through ``make bench`` (a scratch database, DEBUG off); it starts the devcluster if it is not
running.
"""

import datetime
import json
import os
import shutil
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
from tests.bench.helpers import run_apart  # noqa: E402

run_apart("serving")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402
from kubernetes import client  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from clusters.models import Cluster, GpuCapacity  # noqa: E402
from devcluster import api as devcluster_api  # noqa: E402
from devcluster import builder, nodes  # noqa: E402
from gpujobs.manifests import cluster_placement  # noqa: E402
from gpujobs.specs import ContainerRequest  # noqa: E402
from serving import manifests  # noqa: E402
from serving.models import InferenceService, Revision  # noqa: E402
from serving.specs import Probe, RevisionRequest  # noqa: E402
from tenants.models import AuditEvent, Membership, QuotaGrant, QuotaRequest, Team  # noqa: E402
from tests.bench.helpers import (  # noqa: E402
    patiently,
    run_kubectl,
    signed_in_client,
    start,
    stop,
    team_namespace_labels,
)
from tests.bench.summary import Goal, Summary  # noqa: E402

REPLICAS = int(os.environ.get("BENCH_SERVING_REPLICAS", "10"))
RUNS = int(os.environ.get("BENCH_SERVING_RUNS", "9"))
NODE_GPUS = 8
BENCH_LABEL = "gpu-bench"
CLUSTER_NAME = "bench-serving"
TIMEOUT = float(os.environ.get("BENCH_SERVING_TIMEOUT", "300"))
POLL_SECONDS = 0.02
RESULTS = REPO_ROOT / "bench-results"
KUBECTL_CACHE = Path(tempfile.gettempdir()) / f"bench-serving-kubectl-{os.getpid()}"
IMAGE = "registry.example.com/bench/llm-server:1"


def log(message: str) -> None:
    print(f"[bench_serving {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def make_namespace(core, name: str) -> None:
    """The team's namespace as the portal's reconcile would have made it (no quota: the
    portal's own check is what the benchmark measures)."""
    labels = team_namespace_labels(name)
    core.create_namespace({"apiVersion": "v1", "metadata": {"name": name, "labels": labels}})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_service_account("default", name)
            return
        except ApiException:
            time.sleep(0.2)
    sys.exit(f"namespace {name} never got its default service account")


def seed(cluster: Cluster, slug: str) -> User:
    team = Team.objects.create(slug=slug, name=f"Bench {slug}")
    user = User.objects.create(username=f"{slug}-member")
    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    Membership.objects.create(team=team, user=user, role=Membership.Role.MEMBER)
    today = timezone.localdate()
    request = QuotaRequest.objects.create(
        team=team,
        cluster=cluster,
        gpus=REPLICAS,
        starts_on=today,
        justification="Benchmark.",
        requested_by=user,
        state=QuotaRequest.State.APPROVED,
    )
    QuotaGrant.objects.create(
        request=request,
        team=team,
        cluster=cluster,
        gpus=REPLICAS,
        starts_on=today,
        granted_by=admin,
    )
    return user


def forget(slug: str) -> None:
    from django.db import connection

    connection.close()
    team = Team.objects.filter(slug=slug).first()
    if team is None:
        return
    Revision.objects.filter(service__team=team).delete()
    InferenceService.objects.filter(team=team).delete()
    AuditEvent.objects.filter(team=team).delete()
    QuotaGrant.objects.filter(team=team).delete()
    QuotaRequest.objects.filter(team=team).delete()
    User.objects.filter(username=f"{slug}-member").delete()
    team.delete()
    Cluster.objects.filter(name=CLUSTER_NAME).delete()


def deployment_ready_replicas(apps, namespace: str, name: str) -> int | None:
    """The Deployment's ready replicas, or None while it does not exist."""
    try:
        status = apps.read_namespaced_deployment_status(name, namespace).status
    except ApiException:
        return None
    return status.ready_replicas or 0


@override_settings(ALLOWED_HOSTS=["testserver"])
def portal_run(api: Client, cluster: Cluster, slug: str, name: str, apps) -> dict:
    """POST the service as ``api``'s user, then time the portal's rows (and the Deployment's
    status) to 10/10."""
    body = {
        "team": slug, "cluster": cluster.name, "name": name, "image": IMAGE,
        "command": ["python", "-m", "serve"], "gpus": 1, "replicas": REPLICAS, "port": 8000,
        "probe_path": "/healthz",
    }  # fmt: skip
    seen: dict[str, float] = {}

    def watch_deployment():
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and "cluster" not in seen:
            ready = deployment_ready_replicas(apps, slug, f"{name}-r1")
            if ready is not None:
                seen.setdefault("created", time.perf_counter())
            if ready is not None and ready >= REPLICAS:
                seen["cluster"] = time.perf_counter()
            time.sleep(0.05)

    started = time.perf_counter()
    response = api.post("/api/v1/services/", body, content_type="application/json")
    accepted = time.perf_counter()
    if response.status_code != 201:
        sys.exit(f"deploy failed: {response.status_code} {response.content[:500]}")
    watcher = threading.Thread(target=watch_deployment, daemon=True)
    watcher.start()
    service_id = response.json()["id"]
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        ready = (
            Revision.objects.filter(service_id=service_id, number=1)
            .values_list("ready_replicas", flat=True)
            .first()
        )
        if ready == REPLICAS:
            shown = time.perf_counter()
            break
        time.sleep(POLL_SECONDS)
    else:
        sys.exit(f"the portal never showed {REPLICAS} replicas ready")
    watcher.join(TIMEOUT)
    response = api.delete(f"/api/v1/services/{service_id}/")
    deadline = time.monotonic() + TIMEOUT
    while InferenceService.objects.get(pk=service_id).state != "deleted":
        if time.monotonic() > deadline:
            sys.exit("the benchmark's service was never deleted")
        time.sleep(0.2)
    return {
        "api_seconds": round(accepted - started, 3),
        "seconds_to_portal_showing_all_ready": round(shown - started, 2),
        "seconds_to_deployment_status_all_ready": round(seen["cluster"] - started, 2)
        if "cluster" in seen
        else None,
        "seconds_to_deployment_on_the_cluster": round(seen["created"] - started, 2)
        if "created" in seen
        else None,
    }


def kubectl_run(
    kubectl: str, kubeconfig: Path, namespace: str, placement, name: str, routing: str
) -> dict:
    """The same objects the portal makes for the service (its Deployment, its Services and,
    with the Gateway API, its HTTPRoute) applied with kubectl, and kubectl waiting for the
    Deployment's rollout. kubectl keeps its discovery cache from one run to the next (the
    warm-up run fills it), as a user's does."""
    request = RevisionRequest(
        main=ContainerRequest(image=IMAGE, command=("python", "-m", "serve")),
        gpus=1,
        port=8000,
        probe=Probe(path="/healthz"),
    )
    revision = manifests.RevisionSpec(number=1, request=request, replicas=REPLICAS, weight=100)
    spec = manifests.ServiceSpec(
        service_id=0,
        name=name,
        namespace=namespace,
        routing=routing,
        placement=placement,
        revisions=(revision,),
    )
    objects = {"apiVersion": "v1", "kind": "List", "items": manifests.service_objects(spec)}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(objects, file)
        path = file.name
    base = [kubectl, "--kubeconfig", str(kubeconfig), "-n", namespace]
    started = time.perf_counter()
    applied = run_kubectl(
        [*base, "apply", "--server-side", "-f", path], cache=KUBECTL_CACHE, fresh_cache=False
    )
    applied_at = time.perf_counter()
    rolled = subprocess.run(
        [*base, "rollout", "status", f"deployment/{name}-r1", f"--timeout={int(TIMEOUT)}s"],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if rolled.returncode != 0:
        sys.exit(f"kubectl rollout status failed:\n{rolled.stderr[-2000:]}")
    deleted = subprocess.run([*base, "delete", "-f", path], capture_output=True, text=True)
    Path(path).unlink()
    if deleted.returncode != 0:
        sys.exit(f"kubectl delete failed:\n{deleted.stderr[-2000:]}")
    return {
        "seconds": round(seconds, 2),
        "apply_seconds": round(applied_at - started, 2),
        "start_and_discovery_seconds": applied["start_and_discovery_seconds"],
        "writing_seconds": applied["apply_seconds"],
        "objects": [o["kind"] for o in objects["items"]],
    }


def run() -> dict:
    handle = devcluster_api.up()
    kubectl = str(builder.binary("kubectl"))
    api_client = handle.api_client()
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    run_id = uuid.uuid4().hex[:6]
    portal_ns, kubectl_ns = f"bench-sv-{run_id}", f"bench-sk-{run_id}"
    results: dict = {
        "replicas": REPLICAS,
        "runs": RUNS,
        "cpus": os.cpu_count(),
        "load_average_at_start": round(os.getloadavg()[0], 2),
    }
    count = -(-REPLICAS // NODE_GPUS)
    log(f"adding {count} GPU nodes of {NODE_GPUS} GPUs")
    names = [
        handle.add_gpu_node(
            name=f"bench-serving-{run_id}-{i}", gpus=NODE_GPUS,
            labels={"hardware-type": BENCH_LABEL}, wait=False,
        )
        for i in range(count)
    ]  # fmt: skip
    nodes.wait_for_ready(api_client, names)
    processes = []
    try:
        cluster, _ = Cluster.objects.update_or_create(
            name=CLUSTER_NAME,
            defaults={
                "kubeconfig_path": str(handle.kubeconfig),
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
            defaults={"allocatable": count * NODE_GPUS},
        )
        user = seed(cluster, portal_ns)
        make_namespace(core, portal_ns)
        make_namespace(core, kubectl_ns)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # One watcher: no leader election (its Lease would need deploy/namespace.yaml's
        # namespace on the devcluster; tests/integration/gpujobs/test_watcher_replicas.py has it).
        env["GPUJOBS_WATCHER_LEADER_ELECTION"] = "0"
        logs = Path(tempfile.mkdtemp(prefix="bench-serving-"))
        processes.append(
            start(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "portal",
                    "worker",
                    "--pool=solo",
                    "--loglevel=INFO",
                    "--without-gossip",
                    "--without-mingle",
                    "-n",
                    f"bench-serving-{run_id}@%h",
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
        time.sleep(2)  # the watcher lists the cluster once it finds its row
        portal, kubectl_runs = [], []
        api = signed_in_client(user)
        # A first run of each side that is not counted: the first rollout of a process pays
        # its imports and first connections (the portal's API call, its worker's discovery;
        # kubectl's cold caches), which a running portal has long paid.
        for i in range(RUNS + 1):
            log(f"run {i}/{RUNS}: the portal" + (" (warm-up, not counted)" if i == 0 else ""))
            portal.append(portal_run(api, cluster, portal_ns, f"bench-{i}", apps))
            log(f"run {i}/{RUNS}: kubectl" + (" (warm-up, not counted)" if i == 0 else ""))
            # The routing the portal's reconcile chose for the cluster (the Gateway API's
            # HTTPRoute when the cluster has it), so that kubectl makes the same objects.
            routing = InferenceService.objects.get(team__slug=portal_ns, name=f"bench-{i}").routing
            kubectl_runs.append(
                kubectl_run(
                    kubectl,
                    handle.kubeconfig,
                    kubectl_ns,
                    cluster_placement(cluster),
                    f"bench-{i}",
                    routing,
                )
            )
        results["warm_up"] = {"portal": portal.pop(0), "kubectl": kubectl_runs.pop(0)}
        results["portal_runs"] = portal
        results["kubectl_runs"] = kubectl_runs
        portal_seconds = median([r["seconds_to_portal_showing_all_ready"] for r in portal])
        cluster_seconds = [
            r["seconds_to_deployment_status_all_ready"]
            for r in portal
            if r["seconds_to_deployment_status_all_ready"] is not None
        ]
        kubectl_seconds = median([r["seconds"] for r in kubectl_runs])
        results["portal_median_seconds"] = portal_seconds
        results["portal_deployment_ready_median_seconds"] = (
            median(cluster_seconds) if cluster_seconds else None
        )
        results["portal_api_median_ms"] = round(
            statistics.median(r["api_seconds"] for r in portal) * 1000, 1
        )
        results["kubectl_median_seconds"] = kubectl_seconds
        # Where the time goes: until the Deployment is on the cluster (the portal: its API, the
        # worker's pass; kubectl: its process start, discovery and apply), then to all ready.
        created = [
            r["seconds_to_deployment_on_the_cluster"]
            for r in portal
            if r["seconds_to_deployment_on_the_cluster"] is not None
        ]
        results["portal_deployment_created_median_seconds"] = median(created) if created else None
        results["kubectl_apply_median_seconds"] = median([r["apply_seconds"] for r in kubectl_runs])
        results["kubectl_start_and_discovery_median_seconds"] = median(
            [r["start_and_discovery_seconds"] for r in kubectl_runs]
        )
        results["kubectl_writing_median_seconds"] = median(
            [r["writing_seconds"] for r in kubectl_runs]
        )
        results["portal_to_kubectl_time_ratio"] = round(portal_seconds / kubectl_seconds, 2)
    finally:
        for process in processes:
            stop(process)
        log("cleaning up: namespaces, nodes and the benchmark's rows")
        shutil.rmtree(KUBECTL_CACHE, ignore_errors=True)
        forget(portal_ns)
        for namespace in (portal_ns, kubectl_ns):
            patiently(
                f"delete namespace {namespace}",
                lambda n=namespace: core.delete_namespace(n, propagation_policy="Background"),
                log=log,
            )
        for name in names:
            patiently(
                f"remove node {name}", lambda n=name: handle.remove_node(n, wait=False), log=log
            )
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    results["finished_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return results


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "serving.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        f"# Rolling out a {results['replicas']}-replica inference service on the devcluster",
        "",
        f"Median of {results['runs']} runs, after a first run of each side not counted. One GPU "
        "per replica on temporary simulated nodes; "
        "kwok marks pods Ready (no probe runs, no traffic is served). One Celery worker and the "
        f"watcher, DEBUG off, PostgreSQL; {results['cpus']} CPUs shared with everything else "
        f"(load average {results['load_average_at_start']} at the start, "
        f"{results['load_average_at_end']} at the end).",
        "",
        "| | seconds |",
        "| --- | ---: |",
        "| portal: `POST /api/v1/services/` to the portal showing all replicas ready "
        f"| {results['portal_median_seconds']} |",
        "| portal: the same POST to the Deployment's status saying all ready "
        f"| {results['portal_deployment_ready_median_seconds']} |",
        "| `kubectl apply --server-side` of the same objects "
        f"({', '.join(results['kubectl_runs'][0]['objects'])}) + `kubectl rollout status` "
        f"| {results['kubectl_median_seconds']} |",
        "| portal: the POST to the Deployment on the cluster (polled every 50 ms) "
        f"| {results['portal_deployment_created_median_seconds']} |",
        "| kubectl: `kubectl apply` returned (its process start and discovery included) "
        f"| {results['kubectl_apply_median_seconds']} |",
        "| kubectl: of which its process start and API discovery (a warm discovery cache) "
        f"| {results['kubectl_start_and_discovery_median_seconds']} |",
        "| kubectl: of which its writes, from the first "
        f"| {results['kubectl_writing_median_seconds']} |",
        "",
        f"Portal / kubectl: **{results['portal_to_kubectl_time_ratio']}×**. The API call itself "
        f"(checks, quota under the team's lock, rows, enqueue): {results['portal_api_median_ms']} "
        "ms.",
        "",
    ]
    (RESULTS / "serving.md").write_text("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    """The rollout through the portal until it shows every replica ready, beside ``kubectl
    apply --server-side`` of the same objects plus ``kubectl rollout status``."""
    board.row(
        f"roll out a {results['replicas']}-replica service until all Ready",
        portal=results["portal_median_seconds"],
        alternative=results["kubectl_median_seconds"],
        alternative_is="kubectl apply --server-side of the same objects + rollout status",
        unit="s",
        goal=Goal.ratio_at_most(1.0),
        note=(
            f"kubectl's process start and API discovery, warm cache: "
            f"{results['kubectl_start_and_discovery_median_seconds']} s of its time; "
            f"the portal's API call {results['portal_api_median_ms']} ms"
        ),
    )


def main() -> None:
    board = Summary("serving")
    results = run()
    write(results)
    record(board, results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
