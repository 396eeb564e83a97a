"""Kueue runs in the devcluster: its CRDs and webhooks are installed, it admits queued Jobs onto
nodes of the flavor's GPU model, makes the rest wait, lends idle quota within a cohort and takes
it back by preemption, answers the visibility API, and loses nothing while it is down.

Every test makes its own ResourceFlavors and ClusterQueues (cluster-scoped, named after the
test's namespace) and removes them afterwards."""

import json
import time

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from devcluster.gpu_models import DEFAULT_GPU_MODEL, DEFAULT_SECOND_GPU_MODEL
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MODEL_LABEL = "nvidia.com/gpu.product"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture(autouse=True)
def kueue_running(devcluster):
    if not devcluster.settings.kueue:
        pytest.fail("this devcluster runs without Kueue (DEVCLUSTER_KUEUE=0); start one with it")


@pytest.fixture
def kueue(k8s, namespace):
    """Creates Kueue objects for one test and deletes the cluster-scoped ones afterwards."""
    objects = client.CustomObjectsApi(k8s)
    created = []

    class Kueue:
        suffix = namespace.rsplit("-", 1)[1]

        def create(self, plural, body, namespaced=False):
            if namespaced:
                return objects.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, body
                )
            created.append((plural, body["metadata"]["name"]))
            return objects.create_cluster_custom_object(GROUP, VERSION, plural, body)

        def flavor(self, model):
            name = f"{model.split('-')[1].lower()}-{self.suffix}"
            self.create(
                "resourceflavors",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "ResourceFlavor",
                    "metadata": {"name": name},
                    "spec": {"nodeLabels": {MODEL_LABEL: model}, "tolerations": [GPU_TOLERATION]},
                },
            )
            return name

        def cluster_queue(self, name, quotas, cohort=None, preemption=None):
            """quotas: {flavor: nominal GPUs}"""
            flavors = [
                {"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}
                for flavor, gpus in quotas.items()
            ]
            spec = {
                "namespaceSelector": {},
                "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}],
            }
            if cohort:
                spec["cohortName"] = cohort
            if preemption:
                spec["preemption"] = preemption
            name = f"{name}-{self.suffix}"
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue"}
            self.create("clusterqueues", {**body, "metadata": {"name": name}, "spec": spec})
            return name

        def local_queue(self, name, cluster_queue):
            self.create(
                "localqueues",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "LocalQueue",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {"clusterQueue": cluster_queue},
                },
                namespaced=True,
            )
            return name

        def cluster_queue_status(self, name):
            return objects.get_cluster_custom_object_status(
                GROUP, VERSION, "clusterqueues", name
            ).get("status", {})

        def workload_of(self, job_name):
            workloads = objects.list_namespaced_custom_object(
                GROUP, VERSION, namespace, "workloads"
            )["items"]
            for workload in workloads:
                owners = workload["metadata"].get("ownerReferences") or []
                if any(o["kind"] == "Job" and o["name"] == job_name for o in owners):
                    return workload
            return None

    yield Kueue()
    # The namespace fixture deletes the Jobs and their Workloads; a ClusterQueue waits (its
    # finalizer) until those are gone, so the deletions are left to finish on their own.
    for plural, name in reversed(created):
        try:
            objects.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as error:
            if error.status != 404:
                raise


def queued_job(name, queue, gpus, *, complete_after=None):
    """A suspended Job for `queue`, asking for `gpus` GPUs and nothing else (a ClusterQueue must
    cover every resource a pod requests); its node and toleration come from the flavor."""
    annotations = {}
    if complete_after is not None:
        annotations["devcluster.gpuportal.io/complete-after-seconds"] = str(complete_after)
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "activeDeadlineSeconds": 3600,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/trainer:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                },
            },
        },
    }


def condition(workload, kind):
    for item in (workload or {}).get("status", {}).get("conditions", []):
        if item["type"] == kind:
            return item
    return None


def admitted(kueue, job_name):
    workload = kueue.workload_of(job_name)
    found = condition(workload, "Admitted")
    return workload if found and found["status"] == "True" else None


def running_pod(core, namespace, job_name):
    pods = core.list_namespaced_pod(namespace, label_selector=f"job-name={job_name}").items
    return next((p for p in pods if p.status.phase == "Running"), None)


def test_kueues_crds_are_served_in_v1beta2_and_converted_to_v1beta1_by_its_webhook(k8s, kueue):
    extensions = client.ApiextensionsV1Api(k8s)
    crd = extensions.read_custom_resource_definition(f"clusterqueues.{GROUP}")
    assert [(v.name, v.storage) for v in crd.spec.versions] == [
        ("v1beta1", False),
        ("v1beta2", True),
    ]
    flavor = kueue.flavor(DEFAULT_SECOND_GPU_MODEL)
    name = kueue.cluster_queue("converted", {flavor: 8}, cohort=f"cohort-{kueue.suffix}")

    old = client.CustomObjectsApi(k8s).get_cluster_custom_object(
        GROUP, "v1beta1", "clusterqueues", name
    )

    assert old["apiVersion"] == f"{GROUP}/v1beta1"
    assert old["spec"]["cohort"] == f"cohort-{kueue.suffix}"  # v1beta2 calls it cohortName


def test_a_queued_job_is_admitted_and_runs_on_a_node_of_its_flavors_gpu_model(
    k8s, core, batch, namespace, kueue
):
    a100, h100 = kueue.flavor(DEFAULT_GPU_MODEL), kueue.flavor(DEFAULT_SECOND_GPU_MODEL)
    queue = kueue.local_queue("team", kueue.cluster_queue("team", {a100: 0, h100: 2}))

    batch.create_namespaced_job(namespace, queued_job("train", queue, gpus=2))

    workload = wait_for(lambda: admitted(kueue, "train"), what="the Job's Workload admitted")
    (pod_set,) = workload["status"]["admission"]["podSetAssignments"]
    assert pod_set["flavors"] == {"nvidia.com/gpu": h100}
    pod = wait_for(lambda: running_pod(core, namespace, "train"), what="the Job's pod to run")
    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels[MODEL_LABEL] == DEFAULT_SECOND_GPU_MODEL
    assert batch.read_namespaced_job("train", namespace).spec.suspend is False


def test_a_job_without_the_queue_label_is_left_to_run_as_in_quota_only_mode(
    core, batch, namespace, kueue
):
    job = queued_job("plain", None, gpus=1)
    job["spec"]["suspend"] = False
    job["spec"]["template"]["spec"]["tolerations"] = [GPU_TOLERATION]
    batch.create_namespaced_job(namespace, job)

    wait_for(lambda: running_pod(core, namespace, "plain"), what="the unqueued Job's pod to run")
    assert kueue.workload_of("plain") is None


def test_a_job_over_the_quota_waits_suspended_with_a_pending_workload_and_its_position(
    k8s, core, batch, namespace, kueue
):
    h100 = kueue.flavor(DEFAULT_SECOND_GPU_MODEL)
    queue = kueue.local_queue("team", kueue.cluster_queue("team", {h100: 2}))
    batch.create_namespaced_job(namespace, queued_job("first", queue, gpus=2))
    wait_for(lambda: admitted(kueue, "first"), what="the first Job admitted")

    def pending(job_name):
        found = condition(kueue.workload_of(job_name), "QuotaReserved")
        return found if found and found["reason"] == "Pending" else None

    batch.create_namespaced_job(namespace, queued_job("second", queue, gpus=1))
    reserved = wait_for(lambda: pending("second"), what="the second Workload Pending")
    # Kueue queues by priority, then creation time, which has whole seconds only.
    time.sleep(1.1)
    batch.create_namespaced_job(namespace, queued_job("third", queue, gpus=1))

    assert reserved["status"] == "False"
    assert "insufficient unused quota for nvidia.com/gpu" in reserved["message"]
    assert batch.read_namespaced_job("second", namespace).spec.suspend is True
    wait_for(lambda: pending("third"), what="the third Workload Pending")

    def positions():
        body = k8s.call_api(
            f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{namespace}"
            f"/localqueues/{queue}/pendingworkloads",
            "GET",
            response_type="object",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
        return {
            item["metadata"]["ownerReferences"][0]["name"]: (
                item["positionInLocalQueue"],
                item["positionInClusterQueue"],
            )
            for item in body["items"]
        }

    assert wait_for(lambda: len(positions()) == 2 and positions(), what="2 pending") == {
        "second": (0, 0),
        "third": (1, 1),
    }


def test_a_queue_borrows_idle_gpus_of_its_cohort(core, batch, namespace, kueue):
    h100 = kueue.flavor(DEFAULT_SECOND_GPU_MODEL)
    cohort = f"cohort-{kueue.suffix}"
    kueue.cluster_queue("lender", {h100: 2}, cohort=cohort)
    borrower = kueue.cluster_queue("borrower", {h100: 1}, cohort=cohort)
    queue = kueue.local_queue("borrower", borrower)

    batch.create_namespaced_job(namespace, queued_job("wide", queue, gpus=3))

    wait_for(lambda: admitted(kueue, "wide"), what="the Job admitted on borrowed quota")
    wait_for(lambda: running_pod(core, namespace, "wide"), what="the borrowing Job's pod to run")

    def reserved():
        (flavor,) = kueue.cluster_queue_status(borrower).get("flavorsReservation") or [{}]
        (resource,) = flavor.get("resources") or [{}]
        return resource.get("total") == "3" and resource

    resource = wait_for(reserved, what="the borrower's reservation in its status")
    assert resource["borrowed"] == "2"


def test_the_lender_gets_its_gpus_back_by_preempting_the_borrowing_job(
    core, batch, namespace, other_namespace, k8s, kueue
):
    h100 = kueue.flavor(DEFAULT_SECOND_GPU_MODEL)
    cohort = f"cohort-{kueue.suffix}"
    reclaim = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    lender = kueue.cluster_queue("lender", {h100: 2}, cohort=cohort, preemption=reclaim)
    borrower = kueue.cluster_queue("borrower", {h100: 0}, cohort=cohort, preemption=reclaim)
    batch.create_namespaced_job(
        namespace, queued_job("opportunistic", kueue.local_queue("borrower", borrower), gpus=2)
    )
    wait_for(lambda: running_pod(core, namespace, "opportunistic"), what="the borrower running")
    lender_queue = kueue.local_queue("lender", lender)

    started = time.monotonic()
    batch.create_namespaced_job(namespace, queued_job("guaranteed", lender_queue, gpus=2))

    wait_for(lambda: running_pod(core, namespace, "guaranteed"), what="the lender's Job to run")
    took = time.monotonic() - started
    preempted = kueue.workload_of("opportunistic")
    evicted = condition(preempted, "Evicted")
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    assert "reclamation within the cohort" in condition(preempted, "Preempted")["message"]
    assert batch.read_namespaced_job("opportunistic", namespace).spec.suspend is True
    requeued = wait_for(
        lambda: (
            (c := condition(kueue.workload_of("opportunistic"), "QuotaReserved"))
            and c["status"] == "False"
            and c
        ),
        what="the preempted Workload back in the queue",
    )
    assert requeued["reason"] == "Pending"
    assert took < 15, f"the lender waited {took:.1f}s for its GPUs"


def test_while_kueue_is_down_the_api_server_refuses_new_jobs_queued_or_not(
    devcluster, batch, namespace, kueue
):
    with devcluster.kueue_stopped():
        for name, queue in (("queued", "team"), ("unqueued", None)):
            with pytest.raises(ApiException) as refused:
                batch.create_namespaced_job(namespace, queued_job(name, queue, gpus=1))
            assert refused.value.status == 500
            message = json.loads(refused.value.body)["message"]
            assert 'failed calling webhook "mjob.kb.io"' in message
            assert "connection refused" in message


def test_a_waiting_job_stays_suspended_while_kueue_is_down_and_is_admitted_once_it_is_back(
    devcluster, core, batch, namespace, kueue
):
    h100 = kueue.flavor(DEFAULT_SECOND_GPU_MODEL)
    queue = kueue.local_queue("team", kueue.cluster_queue("team", {h100: 1}))
    batch.create_namespaced_job(namespace, queued_job("holder", queue, gpus=1))
    wait_for(lambda: running_pod(core, namespace, "holder"), what="the first Job running")
    batch.create_namespaced_job(namespace, queued_job("waiter", queue, gpus=1))
    wait_for(
        lambda: (c := condition(kueue.workload_of("waiter"), "QuotaReserved")) and c["reason"],
        what="the second Job waiting",
    )

    with devcluster.kueue_stopped():
        batch.delete_namespaced_job("holder", namespace, propagation_policy="Background")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert batch.read_namespaced_job("waiter", namespace).spec.suspend is True
            time.sleep(0.5)

    wait_for(lambda: running_pod(core, namespace, "waiter"), what="the waiting Job to run")
    assert admitted(kueue, "waiter")


def test_the_minted_identity_kueue_runs_as_is_bound_to_kueues_own_role(k8s):
    rbac = client.RbacAuthorizationV1Api(k8s)

    binding = rbac.read_cluster_role_binding("kueue-manager-rolebinding")

    assert binding.role_ref.name == "kueue-manager-role"
    assert [(s.kind, s.name) for s in binding.subjects] == [
        ("User", "system:serviceaccount:kueue-system:kueue-controller-manager")
    ]


def test_a_member_reads_the_queue_positions_of_their_own_namespace_only(
    devcluster, k8s, namespace, other_namespace, kueue
):
    rbac = client.RbacAuthorizationV1Api(k8s)
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "batch-user"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "kueue-batch-user-role",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "vis-member"}
            ],
        },
    )
    h100 = kueue.flavor(DEFAULT_SECOND_GPU_MODEL)
    queue = kueue.local_queue("team", kueue.cluster_queue("team", {h100: 1}))
    member = config.new_client_from_config(config_file=str(devcluster.mint("vis-member")))

    def pending_workloads(in_namespace):
        return member.call_api(
            f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{in_namespace}"
            f"/localqueues/{queue}/pendingworkloads",
            "GET",
            response_type="object",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )

    def allowed():
        try:
            return pending_workloads(namespace)
        except ApiException as error:
            if error.status != 403:
                raise
            return None

    # A new RoleBinding takes a moment to reach the authorizer's cache.
    assert wait_for(allowed, what="the member's read")["items"] == []
    with pytest.raises(ApiException) as refused:
        pending_workloads(other_namespace)
    assert refused.value.status == 403
