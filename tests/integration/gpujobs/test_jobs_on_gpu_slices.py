"""MIG slices and shared GPUs as GPU kinds, end to end on the devcluster: the capacity sync reads
them from the nodes the GPU Operator labelled (the ``gpu_sharing`` fixture's), a lead's grant of
slices is quota (the ResourceQuota's own resource name; in Kueue mode the ClusterQueue's nominal
quota of that resource on the model's flavor), and a job asking for one slice or one shared GPU
gets exactly that resource and lands on the node that offers it, through the real worker, Kueue
and the watcher."""

import datetime

import pytest
from django.conf import settings
from django.utils import timezone

from clusters.capacity import capacity_sync
from clusters.models import GpuCapacity, GpuModelCapacity
from clusters.vocabulary import cluster_queue_name, resource_flavor_name
from gpujobs.models import GpuJob
from tenants import quota as tenant_quota
from tenants.models import TeamCluster
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import (
    QUOTA_NAME,
    GpuTeam,
    job_pods,
    submit,
    team_with_members,
    wait_for_job,
    wait_for_state,
)
from tests.integration.gpujobs.kueue import A100
from tests.integration.kube import delete_namespace, read_or_none

pytestmark = [pytest.mark.devcluster]

SLICE = "nvidia.com/mig-1g.10gb"
SHARED = "nvidia.com/gpu.shared"
A100_SHARED = f"{A100}-SHARED"
MIG_NODE, SHARED_NODE = "gpu-node-mig-0", "gpu-node-shared-0"

State = GpuJob.State


def granted(admin, cluster, grants: dict[tuple[str, str], int], *, name: str) -> GpuTeam:
    """A team whose lead asked for each (GPU kind, model) in ``grants`` and an admin approved."""
    team, users = team_with_members(name, prefix="sl")
    made = []
    for (resource, model), count in grants.items():
        request = tenant_quota.quota_request_create(
            requested_by=users["lead"],
            team=team,
            cluster=cluster,
            gpu_resource=resource,
            gpu_model=model,
            gpus=count,
            justification="Light jobs on slices.",
            ends_on=timezone.localdate() + datetime.timedelta(days=30),
        )
        made.append(tenant_quota.quota_request_approve(reviewer=admin, quota_request=request))
    wait_for(
        lambda: TeamCluster.objects.filter(
            team=team, cluster=cluster, status=TeamCluster.Status.IN_SYNC
        ).exists(),
        timeout=120,
        what=f"the reconcile of {team.slug}",
    )
    return GpuTeam(team=team, namespace=team.slug, grants=made, **users)


def inventory(cluster) -> dict:
    """What the capacity sync read from the nodes, per kind and per (kind, model)."""
    capacity_sync(cluster=cluster)
    return {
        "kinds": dict(
            GpuCapacity.objects.filter(cluster=cluster).values_list("resource_name", "allocatable")
        ),
        "models": {
            (row.resource_name, row.gpu_model): (row.allocatable, row.max_per_node)
            for row in GpuModelCapacity.objects.filter(cluster=cluster)
        },
    }


def counted_quota(core, namespace: str, resource: str, value: str):
    """The namespace's ResourceQuota once it caps ``resource`` at ``value`` and is counted."""

    def check():
        quota = read_or_none(core.read_namespaced_resource_quota, QUOTA_NAME, namespace)
        hard = (quota.spec.hard or {}) if quota else {}
        if hard.get(f"requests.{resource}") != value or quota.status is None:
            return None
        return quota if quota.status.hard == hard and quota.status.used is not None else None

    return wait_for(check, timeout=90, what=f"requests.{resource}={value} in {namespace}")


def the_pod(core, job):
    (pod,) = job_pods(core, job)
    return pod


def assert_placed_on(pod, node: str, resource: str, model: str) -> None:
    (container,) = [c for c in pod.spec.containers if c.resources.limits]
    assert pod.spec.node_name == node
    gpus = {k: v for k, v in container.resources.limits.items() if k.startswith("nvidia.com/")}
    assert gpus == {resource: "1"}
    terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    expressions = {
        (e.key, tuple(e.values))
        for term in terms.node_selector_terms
        for e in term.match_expressions
    }
    assert ("hardware-type", ("gpu",)) in expressions
    assert ("nvidia.com/gpu.product", (model,)) in expressions
    assert any(t.key == "nvidia.com/gpu" for t in pod.spec.tolerations)


def test_quota_of_slices_and_shared_gpus_runs_jobs_on_their_nodes_and_refuses_beyond_it(
    gpu_sharing, gpu_cluster, core, running_services
):
    """Quota only: the ResourceQuota caps each kind under its own name, jobs get their kind,
    and a job beyond the slices granted is refused with a 400 naming the GPUs."""
    found = inventory(gpu_cluster)
    assert found["kinds"][SLICE] == 14
    assert found["kinds"][SHARED] == 8
    assert found["models"][(SLICE, A100)] == (14, 14)
    assert found["models"][(SHARED, A100_SHARED)] == (8, 8)
    admin = factories.AdminFactory(username="slices-admin")
    gpu = granted(admin, gpu_cluster, {(SLICE, A100): 2, (SHARED, A100_SHARED): 1}, name="light")
    try:
        counted_quota(core, gpu.namespace, SLICE, "2")
        counted_quota(core, gpu.namespace, SHARED, "1")

        on_slices = [
            submit(gpu.member, gpu.team, gpu_cluster, name=f"eval-{n}", gpu_resource=SLICE,
                   gpu_model=A100)
            for n in range(2)
        ]  # fmt: skip
        shared = submit(
            gpu.member, gpu.team, gpu_cluster, name="nb", gpu_resource=SHARED, gpu_model=A100_SHARED
        )
        beyond = submit(gpu.member, gpu.team, gpu_cluster, name="one-more", gpu_resource=SLICE)

        assert [r.status_code for r in on_slices] == [201, 201], [r.data for r in on_slices]
        assert shared.status_code == 201, shared.data
        assert beyond.status_code == 400
        assert f"has 2 × {SLICE}" in str(beyond.data["gpus"]), beyond.data
        for response in on_slices:
            job = wait_for_state(response.data["id"], State.RUNNING)
            assert_placed_on(the_pod(core, job), MIG_NODE, SLICE, A100)
        job = wait_for_state(shared.data["id"], State.RUNNING)
        assert_placed_on(the_pod(core, job), SHARED_NODE, SHARED, A100_SHARED)
        quota = counted_quota(core, gpu.namespace, SLICE, "2")
        wait_for(
            lambda: (
                (
                    core.read_namespaced_resource_quota(QUOTA_NAME, gpu.namespace).status.used or {}
                ).get(f"requests.{SLICE}")
                == "2"
            ),
            timeout=30,
            what="both slices counted as used",
        )
        assert quota.spec.hard.get("requests.nvidia.com/gpu") in (None, "0")
    finally:
        delete_namespace(core, gpu.namespace)


def test_kueue_admits_slices_and_shared_gpus_within_the_teams_quota_and_queues_the_rest(
    gpu_sharing, kueue_cluster, core, running_services, k8s
):
    """Kueue mode: the team's guaranteed ClusterQueue holds its slices and its shared GPUs as
    nominal quota of each kind's resource on its model's flavor; Kueue admits as many one-slice
    (one-replica) jobs as that, on the nodes that offer them, and the next of each kind waits in
    the queue."""
    cluster = kueue_cluster.cluster
    inventory(cluster)
    gpu = granted(
        kueue_cluster.admin, cluster, {(SLICE, A100): 2, (SHARED, A100_SHARED): 1}, name="kq-light"
    )
    kueue_cluster.wait_for_queues(gpu.team)
    queue = cluster_queue_name(settings.PORTAL_NAME, gpu.team.slug, "guaranteed")

    def nominal(resource: str, model: str):
        flavor = resource_flavor_name(settings.PORTAL_NAME, model)
        found = kueue_cluster.objects.get("clusterqueues", queue) or {"spec": {}}
        for group in found["spec"].get("resourceGroups") or []:
            for entry in group["flavors"] if resource in group["coveredResources"] else []:
                if entry["name"] == flavor:
                    return next(
                        (r["nominalQuota"] for r in entry["resources"] if r["name"] == resource),
                        None,
                    )
        return None

    wait_for(
        lambda: (str(nominal(SLICE, A100)), str(nominal(SHARED, A100_SHARED))) == ("2", "1"),
        timeout=90,
        what=f"2 × {SLICE} and 1 × {SHARED} in {queue}",
    )
    kinds = [(SLICE, A100)] * 3 + [(SHARED, A100_SHARED)] * 2
    jobs = [
        submit(gpu.member, gpu.team, cluster, name=f"eval-{n}", gpu_resource=kind, gpu_model=model)
        for n, (kind, model) in enumerate(kinds)
    ]
    assert [r.status_code for r in jobs] == [201] * 5, [r.data for r in jobs]

    running = [wait_for_state(jobs[n].data["id"], State.RUNNING, timeout=90) for n in (0, 1, 3)]
    waiting = [
        wait_for_job(
            jobs[n].data["id"],
            lambda j: j.state in (State.QUEUED, State.PENDING) and j.queue_name == "guaranteed",
            what=f"job {n} waiting in the guaranteed queue",
        )
        for n in (2, 4)
    ]
    for job in running[:2]:
        assert_placed_on(the_pod(core, job), MIG_NODE, SLICE, A100)
    assert_placed_on(the_pod(core, running[2]), SHARED_NODE, SHARED, A100_SHARED)
    assert all(job.queue_name == "guaranteed" for job in running)
    for job in waiting:
        job.refresh_from_db()
        assert job.state != State.RUNNING
        assert job_pods(core, job) == []
