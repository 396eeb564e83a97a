"""Benchmark: reconcile 200, 1,000 and 2,000 teams on the devcluster from cold and again with
nothing changed, beside ``kubectl apply --server-side`` of the same manifests on the same cluster.

Each team has a lead, a member, a viewer and a grant, so it gets a Namespace, a ResourceQuota,
a LimitRange, a NetworkPolicy and three RoleBindings (7 objects). The portal's passes are what
the periodic sweep runs (``reconcile.sweep.reconcile_cluster_teams``: one list per kind
for the cluster, then a full pass, as the Celery task makes it, for each team not in sync,
``PORTAL_RECONCILE_SWEEP_CONCURRENCY`` at a time over one pooled client), in this process, with
one API client kept for the whole run as a worker keeps it. Each size has teams of its own, so
each cold pass is cold; the lists of the later sizes hold the earlier sizes' objects too.

kubectl gets the same objects, built by the same functions (the same ResourceQuota), for a
second set of namespaces, in one multi-document file, and is run twice per size it is run at
(``BENCH_RECONCILE_KUBECTL_SIZES``, default the smallest). Its figure is split from its request
log (``-v=6``): process start and API discovery (until its first write), and the apply itself
(first write to exit); a fresh discovery cache each run. Request counts come from the portal's
client and from kubectl's log.

Results go to ``bench-results/reconcile.{json,md}`` and rows to the summary. Run through
``make bench`` (a scratch database, DEBUG off); it starts the devcluster if it is not running.
``BENCH_RECONCILE_TEAMS=40,80`` runs smaller sizes.
"""

import json
import os
import shutil
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

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.utils import timezone  # noqa: E402

from clusters.kube import KubeClient  # noqa: E402
from clusters.models import Cluster, GpuCapacity  # noqa: E402
from devcluster import api as devcluster_api  # noqa: E402
from devcluster import builder  # noqa: E402
from reconcile import (  # noqa: E402
    desired_state,
    manifests,
    passes,
    sweep,
)
from tenants.models import Membership, QuotaGrant, QuotaRequest, Team, TeamCluster  # noqa: E402
from tests.bench.helpers import holding, run_kubectl  # noqa: E402
from tests.bench.summary import Goal, Summary, results_dir, scale  # noqa: E402

SIZES = [int(n) for n in os.environ.get("BENCH_RECONCILE_TEAMS", "200,1000,2000").split(",")]
KUBECTL_SIZES = {
    int(n) for n in os.environ.get("BENCH_RECONCILE_KUBECTL_SIZES", str(SIZES[0])).split(",")
}
# An unchanged pass against the cold one: the lab's goal, and a company's (``make bench-scale``).
UNCHANGED_GOAL, UNCHANGED_GOAL_AT_SCALE = 0.1, 0.05
PORTAL_PREFIX = "bench-rc"
KUBECTL_PREFIX = "bench-kc"
RESULTS = results_dir()


def seed(cluster: Cluster, size: int) -> list[Team]:
    """``size`` teams of their own with a lead, a member and a viewer and one grant each, and
    their ``TeamCluster`` rows (as an approval leaves them), in bulk."""
    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    today = timezone.localdate()
    slugs = [f"{PORTAL_PREFIX}-{size}-{i:04d}" for i in range(size)]
    Team.objects.bulk_create([Team(slug=slug, name=slug) for slug in slugs])
    teams = list(Team.objects.filter(slug__in=slugs).order_by("slug"))
    roles = Membership.Role.values
    User.objects.bulk_create(
        [User(username=f"{team.slug}-{role}") for team in teams for role in roles]
    )
    users = {
        u.username: u for u in User.objects.filter(username__startswith=f"{PORTAL_PREFIX}-{size}-")
    }
    Membership.objects.bulk_create(
        [
            Membership(team=team, user=users[f"{team.slug}-{role}"], role=role)
            for team in teams
            for role in roles
        ]
    )
    requests = QuotaRequest.objects.bulk_create(
        [
            QuotaRequest(
                team=team,
                cluster=cluster,
                gpus=1 + i % 4,
                starts_on=today,
                justification="Bench.",
                requested_by=users[f"{team.slug}-lead"],
                state=QuotaRequest.State.APPROVED,
                decided_by=admin,
            )
            for i, team in enumerate(teams)
        ]
    )
    QuotaGrant.objects.bulk_create(
        [
            QuotaGrant(
                request=r,
                team=r.team,
                cluster=cluster,
                gpus=r.gpus,
                starts_on=today,
                granted_by=admin,
            )
            for r in requests
        ]
    )
    TeamCluster.objects.bulk_create([TeamCluster(team=team, cluster=cluster) for team in teams])
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


def delete_namespaces(kube: KubeClient) -> None:
    names = bench_namespaces(kube)
    passes.each(lambda name: kube.delete("Namespace", name), names)


def clear_namespaces(kube: KubeClient, timeout: float = 900) -> None:
    """Delete the benchmark's namespaces and wait until they are gone: passes start cold."""
    delete_namespaces(kube)
    deadline = time.monotonic() + timeout
    while remaining := bench_namespaces(kube):
        if time.monotonic() > deadline:
            sys.exit(f"{len(remaining)} benchmark namespaces still terminating after {timeout}s")
        time.sleep(2)


def portal_pass(teams: list[Team], cluster: Cluster, kube: KubeClient) -> dict:
    reads, writes = kube.reads, kube.writes
    cpu = time.process_time()
    started = time.perf_counter()
    outcome = sweep.reconcile_cluster_teams(
        cluster_id=cluster.pk, team_ids=[team.pk for team in teams], kube=kube
    )
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    if outcome.failed:
        team_id, error = next(iter(outcome.failed.items()))
        sys.exit(f"{len(outcome.failed)} passes failed, team {team_id}: {error}")
    return {
        "seconds": round(seconds, 3),
        # This process's CPU time (all its threads): what the portal's side costs the machine.
        "cpu_seconds": round(cpu, 3),
        "reads": kube.reads - reads,
        "writes": kube.writes - writes,
        "teams_in_sync": len(outcome.in_sync),
        "team_passes": len(outcome.passed),
    }


def kubectl_manifests(teams: list[Team], cluster: Cluster, path: Path) -> int:
    """The portal's objects for each team, under the kubectl prefix; Namespaces first."""
    rules = desired_state.policy()
    namespaces, rest = [], []
    for state in desired_state.team_states(teams=teams, cluster=cluster).values():
        team_slug = state.slug.replace(PORTAL_PREFIX, KUBECTL_PREFIX, 1)
        state = manifests.TeamOnCluster(**{**state.__dict__, "slug": team_slug})
        for obj in manifests.desired_objects(state, rules):
            (namespaces if obj["kind"] == "Namespace" else rest).append(obj)
    documents = namespaces + rest
    path.write_text("\n---\n".join(json.dumps(doc) for doc in documents) + "\n")
    return len(documents)


def kubectl_pass(kubectl: str, kubeconfig: Path, path: Path, cache: Path) -> dict:
    """One ``kubectl apply --server-side``: its whole time, and that time split at the start
    of its first write into process start plus discovery, and the apply."""
    timing = run_kubectl(
        [kubectl, "--kubeconfig", str(kubeconfig), "apply", "--server-side",
         "--field-manager=gpu-portal", "--force-conflicts", "-f", str(path)],
        cache=cache,
    )  # fmt: skip
    timing.pop("stdout")
    return timing


def measure(size: int, cluster: Cluster, kube: KubeClient, kubectl: str, handle) -> dict:
    teams = seed(cluster, size)
    result: dict = {"teams": size, "load_average_1m_at_start": os.getloadavg()[0]}
    result["portal_cold"] = portal_pass(teams, cluster, kube)
    result["portal_unchanged"] = portal_pass(teams, cluster, kube)
    if size in KUBECTL_SIZES:
        workdir = Path(tempfile.mkdtemp(prefix="bench-reconcile-"))
        try:
            manifest_file = workdir / "teams.yaml"
            result["objects"] = kubectl_manifests(teams, cluster, manifest_file)
            for phase in ("cold", "unchanged"):
                result[f"kubectl_{phase}"] = kubectl_pass(
                    kubectl, handle.kubeconfig, manifest_file, workdir / "cache"
                )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    result["objects"] = 7 * size
    cold, unchanged = result["portal_cold"], result["portal_unchanged"]
    result["unchanged_to_cold"] = round(unchanged["seconds"] / cold["seconds"], 3)
    result["cold_ms_per_team"] = round(1000 * cold["seconds"] / size, 2)
    result["unchanged_ms_per_team"] = round(1000 * unchanged["seconds"] / size, 2)
    if "kubectl_cold" in result:
        result["cold_ratio_to_kubectl_apply"] = round(
            cold["seconds"] / result["kubectl_cold"]["apply_seconds"], 2
        )
        result["cold_ratio_to_kubectl_total"] = round(
            cold["seconds"] / result["kubectl_cold"]["seconds"], 2
        )
    result["load_average_1m_at_end"] = os.getloadavg()[0]
    return result


def run() -> dict:
    handle = devcluster_api.up()
    kubectl = str(builder.binary("kubectl"))
    remove_seed()  # what an interrupted run may have left
    cluster, _ = Cluster.objects.update_or_create(
        name="bench-dev", defaults={"kubeconfig_path": str(handle.kubeconfig)}
    )
    GpuCapacity.objects.get_or_create(cluster=cluster, resource_name="nvidia.com/gpu",
                                      defaults={"allocatable": 4096})  # fmt: skip
    kube = KubeClient.for_cluster(cluster)
    clear_namespaces(kube)
    # The machine may be shared (the figures move with its load): say how busy it was.
    results: dict = {
        "cpus": os.cpu_count(),
        "concurrency": settings.PORTAL_RECONCILE_SWEEP_CONCURRENCY,
        "sizes": [],
    }
    try:
        with holding(handle):
            for size in SIZES:
                results["sizes"].append(measure(size, cluster, kube, kubectl, handle))
                print(json.dumps(results["sizes"][-1]), flush=True)
    finally:
        delete_namespaces(kube)  # leave the cluster as it was; the next run waits for them
        remove_seed()
    return results


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "reconcile.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# Reconciling teams on the devcluster (7 objects a team)",
        "",
        "The portal: the sweep of reconcile.sweep (one list per kind, then full passes",
        f"for the teams not in sync, {results['concurrency']} at a time; database, lock and status",
        "rows included). kubectl: apply --server-side of one multi-document file, split into",
        "process start + discovery and the apply itself.",
        "",
        "| teams | pass | seconds | ms a team | read calls | write calls |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for size in results["sizes"]:
        n = size["teams"]
        for name, key in (
            ("portal, cold", "portal_cold"),
            ("portal, unchanged", "portal_unchanged"),
            ("kubectl, cold", "kubectl_cold"),
            ("kubectl, unchanged", "kubectl_unchanged"),
        ):
            if key not in size:
                continue
            r = size[key]
            extra = ""
            if key.startswith("kubectl"):
                extra = (
                    f" (start + discovery {r['start_and_discovery_seconds']} s, apply "
                    f"{r['apply_seconds']} s)"
                )
            lines.append(
                f"| {n} | {name} | {r['seconds']}{extra} | {1000 * r['seconds'] / n:.2f} "
                f"| {r['reads']} | {r['writes']} |"
            )
    lines += [""]
    for size in results["sizes"]:
        text = (
            f"{size['teams']} teams: unchanged / cold {size['unchanged_to_cold']}; load "
            f"{size['load_average_1m_at_start']:.1f} → {size['load_average_1m_at_end']:.1f}"
        )
        if "cold_ratio_to_kubectl_apply" in size:
            text += (
                f"; portal cold / kubectl apply {size['cold_ratio_to_kubectl_apply']} "
                f"(/ kubectl in all {size['cold_ratio_to_kubectl_total']})"
            )
        lines.append(text + ".")
    lines += [
        "",
        f"Machine: {results['cpus']} CPUs (the API server, etcd, PostgreSQL and the benchmark "
        "share them).",
    ]
    (RESULTS / "reconcile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def record(board: Summary, results: dict) -> None:
    sizes = results["sizes"]
    for size in sizes:
        n, cold, unchanged = size["teams"], size["portal_cold"], size["portal_unchanged"]
        if "kubectl_cold" in size:
            kubectl = size["kubectl_cold"]
            board.row(
                f"reconcile {n:,} teams ({size['objects']:,} objects), cold",
                portal=cold["seconds"],
                alternative=kubectl["apply_seconds"],
                alternative_is=(
                    "kubectl apply --server-side of the same manifests, apply only "
                    f"(+{kubectl['start_and_discovery_seconds']} s process start and discovery)"
                ),
                unit="s",
                goal=Goal.ratio_at_most(0.8),
                note=f"{results['concurrency']} passes at a time",
            )
        board.row(
            f"reconcile {n:,} teams, nothing changed",
            portal=unchanged["seconds"],
            alternative=cold["seconds"],
            alternative_is="the portal's cold pass",
            unit="s",
            goal=Goal.ratio_at_most(UNCHANGED_GOAL_AT_SCALE if scale() else UNCHANGED_GOAL),
            note=f"{unchanged['reads']} reads, {unchanged['writes']} writes",
        )
        board.row(
            f"reconcile {n:,} teams, nothing changed: writes",
            portal=unchanged["writes"],
            unit="writes",
            goal=Goal.portal_at_most(0),
        )
    if len(sizes) > 1:
        # Linear growth: the time a team costs at the largest size against the smallest.
        first, last = sizes[0], sizes[-1]
        for phase in ("cold", "unchanged"):
            board.row(
                f"reconcile, {phase}: time a team at {last['teams']:,} teams",
                portal=last[f"{phase}_ms_per_team"],
                alternative=first[f"{phase}_ms_per_team"],
                alternative_is=f"the same at {first['teams']:,} teams",
                unit="ms",
                goal=Goal.ratio_at_most(1.5),
                note=", ".join(f"{s['teams']:,}: {s[f'{phase}_ms_per_team']} ms" for s in sizes),
            )


if __name__ == "__main__":
    board = Summary("reconcile")
    outcome = run()
    write(outcome)
    record(board, outcome)
    if any(size["portal_unchanged"]["writes"] for size in outcome["sizes"]):
        sys.exit("the unchanged pass wrote to the cluster")
