"""The portal's words on cluster objects: the labels and annotations it puts on what it creates,
and the names a cluster's GPUs go by (resource, node label, taint) unless its row says otherwise.

Defined once and imported by every app (``clusters`` imports no app, so every app may import
this). The values are a contract with the cluster as well as with the code: objects made under
one spelling are not recognised under another, so a change here strands what is already there.
"""

import re
from types import MappingProxyType

# --- ownership ---------------------------------------------------------------------------------

# Who made an object: the portal's name (``settings.PORTAL_NAME``) under Kubernetes' standard
# label. The portal reads, changes and deletes only objects that carry it.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
DEFAULT_PORTAL_NAME = "gpu-portal"

# Labels and annotations under this prefix are the portal's own: users may not set them.
PORTAL_PREFIX = "gpuportal.io"

# The team an object belongs to (its value is the team's slug, which is also its namespace).
TEAM_LABEL = f"{PORTAL_PREFIX}/team"
# A GPU job's Job and pods: the job's id in the portal.
JOB_ID_LABEL = f"{PORTAL_PREFIX}/job-id"
# A GPU job's Job: the name the user gave it, and who submitted it.
JOB_NAME_ANNOTATION = f"{PORTAL_PREFIX}/job-name"
SUBMITTED_BY_ANNOTATION = f"{PORTAL_PREFIX}/submitted-by"
# A team's objects: the hash of what the portal last applied, to tell drift from no change.
DESIRED_HASH_ANNOTATION = f"{PORTAL_PREFIX}/desired-hash"
# An inference service's objects (Deployments, Services, HTTPRoute) and pods: the service's id in
# the portal; a revision's Deployment, Service and pods also the revision's number.
SERVICE_ID_LABEL = f"{PORTAL_PREFIX}/service-id"
REVISION_LABEL = f"{PORTAL_PREFIX}/revision"
# What owns a pod the idle policy may stop, when it is no Job: an inference service (stopped by
# scaling it to zero, through the portal, never by deleting its pods).
INFERENCE_SERVICE_KIND = "InferenceService"

# --- GPUs --------------------------------------------------------------------------------------

# The extended resource a GPU pod asks for, and the kind a quota request is for by default.
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
# Extended resources that are GPUs (or slices of one), whatever other resources a node has.
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-", "amd.com/gpu", "gpu.intel.com/")
# The node label naming the GPU model (set by NVIDIA's GPU feature discovery).
DEFAULT_GPU_MODEL_LABEL = "nvidia.com/gpu.product"
# Where GPU pods may go: nodes with these labels (as in the seed), tainted with this key.
DEFAULT_GPU_NODE_SELECTOR = MappingProxyType({"hardware-type": "gpu"})
DEFAULT_GPU_TAINT_KEY = "nvidia.com/gpu"

# --- Gateway API --------------------------------------------------------------------------------

# A service's traffic split between its revisions, as HTTPRoute backend weights, on a cluster that
# serves the Gateway API's CRDs.
GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"

# --- Kueue -------------------------------------------------------------------------------------

# On a Job: the LocalQueue it waits in, and the WorkloadPriorityClass it runs at (Kueue's own).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"

# A team's two LocalQueues in its namespace, one per kind of work (never ``default``: Kueue sends
# every unlabelled Job of a namespace to a LocalQueue of that name). Guaranteed work runs inside
# the team's own quota and is never preempted; opportunistic work borrows GPUs other teams (or
# the team itself) leave idle, and is preempted when the lender needs them back.
GUARANTEED = "guaranteed"
OPPORTUNISTIC = "opportunistic"
LOCAL_QUEUES = (GUARANTEED, OPPORTUNISTIC)


def priority_class_name(portal_name: str, kind: str) -> str:
    """The cluster-wide WorkloadPriorityClass of guaranteed or opportunistic work."""
    return f"{portal_name}-{kind}"


def cluster_queue_name(portal_name: str, slug: str, kind: str) -> str:
    """A team's ClusterQueue for one kind of work: ``gpu-portal-vision`` holds the team's
    quota (guaranteed work, never borrowing), ``gpu-portal-vision-opportunistic`` none of its
    own (opportunistic work, borrowing only)."""
    base = f"{portal_name}-{slug}"
    return base if kind == GUARANTEED else f"{base}-{kind}"


def cohort_name(portal_name: str) -> str:
    """Every team queue of a cluster lends and borrows in one cohort."""
    return portal_name


# The ResourceFlavors of a cluster in Kueue mode, besides one per GPU model: GPUs granted without
# a model, and the CPU and memory every pod also asks for (Kueue admits a pod only when its
# ClusterQueue covers every resource it requests).
ANY_GPU_FLAVOR = "any-gpu"
CPU_MEMORY_FLAVOR = "cpu-memory"


def resource_flavor_name(portal_name: str, gpu_model: str) -> str:
    """The ResourceFlavor of one GPU model (``NVIDIA-A100-SXM4-80GB`` ->
    ``gpu-portal-nvidia-a100-sxm4-80gb``), or of any model when ``gpu_model`` is empty."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_model.lower()).strip("-") or ANY_GPU_FLAVOR
    return f"{portal_name}-{slug}"[:253].rstrip("-")


def cpu_memory_flavor_name(portal_name: str) -> str:
    return f"{portal_name}-{CPU_MEMORY_FLAVOR}"
