"""No way around the queue: on a cluster in Kueue mode, a member with their own kubectl
credentials gets every GPU pod admitted by Kueue through one of the team's LocalQueues, or
refused by the API server with a message that says how to submit it; and the queue decides
the priority. In quota mode the queue rules are absent, but no pod names a priority class the
cluster does not allow.

Everything here runs against the devcluster's API server and its real Kueue (with its pod and
Deployment integrations), with credentials minted for the team's member. What a team holds
outside the queue is read as the watcher reads it, with the portal's own credentials."""

from __future__ import annotations

import copy

import pytest
from django.contrib.auth.models import User
from kubernetes import client

from clusters.models import QuotaMode
from clusters.workloads import WorkloadClient
from gpujobs import queues
from tenants import queueing
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.kube import GPU_AFFINITY, GPU_TOLERATION, read_or_none
from tests.integration.reconcile.conftest import A100

from .conftest import IMAGE, cpu_pod, refusal

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
GATE = "kueue.x-k8s.io/admission"
HOW_TO_SUBMIT = "Kueue admits every GPU workload through the team's queues"
# The team's own quota is 4 GPUs; its guaranteed queue never borrows, so 8 wait for good.
OWN_GPUS = 4
NEVER_ADMITTED = 8


def gpu_pod_spec(gpus: int = 1, **spec) -> dict:
    return {
        "restartPolicy": "Never",
        "affinity": copy.deepcopy(GPU_AFFINITY),
        "tolerations": [dict(GPU_TOLERATION)],
        "containers": [
            {"name": "main", "image": IMAGE, "resources": {"limits": {"nvidia.com/gpu": gpus}}}
        ],
        **spec,
    }


def gpu_pod(name: str, *, labels: dict | None = None, gpus: int = 1, **spec) -> dict:
    """A bare GPU pod, with the deadline every bare GPU pod needs."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": gpu_pod_spec(gpus, activeDeadlineSeconds=3600, **spec),
    }


def gpu_job(name: str, *, labels: dict | None = None, template_labels=None, gpus: int = 1):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 600,
            "template": {
                "metadata": {"labels": dict(template_labels or {})},
                "spec": gpu_pod_spec(gpus),
            },
        },
    }


def with_template(kind: str, name: str, *, template_labels=None, gpus: int = 1) -> dict:
    """A Deployment, StatefulSet, ReplicaSet or ReplicationController of one GPU pod."""
    selector = {"app": name}
    spec: dict = {
        "replicas": 1,
        "template": {
            "metadata": {"labels": {**selector, **(template_labels or {})}},
            "spec": {**gpu_pod_spec(gpus), "restartPolicy": "Always"},
        },
    }
    if kind == "ReplicationController":
        spec["selector"] = selector
    else:
        spec["selector"] = {"matchLabels": selector}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    api_version = "v1" if kind == "ReplicationController" else "apps/v1"
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


def create(api: client.ApiClient, namespace: str, obj: dict, **kwargs):
    """Create any of the kinds above as ``api``'s user."""
    kind = obj["kind"]
    if kind == "Pod":
        return client.CoreV1Api(api).create_namespaced_pod(namespace, obj, **kwargs)
    if kind == "ReplicationController":
        return client.CoreV1Api(api).create_namespaced_replication_controller(
            namespace, obj, **kwargs
        )
    if kind == "Job":
        return client.BatchV1Api(api).create_namespaced_job(namespace, obj, **kwargs)
    apps = client.AppsV1Api(api)
    creators = {
        "Deployment": apps.create_namespaced_deployment,
        "StatefulSet": apps.create_namespaced_stateful_set,
        "ReplicaSet": apps.create_namespaced_replica_set,
    }
    return creators[kind](namespace, obj, **kwargs)


@pytest.fixture
def kueue_team(portal, iso_cluster, make_team, onboard, member, admin_user, k8s):
    """A team on the cluster in Kueue mode, with 4 GPUs of its own, its LocalQueues and the
    cluster's queue policies in place; (team, the member's ApiClient)."""
    factories.GpuModelCapacityFactory(cluster=iso_cluster, gpu_model=A100, allocatable=32)
    queueing.cluster_set_quota_mode(
        actor=admin_user, cluster=iso_cluster, quota_mode=QuotaMode.KUEUE
    )
    team = make_team("queue")
    onboard(team, iso_cluster, gpus=OWN_GPUS, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    wait_for(
        lambda: portal.objects.names("localqueues", team.slug),
        timeout=60,
        what="the team's LocalQueues",
    )
    mo = member(f"portal:mo-{team.slug}")
    # A policy binding takes a moment to reach the API server's admission: wait until the
    # first rule refuses.
    wait_for(
        lambda: _refused(mo, team.slug, gpu_job("probe")),
        timeout=60,
        what="the queue policies enforced",
    )
    return team, mo


def _refused(api, namespace: str, obj: dict) -> bool:
    try:
        create(api, namespace, obj, dry_run="All")
    except client.ApiException as error:
        return error.status == 403
    return False


def _job_queued_labels(queue: str, portal_name: str) -> dict:
    return {QUEUE: queue, PRIORITY: f"{portal_name}-{queue}"}


def ways_around(portal_name: str) -> dict[str, tuple[dict, str]]:
    """What a member might create to go around the queue, and what the refusal says."""
    guaranteed = {QUEUE: "guaranteed"}
    return {
        "a GPU Job without a queue": (gpu_job("unqueued"), "label the Job"),
        "a GPU Job in a queue the team has not": (
            gpu_job("elsewhere", labels={QUEUE: "default"}),
            "label the Job",
        ),
        "an opportunistic Job at the guaranteed priority": (
            gpu_job(
                "sneaky",
                labels={QUEUE: "opportunistic", PRIORITY: f"{portal_name}-guaranteed"},
            ),
            "The priority of queued work is its queue's",
        ),
        "a bare GPU pod": (gpu_pod("bare"), "run it as a Job"),
        "a GPU pod claiming a Job as its owner": (
            {
                **gpu_pod("forged"),
                "metadata": {
                    "name": "forged",
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": "someone",
                            "uid": "00000000-0000-0000-0000-000000000000",
                            "controller": True,
                        }
                    ],
                },
            },
            "run it as a Job",
        ),
        "a GPU pod at the system-cluster-critical priority": (
            gpu_pod("critical", labels=guaranteed, priorityClassName="system-cluster-critical"),
            "may not name a priorityClassName",
        ),
        "a GPU Deployment without a queue": (
            with_template("Deployment", "unqueued-deploy"),
            "label the pod template",
        ),
        "a GPU StatefulSet without a queue": (
            with_template("StatefulSet", "unqueued-set"),
            "label the pod template",
        ),
        "a GPU ReplicaSet without a queue": (
            with_template("ReplicaSet", "unqueued-rs"),
            "label the pod template",
        ),
        "a GPU ReplicationController without a queue": (
            with_template("ReplicationController", "unqueued-rc"),
            "label the pod template",
        ),
    }


def test_in_kueue_mode_every_way_around_the_queue_is_refused_saying_how_to_submit(
    kueue_team, portal
):
    team, mo = kueue_team

    answers = {}
    for what, (obj, fragment) in ways_around(portal.name).items():
        try:
            create(mo, team.slug, copy.deepcopy(obj), dry_run="All")
            answers[what] = "accepted"
        except client.ApiException as error:
            body = error.body or ""
            answers[what] = "refused" if error.status == 403 and fragment in body else body

    assert answers == dict.fromkeys(answers, "refused")
    _, message = refusal(create, mo, team.slug, gpu_job("unqueued"), dry_run="All")
    assert HOW_TO_SUBMIT in message
    assert "kueue.x-k8s.io/queue-name=guaranteed or kueue.x-k8s.io/queue-name=opportunistic" in (
        message
    )
    assert "The portal submits jobs and services for you: http" in message


def test_cpu_work_is_not_queued(kueue_team):
    team, mo = kueue_team

    created = client.CoreV1Api(mo).create_namespaced_pod(team.slug, cpu_pod("cpu-only"))

    assert created.spec.scheduling_gates is None


def test_a_queued_job_runs_once_kueue_admits_it_and_only_kueue_unsuspends_one(kueue_team, portal):
    team, mo = kueue_team
    batch = client.BatchV1Api(mo)
    labels = _job_queued_labels("guaranteed", portal.name)

    # Asked not to be suspended, it is all the same: Kueue's webhook suspends it.
    waiting = gpu_job("too-big", labels=labels, gpus=NEVER_ADMITTED)
    waiting["spec"]["suspend"] = False
    assert batch.create_namespaced_job(team.slug, waiting).spec.suspend is True
    status, message = refusal(
        batch.patch_namespaced_job, "too-big", team.slug, {"spec": {"suspend": False}}
    )
    assert status == 403
    assert "Only Kueue un-suspends a queued Job" in message
    status, message = refusal(
        batch.patch_namespaced_job, "too-big", team.slug, {"metadata": {"labels": {QUEUE: None}}}
    )
    assert status == 403
    assert HOW_TO_SUBMIT in message

    batch.create_namespaced_job(team.slug, gpu_job("fits", labels=labels))

    def running():
        pods = client.CoreV1Api(mo).list_namespaced_pod(team.slug, label_selector="job-name=fits")
        return next((p for p in pods.items if p.status.phase == "Running"), None)

    pod = wait_for(running, timeout=90, what="the admitted job's pod to run")
    assert pod.spec.node_selector == {"hardware-type": "gpu"}  # Kueue's flavor, on admission
    workloads = portal.objects.api.list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", team.slug, "workloads"
    )["items"]
    admitted = [w for w in workloads if _admitted(w)]
    assert [w["metadata"]["ownerReferences"][0]["name"] for w in admitted] == ["fits"]
    assert batch.read_namespaced_job("too-big", team.slug).spec.suspend is True


def _admitted(workload: dict) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


def test_a_labelled_pod_and_deployment_wait_in_the_queue_and_only_kueue_lifts_the_gate(
    kueue_team, portal
):
    team, mo = kueue_team
    core = client.CoreV1Api(mo)
    labels = _job_queued_labels("guaranteed", portal.name)

    big = core.create_namespaced_pod(
        team.slug, gpu_pod("too-big", labels=labels, gpus=NEVER_ADMITTED)
    )
    assert GATE in [g.name for g in big.spec.scheduling_gates]
    status, message = refusal(
        core.patch_namespaced_pod, "too-big", team.slug, {"spec": {"schedulingGates": None}}
    )
    assert status == 403
    assert f"Only Kueue lifts a queued pod's {GATE} gate" in message

    core.create_namespaced_pod(team.slug, gpu_pod("fits", labels=labels))
    client.AppsV1Api(mo).create_namespaced_deployment(
        team.slug, with_template("Deployment", "server", template_labels=labels)
    )

    def running(selector):
        def find():
            pods = core.list_namespaced_pod(team.slug, label_selector=selector)
            return next((p for p in pods.items if p.status.phase == "Running"), None)

        return find

    pod = wait_for(running(f"{QUEUE}=guaranteed,!app"), timeout=90, what="the queued pod")
    assert pod.metadata.name == "fits"
    assert not pod.spec.scheduling_gates
    replica = wait_for(running("app=server"), timeout=90, what="the Deployment's queued pod")
    assert not replica.spec.scheduling_gates
    still_waiting = core.read_namespaced_pod("too-big", team.slug)
    assert GATE in [g.name for g in still_waiting.spec.scheduling_gates]


def test_in_quota_mode_gpu_work_needs_no_queue_but_a_deadline_and_no_priority_class(
    portal, iso_cluster, make_team, onboard, member, k8s
):
    team = make_team("quota")
    onboard(team, iso_cluster, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    mo = member(f"portal:mo-{team.slug}")
    admission = client.AdmissionregistrationV1Api(k8s)

    assert (
        read_or_none(
            admission.read_validating_admission_policy, f"{portal.name}-team-queued-templates"
        )
        is None
    )
    # An earlier test's Kueue-mode policies may still be leaving the API server's admission,
    # each policy on its own clock: wait until none of them refuses unqueued work.
    unqueued = [gpu_job("unqueued"), with_template("Deployment", "unqueued"), gpu_pod("unqueued")]
    wait_for(
        lambda: not any(_refused(mo, team.slug, obj) for obj in unqueued),
        timeout=30,
        what="the quota-mode policies enforced",
    )
    for obj in unqueued:
        create(mo, team.slug, obj, dry_run="All")
    unbounded = gpu_job("unbounded")
    del unbounded["spec"]["activeDeadlineSeconds"]
    status, message = refusal(create, mo, team.slug, unbounded, dry_run="All")
    assert status == 403
    assert "GPU work has a maximum run time: set spec.activeDeadlineSeconds" in message
    waiting = gpu_job("waiting")
    waiting["spec"]["suspend"] = True
    client.BatchV1Api(mo).create_namespaced_job(team.slug, waiting)
    status, message = refusal(
        client.BatchV1Api(mo).patch_namespaced_job,
        "waiting",
        team.slug,
        {"spec": {"activeDeadlineSeconds": None}},
    )
    assert status == 403
    assert "GPU work has a maximum run time" in message
    status, message = refusal(
        create,
        mo,
        team.slug,
        gpu_pod("critical", priorityClassName="system-cluster-critical"),
        dry_run="All",
    )
    assert status == 403
    assert "may not name a priorityClassName" in message


def test_gpus_held_from_before_the_switch_to_kueue_are_counted_outside_the_queue(
    portal, iso_cluster, make_team, onboard, member, admin_user, client_as
):
    """A member's bare GPU pod of quota mode keeps running after the switch to Kueue mode:
    the watcher's read of the cluster (with the portal's own confined credentials) counts it as
    held outside the queue, and the team's queue API and pages show it; the pod of a Job Kueue
    admitted is not counted."""
    factories.GpuModelCapacityFactory(cluster=iso_cluster, gpu_model=A100, allocatable=32)
    team = make_team("held")
    onboard(team, iso_cluster, gpus=OWN_GPUS, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    mo = member(f"portal:mo-{team.slug}")
    core = client.CoreV1Api(mo)
    wait_for(
        lambda: not _refused(mo, team.slug, gpu_pod("probe")),
        timeout=30,
        what="the quota-mode policies enforced",
    )
    core.create_namespaced_pod(team.slug, gpu_pod("by-hand", gpus=2))
    wait_for(
        lambda: core.read_namespaced_pod("by-hand", team.slug).status.phase == "Running",
        timeout=90,
        what="the pod made by hand to run",
    )

    queueing.cluster_set_quota_mode(
        actor=admin_user, cluster=iso_cluster, quota_mode=QuotaMode.KUEUE
    )
    wait_for(
        lambda: portal.objects.names("localqueues", team.slug),
        timeout=60,
        what="the team's LocalQueues",
    )
    wait_for(
        lambda: _refused(mo, team.slug, gpu_job("probe")),
        timeout=60,
        what="the queue policies enforced",
    )
    client.BatchV1Api(mo).create_namespaced_job(
        team.slug, gpu_job("queued", labels=_job_queued_labels("guaranteed", portal.name))
    )
    wait_for(
        lambda: any(
            p.status.phase == "Running"
            for p in core.list_namespaced_pod(team.slug, label_selector="job-name=queued").items
        ),
        timeout=90,
        what="the queued job's pod to run",
    )

    fields = queues.take_snapshot(
        iso_cluster, kube=WorkloadClient.for_cluster(iso_cluster), portal_name=portal.name
    )
    queues.record_snapshot(iso_cluster.pk, fields)

    assert fields["held_outside"] == {team.slug: {"gpus": 2, "pods": 1, "names": ["by-hand"]}}
    lead = User.objects.get(username=f"lead-{team.slug}")
    answer = client_as(lead).get(f"/api/v1/teams/{team.slug}/queue/?cluster={iso_cluster.name}")
    assert answer.json()["held_outside_the_queue"] == {
        "gpus": 2,
        "pods": 1,
        "pod_names": ["by-hand"],
    }
    page = client_as(lead).get(f"/teams/{team.slug}/").content.decode()
    assert '<strong data-testid="team-held-outside-gpus">2</strong>' in page
    cluster_page = client_as(factories.AdminFactory()).get(
        f"/monitoring/clusters/{iso_cluster.name}/"
    )
    assert "GPUs held outside the queue: 2" in cluster_page.content.decode()
