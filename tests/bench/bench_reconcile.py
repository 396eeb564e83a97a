"""Benchmark: reconcile 200 teams on the devcluster from cold and again with nothing changed,
beside ``kubectl apply --server-side`` of the same manifests on the same cluster.

Each team has a lead, a member, a viewer and a grant, so it gets a Namespace, a ResourceQuota,
a LimitRange and three RoleBindings (1,200 objects in all). The portal's passes run in this
process, one team after another, through ``tenants.reconcile`` exactly as the Celery task runs
them (database reads, the advisory lock, the status row), with one API client kept for the whole
pass as a worker keeps it. kubectl gets the same objects, built by the same functions, for a
second set of namespaces, in one multi-document file, and is run twice. Write calls are counted
by the portal's client, and for kubectl from its request log (``-v=6``).

Results go to ``bench-results/reconcile.{json,md}``. Run through ``make bench`` (a scratch
database, DEBUG off); it starts the devcluster if it is not running.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_LOG_LEVEL", "WARNING")  # the portal logs every write at INFO

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.utils import timezone  # noqa: E402

from clusters.kube import KubeClient  # noqa: E402
from clusters.models import Cluster, GpuCapacity  # noqa: E402
from devcluster import api as devcluster_api  # noqa: E402
from devcluster import builder  # noqa: E402
from tenants import manifests, reconcile  # noqa: E402
from tenants.models import Membership, QuotaGrant, QuotaRequest, Team  # noqa: E402
from tests.bench.summary import Goal, Summary  # noqa: E402

TEAMS = int(os.environ.get("BENCH_RECONCILE_TEAMS", "200"))
PORTAL_PREFIX = "bench-rc"
KUBECTL_PREFIX = "bench-kc"
RESULTS = REPO_ROOT / "bench-results"


def seed(cluster: Cluster) -> list[Team]:
    """TEAMS teams with a lead, a member and a viewer and one grant each."""
    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    teams = []
    today = timezone.localdate()
    for i in range(TEAMS):
        slug = f"{PORTAL_PREFIX}-{i:03d}"
        team, created = Team.objects.get_or_create(slug=slug, defaults={"name": f"Bench {i}"})
        teams.append(team)
        if not created:
            continue
        for role in Membership.Role.values:
            user, _ = User.objects.get_or_create(username=f"{slug}-{role}")
            Membership.objects.get_or_create(team=team, user=user, defaults={"role": role})
        lead = User.objects.get(username=f"{slug}-lead")
        quota_request = QuotaRequest.objects.create(
            team=team, cluster=cluster, gpus=1 + i % 4, starts_on=today, justification="Bench.",
            requested_by=lead, state=QuotaRequest.State.APPROVED, decided_by=admin,
        )  # fmt: skip
        QuotaGrant.objects.create(
            request=quota_request, team=team, cluster=cluster, gpus=quota_request.gpus,
            starts_on=today, granted_by=admin,
        )  # fmt: skip
    return teams


def remove_seed() -> None:
    """Take the benchmark's rows out again: the database is shared with the other benchmarks,
    whose own seeding must not meet these teams' grants (they protect their requests)."""
    teams = Team.objects.filter(slug__startswith=f"{PORTAL_PREFIX}-")
    QuotaGrant.objects.filter(team__in=teams).delete()
    QuotaRequest.objects.filter(team__in=teams).delete()
    Cluster.objects.filter(name="bench-dev").delete()  # with its capacity and status rows
    User.objects.filter(username__startswith=f"{PORTAL_PREFIX}-").delete()
    teams.delete()


def bench_namespaces(kube: KubeClient) -> list[str]:
    labelled = kube.list("Namespace", label_selector="app.kubernetes.io/managed-by=gpu-portal")
    return [
        ns["metadata"]["name"]
        for ns in labelled
        if ns["metadata"]["name"].startswith((PORTAL_PREFIX, KUBECTL_PREFIX))
    ]


def clear_namespaces(kube: KubeClient, timeout: float = 600) -> None:
    """Delete the benchmark's namespaces and wait until they are gone: passes start cold."""
    for name in bench_namespaces(kube):
        kube.delete("Namespace", name)
    deadline = time.monotonic() + timeout
    while remaining := bench_namespaces(kube):
        if time.monotonic() > deadline:
            sys.exit(f"{len(remaining)} benchmark namespaces still terminating after {timeout}s")
        time.sleep(2)


def portal_pass(teams: list[Team], cluster: Cluster, kube: KubeClient) -> dict:
    reads, writes = kube.reads, kube.writes
    started = time.perf_counter()
    for team in teams:
        reconcile.reconcile_team_on_cluster(team_id=team.pk, cluster_id=cluster.pk, kube=kube)
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "reads": kube.reads - reads,
        "writes": kube.writes - writes,
    }


def kubectl_manifests(teams: list[Team], cluster: Cluster, path: Path) -> int:
    """The portal's objects for each team, under the kubectl prefix; Namespaces first."""
    rules = reconcile.policy()
    namespaces, rest = [], []
    for team in teams:
        state = reconcile.team_state(team=team, cluster=cluster)
        slug = team.slug.replace(PORTAL_PREFIX, KUBECTL_PREFIX, 1)
        state = manifests.TeamOnCluster(**{**state.__dict__, "slug": slug})
        for obj in manifests.desired_objects(state, rules):
            (namespaces if obj["kind"] == "Namespace" else rest).append(obj)
    documents = namespaces + rest
    path.write_text("\n---\n".join(json.dumps(doc) for doc in documents) + "\n")
    return len(documents)


def kubectl_pass(kubectl: str, kubeconfig: Path, path: Path) -> dict:
    started = time.perf_counter()
    run = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), "apply", "--server-side",
         "--field-manager=gpu-portal", "--force-conflicts", "-v=6", "-f", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if run.returncode != 0:
        sys.exit(f"kubectl apply failed:\n{run.stderr[-3000:]}")
    requests = re.findall(
        r'"Response" verb="(\w+)"|\] (GET|PATCH|POST|PUT|DELETE) https', run.stderr
    )
    verbs = [a or b for a, b in requests]
    return {
        "seconds": round(seconds, 3),
        "reads": sum(v == "GET" for v in verbs),
        "writes": sum(v != "GET" for v in verbs),
    }


def run() -> dict:
    handle = devcluster_api.up()
    kubectl = str(builder.binary("kubectl"))
    remove_seed()  # what an interrupted run may have left
    cluster, _ = Cluster.objects.update_or_create(
        name="bench-dev", defaults={"kubeconfig_path": str(handle.kubeconfig)}
    )
    GpuCapacity.objects.get_or_create(cluster=cluster, resource_name="nvidia.com/gpu",
                                      defaults={"allocatable": 4096})  # fmt: skip
    teams = seed(cluster)
    kube = KubeClient.for_cluster(cluster)
    clear_namespaces(kube)

    # The machine may be shared (the figures move with its load): say how busy it was.
    results: dict = {"teams": len(teams), "load_average_1m_at_start": os.getloadavg()[0]}
    results["portal_cold"] = portal_pass(teams, cluster, kube)
    results["portal_unchanged"] = portal_pass(teams, cluster, kube)

    workdir = Path(tempfile.mkdtemp(prefix="bench-reconcile-"))
    try:
        manifest_file = workdir / "teams.yaml"
        results["objects"] = kubectl_manifests(teams, cluster, manifest_file)
        results["kubectl_cold"] = kubectl_pass(kubectl, handle.kubeconfig, manifest_file)
        results["kubectl_unchanged"] = kubectl_pass(kubectl, handle.kubeconfig, manifest_file)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        for name in bench_namespaces(kube):  # leave the cluster as it was; the next run waits
            kube.delete("Namespace", name)
        remove_seed()

    for phase in ("cold", "unchanged"):
        results[f"{phase}_ratio_portal_to_kubectl"] = round(
            results[f"portal_{phase}"]["seconds"] / results[f"kubectl_{phase}"]["seconds"], 2
        )
    results["unchanged_pass_write_calls"] = results["portal_unchanged"]["writes"]
    results["load_average_1m_at_end"] = os.getloadavg()[0]
    results["cpus"] = os.cpu_count()
    return results


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "reconcile.json").write_text(json.dumps(results, indent=2) + "\n")
    rows = [
        ("Portal reconcile, cold", results["portal_cold"]),
        ("Portal reconcile, unchanged", results["portal_unchanged"]),
        ("kubectl apply --server-side, cold", results["kubectl_cold"]),
        ("kubectl apply --server-side, unchanged", results["kubectl_unchanged"]),
    ]
    lines = [
        f"# Reconciling {results['teams']} teams ({results['objects']} objects) on the devcluster",
        "",
        "One pass after another in one process; the portal through tenants.reconcile (database,",
        "lock and status row included), kubectl with one multi-document file.",
        "",
        "| pass | seconds | read calls | write calls |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {name} | {r['seconds']} | {r['reads']} | {r['writes']} |" for name, r in rows),
        "",
        f"Portal / kubectl time, cold: {results['cold_ratio_portal_to_kubectl']}; "
        f"unchanged: {results['unchanged_ratio_portal_to_kubectl']}.",
        f"Write calls of the portal's unchanged pass: {results['unchanged_pass_write_calls']} "
        "(goal: 0).",
        "",
        f"Machine: {results['cpus']} CPUs, load average {results['load_average_1m_at_start']:.1f} "
        f"at the start and {results['load_average_1m_at_end']:.1f} at the end (the API server, "
        "etcd, PostgreSQL and the benchmark share them).",
    ]
    (RESULTS / "reconcile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    cold, unchanged = results["portal_cold"], results["portal_unchanged"]
    board.row(
        f"reconcile {results['teams']} teams ({results['objects']:,} objects), cold",
        portal=cold["seconds"],
        alternative=results["kubectl_cold"]["seconds"],
        alternative_is="kubectl apply --server-side of the same manifests",
        unit="s",
        goal=Goal.ratio_at_most(0.8),
    )
    board.row(
        f"reconcile {results['teams']} teams, nothing changed",
        portal=unchanged["seconds"],
        alternative=cold["seconds"],
        alternative_is="the portal's cold pass",
        unit="s",
        goal=Goal.ratio_at_most(0.1),
        note=f"{unchanged['reads']} reads, {unchanged['writes']} writes",
    )
    board.row(
        f"reconcile {results['teams']} teams, nothing changed: writes",
        portal=unchanged["writes"],
        unit="writes",
        goal=Goal.portal_at_most(0),
    )


if __name__ == "__main__":
    board = Summary("reconcile")
    outcome = run()
    write(outcome)
    record(board, outcome)
    if outcome["unchanged_pass_write_calls"]:
        sys.exit("the unchanged pass wrote to the cluster")
