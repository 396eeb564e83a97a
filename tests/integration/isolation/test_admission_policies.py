"""The portal's admission policies on the devcluster's API server, against what members create
with their own credentials: GPU placement, allowed registries (read as the runtime reads them,
and exactly as the portal's own checks read them), no NVIDIA_* variables, no service-account
token Secrets; and Kueue-admitted portal Jobs pass them."""

import copy

import pytest
from kubernetes import client

from clusters.models import QuotaMode
from gpujobs import manifests as job_manifests
from gpujobs.models import GpuJob
from gpujobs.specs import JobRequest
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.kube import GPU_AFFINITY, GPU_TOLERATION
from workloads.images import image_allowed

from .conftest import ALLOWED_REGISTRIES, IMAGE, cpu_pod, refusal

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

GPU_LIMITS = {"limits": {"nvidia.com/gpu": "1"}}
VOID = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}


def gpu_pod(name: str, *, placed=True, tolerated=True, deadline: int | None = 3600, **spec):
    """A pod asking for a GPU, placed on GPU nodes and tolerating their taint unless told not
    to, with the ``deadline`` (seconds; None: none) every bare GPU pod needs; ``spec``
    replaces parts of its spec."""
    pod = cpu_pod(name)
    pod["spec"]["containers"][0]["resources"] = copy.deepcopy(GPU_LIMITS)
    if deadline is not None:
        pod["spec"]["activeDeadlineSeconds"] = deadline
    if placed:
        pod["spec"]["affinity"] = copy.deepcopy(GPU_AFFINITY)
    if tolerated:
        pod["spec"]["tolerations"] = [dict(GPU_TOLERATION)]
    pod["spec"].update(spec)
    return pod


GPU_TERM = GPU_AFFINITY["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
    "nodeSelectorTerms"
][0]
ANY_NODE_TERM = {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "Exists"}]}


@pytest.fixture
def team_with_member(iso_cluster, make_team, onboard, member):
    team = make_team("adm")
    onboard(team, iso_cluster, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    return team, client.CoreV1Api(member(f"portal:mo-{team.slug}"))


def test_the_policies_are_bound_to_the_namespaces_the_portal_manages(team_with_member, k8s, portal):
    admission = client.AdmissionregistrationV1Api(k8s)

    for policy in ("team-pods", "team-secrets"):
        binding = admission.read_validating_admission_policy_binding(f"{portal.name}-{policy}")
        assert binding.spec.validation_actions == ["Deny"]
        assert binding.spec.match_resources.namespace_selector.match_labels == {
            "app.kubernetes.io/managed-by": portal.name
        }


def test_the_api_server_compiles_every_rule(team_with_member, k8s, portal):
    """CEL's type checker cannot see resource quantities (they are int-or-string), so it warns
    about ``limits`` and ``requests``; they are read as maps when the rules run (the GPU
    rules below prove it). Nothing else may be warned about."""
    admission = client.AdmissionregistrationV1Api(k8s)

    policy = admission.read_validating_admission_policy(f"{portal.name}-team-pods")

    warnings = (policy.status.type_checking.expression_warnings or []) if policy.status else []
    for warning in warnings:
        found = [line for line in warning.warning.splitlines() if "ERROR" in line]
        assert all(
            "undefined field 'limits'" in line or "undefined field 'requests'" in line
            for line in found
        ), warning.warning


REFUSED = {
    "a GPU pod off the GPU nodes": (
        gpu_pod("gpu-anywhere", placed=False),
        "must be placed on GPU nodes",
    ),
    "a GPU pod whose affinity also admits other nodes": (
        gpu_pod(
            "gpu-or-cpu",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [GPU_TERM, ANY_NODE_TERM]
                    }
                }
            },
        ),
        "must be placed on GPU nodes",
    ),
    "a GPU pod without the GPU toleration": (
        gpu_pod("gpu-untolerated", tolerated=False),
        "must tolerate the GPU taint",
    ),
    "a CPU pod tolerating the GPU taint": (
        cpu_pod("cpu-on-gpu", tolerations=[dict(GPU_TOLERATION)]),
        "must stay off GPU nodes",
    ),
    "a CPU pod tolerating every taint": (
        cpu_pod("cpu-anywhere", tolerations=[{"operator": "Exists"}]),
        "must stay off GPU nodes",
    ),
    "a pod naming its node": (
        cpu_pod("pinned", nodeName="cpu-node-0"),
        "may not set spec.nodeName",
    ),
    "an image from another registry": (
        cpu_pod("elsewhere", image="evil.example.com/miner:1"),
        "Images must come from the registries this cluster allows",
    ),
    "an init container from another registry": (
        cpu_pod("init", initContainers=[{"name": "init", "image": "quay.io/x/y:1"}]),
        "quay.io/x/y:1",
    ),
    "a Docker Hub image outside library/": (
        cpu_pod("hub", image="nvidia/cuda:12.4.0-base"),
        "nvidia/cuda:12.4.0-base",
    ),
    "NVIDIA_VISIBLE_DEVICES set to every GPU": (
        gpu_pod(
            "all-gpus",
            containers=[
                {
                    "name": "main",
                    "image": IMAGE,
                    "resources": GPU_LIMITS,
                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
                }
            ],
        ),
        "No container may set NVIDIA_* variables",
    ),
    "another NVIDIA_ variable": (
        cpu_pod(
            "caps",
            containers=[
                {
                    "name": "main",
                    "image": IMAGE,
                    "env": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}],
                }
            ],
        ),
        "No container may set NVIDIA_* variables",
    ),
    "envFrom without a prefix": (
        cpu_pod(
            "from-config",
            containers=[
                {"name": "main", "image": IMAGE, "envFrom": [{"configMapRef": {"name": "c"}}]}
            ],
        ),
        "envFrom needs a prefix",
    ),
    "envFrom with a prefix that could begin NVIDIA_": (
        cpu_pod(
            "from-config-n",
            containers=[
                {
                    "name": "main",
                    "image": IMAGE,
                    "envFrom": [{"configMapRef": {"name": "c"}, "prefix": "NVI"}],
                }
            ],
        ),
        "envFrom needs a prefix",
    ),
    "a bare GPU pod without a deadline": (
        gpu_pod("endless", deadline=None),
        "GPU work has a maximum run time",
    ),
    "a bare GPU pod with a deadline beyond the maximum": (
        gpu_pod("too-long", deadline=31 * 86400),
        "at most 2592000 seconds",
    ),
    "an inline NFS volume": (
        cpu_pod("nfs", volumes=[{"name": "data", "nfs": {"server": "10.0.0.1", "path": "/"}}]),
        "Volumes in team namespaces are of the kinds",
    ),
    "an inline iSCSI volume": (
        cpu_pod(
            "iscsi",
            volumes=[
                {
                    "name": "data",
                    "iscsi": {
                        "targetPortal": "10.0.0.1:3260",
                        "iqn": "iqn.2001-04.com.example:storage.disk1",
                        "lun": 0,
                    },
                }
            ],
        ),
        "Volumes in team namespaces are of the kinds",
    ),
    "CRI-O's device annotation": (
        {
            **cpu_pod("devices"),
            "metadata": {
                "name": "devices",
                "annotations": {"io.kubernetes.cri-o.Devices": "/dev/nvidia0"},
            },
        },
        "container-runtime or device annotations",
    ),
    "a CDI device annotation": (
        {
            **cpu_pod("cdi"),
            "metadata": {
                "name": "cdi",
                "annotations": {"cdi.k8s.io/gpu": "nvidia.com/gpu=all"},
            },
        },
        "container-runtime or device annotations",
    ),
    "a system priority class": (
        cpu_pod("critical", priorityClassName="system-cluster-critical"),
        "may not name a priorityClassName",
    ),
    "a CPU container beside a GPU one that does not hide the GPUs": (
        gpu_pod(
            "sidecar",
            containers=[
                {"name": "main", "image": IMAGE, "resources": GPU_LIMITS},
                {"name": "side", "image": IMAGE},
            ],
        ),
        "must set NVIDIA_VISIBLE_DEVICES=void",
    ),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_a_member_cannot_create(team_with_member, what):
    team, mo = team_with_member
    pod, fragment = REFUSED[what]

    status, message = refusal(mo.create_namespaced_pod, team.slug, copy.deepcopy(pod))

    assert status == 403
    assert fragment in message


ACCEPTED = {
    "a GPU pod on the GPU nodes": gpu_pod("gpu"),
    "a GPU pod placed by a node selector": gpu_pod(
        "gpu-selected", placed=False, nodeSelector={"hardware-type": "gpu"}
    ),
    "a CPU pod": cpu_pod("cpu"),
    "a pod with a claim and scratch space": cpu_pod(
        "volumes",
        volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "scratch", "emptyDir": {}},
        ],
    ),
    "an official Docker Hub image": cpu_pod("busybox", image="busybox:1.36"),
    "GPUs hidden with NVIDIA_VISIBLE_DEVICES=void": cpu_pod(
        "void", containers=[{"name": "main", "image": IMAGE, "env": [VOID]}]
    ),
    "a CPU container beside a GPU one that hides the GPUs": gpu_pod(
        "sidecar-void",
        containers=[
            {"name": "main", "image": IMAGE, "resources": GPU_LIMITS},
            {"name": "side", "image": IMAGE, "env": [VOID]},
        ],
    ),
    "envFrom with a prefix": cpu_pod(
        "from-config-app",
        containers=[
            {
                "name": "main",
                "image": IMAGE,
                "envFrom": [{"configMapRef": {"name": "c"}, "prefix": "APP_"}],
            }
        ],
    ),
}


@pytest.mark.parametrize("what", sorted(ACCEPTED))
def test_a_member_can_create(team_with_member, what):
    team, mo = team_with_member

    created = mo.create_namespaced_pod(team.slug, copy.deepcopy(ACCEPTED[what]), dry_run="All")

    assert created.metadata.name == ACCEPTED[what]["metadata"]["name"]


def test_an_ephemeral_container_from_another_registry_is_refused(team_with_member, core):
    team, mo = team_with_member
    mo.create_namespaced_pod(team.slug, cpu_pod("debuggee"))
    pod = core.read_namespaced_pod("debuggee", team.slug).to_dict()
    debug = {"name": "debug", "image": "evil.example.com/shell:1", "targetContainerName": "main"}

    # As the cluster admin: members have no right to add ephemeral containers at all, and the
    # policy holds for everyone.
    status, message = refusal(
        core.patch_namespaced_pod_ephemeralcontainers,
        "debuggee",
        team.slug,
        {"spec": {"ephemeralContainers": [debug]}},
    )

    assert pod["metadata"]["name"] == "debuggee"
    assert status == 403
    assert "evil.example.com/shell:1" in message


IMAGES = [
    "registry.example.com/ml/trainer:1.0",
    "REGISTRY.EXAMPLE.COM/ml/trainer",
    "registry.example.com:5000/ml/trainer",
    "registry.example.com.evil.net/ml/trainer",
    "evil.example.com/registry.example.com/x",
    "busybox",
    "busybox:1.36@sha256:" + "c" * 64,
    "docker.io/busybox",
    "index.docker.io/library/busybox",
    "library/busybox",
    "team/trainer",
    "docker.io/team/trainer",
    "Team/trainer",
    "localhost/busybox",
    "localhost:5000/busybox",
    "registry.example.com/Ml/trainer",
    "registry.example.com//x",
    "registry.example.com/x:",
]


@pytest.mark.parametrize("image", IMAGES)
def test_the_cluster_reads_an_image_as_the_portal_does(team_with_member, image):
    """Every verdict of the admission policy is the portal's own (``workloads.images``), for
    references the runtime reads in surprising ways."""
    team, mo = team_with_member
    portal_allows = image_allowed(image, ALLOWED_REGISTRIES)

    try:
        mo.create_namespaced_pod(team.slug, cpu_pod("parity", image=image), dry_run="All")
        answer = 201
    except client.ApiException as error:
        answer = error.status

    assert answer == (201 if portal_allows else 403)


def test_a_kueue_admitted_portal_job_passes_the_policies(
    portal, iso_cluster, make_team, onboard, core, portal_api, admin_user
):
    from tenants import queueing
    from tests.integration.reconcile.conftest import A100

    factories.GpuModelCapacityFactory(cluster=iso_cluster, gpu_model=A100, allocatable=32)
    queueing.cluster_set_quota_mode(
        actor=admin_user, cluster=iso_cluster, quota_mode=QuotaMode.KUEUE
    )
    team = make_team("kueue")
    users = onboard(team, iso_cluster, lead=f"lead-{team.slug}")
    wait_for(
        lambda: portal.objects.names("localqueues", team.slug),
        timeout=60,
        what="the team's LocalQueues",
    )
    job = GpuJob.objects.create(
        team=team,
        cluster=iso_cluster,
        submitted_by=users[f"lead-{team.slug}"],
        **JobRequest.parse({"name": "queued", "image": IMAGE, "gpus": 1}).model_fields(),
    )
    # The Job as the portal builds it, in the team's guaranteed queue, suspended until Kueue
    # admits it (what the job side does in Kueue mode); created with the portal's credentials.
    manifest = job_manifests.stored_job_manifest(job)
    manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "guaranteed"
    manifest["spec"]["suspend"] = True
    client.BatchV1Api(portal_api).create_namespaced_job(team.slug, manifest)

    def running_pod():
        pods = core.list_namespaced_pod(team.slug, label_selector=f"gpuportal.io/job-id={job.pk}")
        return next((p for p in pods.items if p.status.phase == "Running"), None)

    pod = wait_for(running_pod, timeout=90, what="the Kueue-admitted job's pod to run")
    # Kueue put its flavor's node selector on it (the team's grant is of any model: the
    # any-gpu flavor's GPU node labels), beside the portal's own affinity and toleration.
    assert pod.spec.node_selector == {"hardware-type": "gpu"}
    assert pod.spec.affinity.node_affinity is not None
    assert core.read_node(pod.spec.node_name).metadata.labels["hardware-type"] == "gpu"
