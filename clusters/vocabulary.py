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
# On a team namespace whose team an admin allowed Services reachable from outside the cluster
# (NodePort, LoadBalancer, externalIPs), with the value ``allowed``; the services policy reads it.
EXTERNAL_SERVICES_LABEL = f"{PORTAL_PREFIX}/external-services"
EXTERNAL_SERVICES_ALLOWED = "allowed"
REVISION_LABEL = f"{PORTAL_PREFIX}/revision"
# An interactive session's Job, pods and token Secret: the session's id in the portal; its home
# volume (a PersistentVolumeClaim per member per team) the member's user id.
SESSION_ID_LABEL = f"{PORTAL_PREFIX}/session-id"
HOME_OWNER_LABEL = f"{PORTAL_PREFIX}/home-of"
# What owns a pod the idle policy may stop, when it is no Job: an inference service (stopped by
# scaling it to zero, through the portal, never by deleting its pods).
INFERENCE_SERVICE_KIND = "InferenceService"

# --- isolation ---------------------------------------------------------------------------------

# Pod Security Admission's namespace labels (``<mode>`` is enforce, warn or audit; each mode
# has a ``-version`` label too). Team namespaces enforce the cluster's level and warn and audit
# at ``restricted``.
POD_SECURITY_LABEL_PREFIX = "pod-security.kubernetes.io"
POD_SECURITY_BASELINE = "baseline"
POD_SECURITY_RESTRICTED = "restricted"


def pod_security_label(mode: str) -> str:
    return f"{POD_SECURITY_LABEL_PREFIX}/{mode}"


# What a team's members may do in its namespace: the portal's own ClusterRoles (shipped in
# deploy/team-roles.yaml), which cannot write RBAC or mint lasting credentials. Leads are bound
# to the member role and to the lead role (the little leads may do beyond members).
TEAM_ROLE_LEAD = "lead"
TEAM_ROLE_MEMBER = "member"
TEAM_ROLE_VIEWER = "viewer"


def team_cluster_role_name(portal_name: str, role: str) -> str:
    """``gpu-portal-member``: the ClusterRole the portal binds a team role's members to."""
    return f"{portal_name}-{role}"


# The ValidatingAdmissionPolicies the portal installs on each cluster, bound to the namespaces
# it manages: one for pods (placement, registries, NVIDIA_* variables), one for secrets (no
# service-account tokens), one for Services (none reachable from outside the cluster unless an
# admin allowed it for the team), and in Kueue mode two more that keep every GPU workload in the
# team's queues: one for batch Jobs, one for the pod templates of Deployments, StatefulSets,
# ReplicaSets and ReplicationControllers. Each binding has its policy's name.
ADMISSION_POLICY_PODS = "team-pods"
ADMISSION_POLICY_SECRETS = "team-secrets"
ADMISSION_POLICY_JOBS = "team-jobs"
ADMISSION_POLICY_QUEUED_TEMPLATES = "team-queued-templates"
ADMISSION_POLICY_SERVICES = "team-services"
ADMISSION_POLICY_ROUTES = "team-routes"
ADMISSION_POLICIES = (
    ADMISSION_POLICY_PODS,
    ADMISSION_POLICY_SECRETS,
    ADMISSION_POLICY_SERVICES,
    ADMISSION_POLICY_ROUTES,
    ADMISSION_POLICY_JOBS,
    ADMISSION_POLICY_QUEUED_TEMPLATES,
)


def admission_policy_name(portal_name: str, policy: str) -> str:
    return f"{portal_name}-{policy}"


# Namespaces a GPU cluster's own components usually live in (the GPU Operator, Kueue, monitoring,
# ingress and gateway controllers): no team may take one as its namespace. Each cluster starts
# with these (``Cluster.reserved_namespaces``), which an admin extends.
DEFAULT_RESERVED_NAMESPACES = (
    "gpu-operator",
    "nvidia-gpu-operator",
    "kueue-system",
    "monitoring",
    "ingress-nginx",
    "gateway-system",
    "envoy-gateway-system",
    "istio-system",
    "cert-manager",
)


# What a team's ResourceQuota caps besides GPUs, CPU and memory, and the built-in caps (pods come
# from PORTAL_TEAM_MAX_PODS): a cluster overrides any of them (``Cluster.object_limits``), and an
# admin a team on a cluster (``TeamObjectLimits``). Counts are whole numbers; storage a quantity.
OBJECT_LIMIT_DEFAULTS = MappingProxyType(
    {
        "count/jobs.batch": "200",
        "services": "50",
        "configmaps": "100",
        "secrets": "100",
        "persistentvolumeclaims": "20",
        "requests.storage": "1Ti",
    }
)
OBJECT_LIMIT_PODS = "pods"
OBJECT_LIMIT_STORAGE = "requests.storage"
OBJECT_LIMIT_RESOURCES = (OBJECT_LIMIT_PODS, *OBJECT_LIMIT_DEFAULTS)


# Where a cluster's HTTP routes live (Ingress hosts, HTTPRoute hostnames): each team under its
# own domain, ``<team>.<apps domain>``, so that no team's route takes another's traffic on a
# shared ingress or gateway. A placeholder until an admin sets the cluster's real one.
DEFAULT_APPS_DOMAIN = "apps.internal"


def team_domain(slug: str, apps_domain: str) -> str:
    """The domain a team's routes on a cluster are under: ``vision.apps.example.com``."""
    return f"{slug}.{apps_domain}"


# The default NetworkPolicy of a team namespace.
def network_policy_name(portal_name: str) -> str:
    return f"{portal_name}-team-ingress"


# Kubernetes' reserved prefix for its own identities (``system:serviceaccount:...``): no user
# identity the portal binds may start with it. A ':' is refused in usernames altogether (it
# separates the cluster's user prefix, and the team groups, from the rest).
SYSTEM_IDENTITY_PREFIX = "system:"

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
# The NVIDIA container runtime gives a container the GPUs NVIDIA_VISIBLE_DEVICES names; the
# device plugin sets it to the GPUs the container was allotted. No workload may set any
# NVIDIA_* variable itself, except NVIDIA_VISIBLE_DEVICES=void, which hides every GPU (the
# portal sets it on containers that ask for none).
NVIDIA_ENV_PREFIX = "NVIDIA_"
NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
NO_GPUS = "void"
# Annotations container runtimes and device plugins read to hand a container devices or change
# how it runs (CRI-O's io.kubernetes.cri-o.Devices, CDI device requests, Kata's and containerd's
# own): no workload in a team namespace may carry them.
RUNTIME_ANNOTATION_PREFIXES = (
    "io.kubernetes.cri-o.",
    "io.katacontainers.",
    "io.containerd.",
    "cdi.k8s.io/",
    "nvidia.cdi.k8s.io/",
)
# GPU sharing, as NVIDIA's GPU Operator sets it up and labels it. MIG (mixed strategy): the MIG
# manager partitions a node's GPUs into the profile its ``mig.config`` label names (a config of
# the operator's mig-parted ConfigMap: ``all-disabled``, ``all-1g.10gb``, ``all-balanced``...),
# reports progress in ``mig.config.state`` (pending, success, failed) and the device plugin
# advertises each profile as its own resource (``nvidia.com/mig-1g.10gb``). Time-slicing or MPS:
# the device plugin config the ``device-plugin.config`` label names advertises each GPU as
# ``gpu.replicas`` replicas of ``nvidia.com/gpu.shared`` and says how in ``gpu.sharing-strategy``.
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CONFIG_DISABLED = "all-disabled"
MIG_STATE_SUCCESS = "success"
MIG_STATE_FAILED = "failed"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
# The suffix GPU feature discovery adds to a node's product label when its GPUs are shared
# (``NVIDIA-A100-SXM4-80GB-SHARED``), and the device plugin configs the portal's operator steps
# ship (``time-slicing-4``: each GPU as 4 replicas).
SHARED_PRODUCT_SUFFIX = "-SHARED"
TIME_SLICING_CONFIG_PREFIX = "time-slicing-"


def mig_config_name(profile: str) -> str:
    """The GPU Operator's mig-parted config that makes every GPU of a node ``profile`` slices."""
    return f"all-{profile}"


def time_slicing_config_name(replicas: int) -> str:
    return f"{TIME_SLICING_CONFIG_PREFIX}{replicas}"


# The longest a GPU job may run (its Job's, or a bare GPU pod's, activeDeadlineSeconds).
MAX_RUNTIME_SECONDS = 30 * 24 * 3600

# --- Gateway API --------------------------------------------------------------------------------

# A service's traffic split between its revisions, as HTTPRoute backend weights, on a cluster that
# serves the Gateway API's CRDs.
GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"

# --- Kueue -------------------------------------------------------------------------------------

# On a Job: the LocalQueue it waits in, and the WorkloadPriorityClass it runs at (Kueue's own).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
# The scheduling gate Kueue's pod integration puts on each pod it queues, and lifts when it
# admits the pod (a Deployment's pods, or a bare pod, labelled with a queue).
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
# Who Kueue's manager acts as: the ServiceAccount of Kueue's own install (its manifests and Helm
# chart). Only Kueue may un-suspend a queued Job or lift a queued pod's gate.
KUEUE_MANAGER_USER = "system:serviceaccount:kueue-system:kueue-controller-manager"
# Who creates a Job's pods: the Job controller, as its own ServiceAccount when the controller
# manager runs with --use-service-account-credentials (kubeadm's default), else as the manager.
JOB_CONTROLLER_USERS = (
    "system:serviceaccount:kube-system:job-controller",
    "system:kube-controller-manager",
)

# A team's two LocalQueues in its namespace, one per kind of work (never ``default``: Kueue sends
# every unlabelled Job of a namespace to a LocalQueue of that name). Guaranteed work runs inside
# the team's own quota and is never preempted; opportunistic work borrows GPUs other teams (or
# the team itself) leave idle, and is preempted when the lender needs them back.
GUARANTEED = "guaranteed"
OPPORTUNISTIC = "opportunistic"
LOCAL_QUEUES = (GUARANTEED, OPPORTUNISTIC)
# The priority class of opportunistic work within its cluster's minimum run time: as high as
# guaranteed work's, so that neither lenders nor other borrowers may preempt it
# (``reconcile.queue_manifests``); the portal lowers it to opportunistic's once the time is up.
PROTECTED_BORROWER = "opportunistic-protected"


def priority_class_name(portal_name: str, kind: str) -> str:
    """The cluster-wide WorkloadPriorityClass of guaranteed, opportunistic or protected
    borrowing work."""
    return f"{portal_name}-{kind}"


def cluster_queue_name(portal_name: str, slug: str, kind: str) -> str:
    """A team's ClusterQueue for one kind of work: ``gpu-portal-vision`` holds the team's
    quota (guaranteed work, never borrowing), ``gpu-portal-vision-opportunistic`` none of its
    own (opportunistic work, borrowing only)."""
    base = f"{portal_name}-{slug}"
    return base if kind == GUARANTEED else f"{base}-{kind}"


def cohort_name(portal_name: str) -> str:
    """The root of a cluster's cohort tree: every team queue of the cluster lends and borrows
    under it (directly, or through its department's cohort)."""
    return portal_name


def department_cohort_name(portal_name: str, department_slug: str) -> str:
    """A department's cohort (``gpu-portal-department-research``), under its parent
    department's or the root."""
    return f"{portal_name}-department-{department_slug}"


def cohort_tree_root(portal_name: str, cohort: str) -> str:
    """The root of the portal's cohort tree for a department's cohort (it lends and borrows
    through the root, with no limits of its own); any other cohort as it is."""
    if cohort.startswith(department_cohort_name(portal_name, "")):
        return cohort_name(portal_name)
    return cohort


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
