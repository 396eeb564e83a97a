import re
from collections.abc import Callable
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from clusters.image_references import parse_registry_entry
from clusters.vocabulary import (
    DEFAULT_APPS_DOMAIN,
    DEFAULT_GPU_MODEL_LABEL,
    DEFAULT_GPU_NODE_SELECTOR,
    DEFAULT_GPU_RESOURCE,
    DEFAULT_GPU_TAINT_KEY,
    DEFAULT_RESERVED_NAMESPACES,
    OBJECT_LIMIT_RESOURCES,
    OBJECT_LIMIT_STORAGE,
    POD_SECURITY_BASELINE,
    POD_SECURITY_RESTRICTED,
    SYSTEM_IDENTITY_PREFIX,
)
from core.redaction import redact
from core.validators import (
    DNS1123_LABEL_MAX_LENGTH,
    dns1123_label_validator,
    extended_resource_name_validator,
    validate_label_matchers,
)

# The devcluster's Prometheus scrapes its DCGM simulator under this job, as the DCGM exporter's
# Helm chart and most scrape configs name it.
DEFAULT_DCGM_EXPORTER_SELECTOR = 'job="dcgm-exporter"'


def _check_list(
    value, *, code: str, many: str, example: str, one: str, good: Callable[[str], bool], rule: str
) -> None:
    """``value`` is a list of strings ``good`` accepts; else a ValidationError (``code``) that
    names the first bad entries and says ``rule``."""
    if not isinstance(value, list) or not all(isinstance(entry, str) for entry in value):
        raise ValidationError(f"Give a list of {many}, e.g. {example}.", code=code)
    bad = [entry for entry in value if not good(entry)]
    if bad:
        raise ValidationError(
            f"Not a {one}: {', '.join(repr(entry) for entry in bad[:5])}. {rule}", code=code
        )


def default_reserved_namespaces() -> list[str]:
    return list(DEFAULT_RESERVED_NAMESPACES)


def validate_reserved_namespaces(value) -> None:
    """A list of namespace names (DNS labels)."""
    _check_list(
        value,
        code="reserved_namespaces",
        many="namespace names",
        example='["gpu-operator", "monitoring"]',
        one="namespace name",
        good=lambda entry: (
            len(entry) <= DNS1123_LABEL_MAX_LENGTH
            and bool(dns1123_label_validator.regex.match(entry))
        ),
        rule="Names are lower-case letters, digits and '-', at most 63 characters.",
    )


_STORAGE_QUANTITY = re.compile(r"[0-9]{1,9}(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?")
MAX_OBJECT_COUNT = 100_000


def validate_object_limits(value) -> None:
    """What a team's ResourceQuota caps besides GPUs, CPU and memory: a mapping of
    ``OBJECT_LIMIT_RESOURCES`` to a whole number (storage: a quantity such as ``500Gi``)."""
    if not isinstance(value, dict):
        raise ValidationError(
            'Give a mapping, e.g. {"services": "40", "requests.storage": "2Ti"}.',
            code="object_limits",
        )
    unknown = sorted(set(value) - set(OBJECT_LIMIT_RESOURCES))
    if unknown:
        raise ValidationError(
            f"Unknown resource {', '.join(map(repr, unknown[:5]))}; the quota caps: "
            f"{', '.join(OBJECT_LIMIT_RESOURCES)}.",
            code="object_limits",
        )
    for resource, amount in value.items():
        text = str(amount) if isinstance(amount, int) and not isinstance(amount, bool) else amount
        if resource == OBJECT_LIMIT_STORAGE:
            good = isinstance(text, str) and bool(_STORAGE_QUANTITY.fullmatch(text))
            shape = "a quantity such as 500Gi or 2Ti"
        else:
            good = isinstance(text, str) and text.isdigit() and int(text) <= MAX_OBJECT_COUNT
            shape = f"a whole number from 0 to {MAX_OBJECT_COUNT}"
        if not good:
            raise ValidationError(f"{resource}: {amount!r} is not {shape}.", code="object_limits")


def object_limits_text(value: dict) -> dict[str, str]:
    """Validated limits as the quota writes them (numbers as strings)."""
    return {resource: str(amount) for resource, amount in value.items()}


_DNS_SUBDOMAIN = re.compile(
    r"(?=.{1,200}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+"
)


def validate_apps_domain(value: str) -> None:
    """A DNS domain of at least two labels, lower case: ``apps.example.com``."""
    if not _DNS_SUBDOMAIN.fullmatch(value or ""):
        raise ValidationError(
            "Give a DNS domain in lower case, of two labels or more, e.g. apps.example.com.",
            code="apps_domain",
        )


def default_gpu_node_selector() -> dict:
    return dict(DEFAULT_GPU_NODE_SELECTOR)


def validate_allowed_registries(value) -> None:
    """A list of registry hosts, or paths under one (``registry.example.com/vision``)."""
    _check_list(
        value,
        code="allowed_registries",
        many="registries",
        example='["registry.example.com", "docker.io/library"]',
        one="registry",
        good=lambda entry: parse_registry_entry(entry) is not None,
        rule="Each entry starts with a registry host (with a '.' or a port, or localhost), "
        "optionally followed by a lower-case path: registry.example.com, localhost:5000, "
        "docker.io/library (Docker Hub's official images), docker.io/nvidia.",
    )


# Kubernetes' own priority classes (system-cluster-critical, system-node-critical): a pod of
# either may preempt anything on its node. Never allowed in a team namespace.
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
_PRIORITY_CLASS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def validate_allowed_priority_classes(value) -> None:
    """A list of PriorityClass names, none of Kubernetes' own ``system-*`` classes."""
    _check_list(
        value,
        code="allowed_priority_classes",
        many="PriorityClass names",
        example='["batch-low"]',
        one="PriorityClass name",
        good=lambda entry: bool(_PRIORITY_CLASS_NAME.fullmatch(entry)),
        rule="Names are lower-case letters, digits, '-' and '.', at most 253 characters.",
    )
    system = [entry for entry in value if entry.startswith(SYSTEM_PRIORITY_CLASS_PREFIX)]
    if system:
        raise ValidationError(
            f"{', '.join(system[:5])}: Kubernetes' {SYSTEM_PRIORITY_CLASS_PREFIX}* classes let a "
            "pod preempt anything on its node, and are never allowed in team namespaces.",
            code="allowed_priority_classes",
        )


def validate_user_prefix(value: str) -> None:
    """Members' identities must not fall among Kubernetes' own (``system:...``)."""
    if value.lower().startswith(SYSTEM_IDENTITY_PREFIX):
        raise ValidationError(
            f"Must not start with {SYSTEM_IDENTITY_PREFIX!r}: Kubernetes keeps those identities "
            "for itself.",
            code="user_prefix",
        )
    if any(char.isspace() for char in value):
        raise ValidationError("Must not contain spaces.", code="user_prefix")


class PodSecurityLevel(models.TextChoices):
    """The Pod Security Standard a cluster's team namespaces enforce (they warn and audit at
    restricted whatever it is)."""

    BASELINE = POD_SECURITY_BASELINE, "Baseline (no privileged, host namespaces or hostPath)"
    RESTRICTED = (
        POD_SECURITY_RESTRICTED,
        "Restricted (also non-root, no privilege escalation, all capabilities dropped)",
    )


class MetricsLabelLayout(models.TextChoices):
    """Where DCGM series carry the pod: its own labels, or ``exported_*`` when Prometheus
    scrapes the exporter without ``honor_labels``."""

    NAMESPACE = "namespace", "namespace / pod / container"
    EXPORTED = "exported", "exported_namespace / exported_pod / exported_container"


class GpuUtilizationMetric(models.TextChoices):
    GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL (percent)"
    GR_ENGINE_ACTIVE = (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE (0-1 ratio, works for MIG)",
    )


MAX_FAIR_SHARE_HALF_LIFE_HOURS = 24 * 90
MAX_BORROWER_MIN_RUNTIME_SECONDS = 24 * 3600
MAX_PREEMPTION_GRACE_SECONDS = 3600


class QuotaMode(models.TextChoices):
    """How a cluster enforces the grants: a fixed ResourceQuota per team, or Kueue queues that
    let jobs wait and let idle GPUs be borrowed (with the ResourceQuota as the hard ceiling)."""

    QUOTA_ONLY = "quota", "Quota only (ResourceQuota)"
    KUEUE = "kueue", "Kueue (queues, borrowing, preemption)"


class Cluster(models.Model):
    """One Kubernetes cluster the portal hands out GPU quota on.

    Its row is also the lock that serialises quota approvals on the cluster.
    """

    name = models.CharField(
        max_length=DNS1123_LABEL_MAX_LENGTH, unique=True, validators=[dns1123_label_validator]
    )
    display_name = models.CharField(max_length=200, blank=True)
    api_server_url = models.URLField(blank=True, help_text="Leave blank to use the kubeconfig's.")
    kubeconfig_path = models.CharField(max_length=500, blank=True)
    prometheus_url = models.URLField(blank=True)
    gpu_node_selector = models.JSONField(default=default_gpu_node_selector)
    gpu_taint_key = models.CharField(max_length=253, default=DEFAULT_GPU_TAINT_KEY)
    gpu_model_label = models.CharField(
        max_length=253,
        default=DEFAULT_GPU_MODEL_LABEL,
        help_text="Node label that names the GPU model (set by NVIDIA's GPU feature discovery).",
    )
    user_prefix = models.CharField(
        max_length=100,
        default="portal:",
        blank=True,
        validators=[validate_user_prefix],
        help_text="Prefix on portal usernames for the members' identities in this cluster's RBAC.",
    )
    allowed_registries = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_allowed_registries],
        help_text="Registries every container in a team namespace may pull from (the portal's "
        'jobs and anything members run there), e.g. ["registry.example.com", '
        '"docker.io/library"]: a host, or a path under one. Empty allows none, unless '
        "'allow all registries' is set.",
    )
    allow_all_registries = models.BooleanField(
        default=False,
        help_text="Allow images from any registry, whatever the list says.",
    )
    object_limits = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_object_limits],
        help_text="What each team's ResourceQuota caps besides GPUs, CPU and memory, where the "
        'built-in caps do not suit, e.g. {"services": "40", "requests.storage": "2Ti"}. '
        "Built in: pods PORTAL_TEAM_MAX_PODS, count/jobs.batch 200, services 50, configmaps "
        "100, secrets 100, persistentvolumeclaims 20, requests.storage 1Ti. An admin changes "
        "them per team (team object limits).",
    )
    apps_domain = models.CharField(
        max_length=200,
        default=DEFAULT_APPS_DOMAIN,
        validators=[validate_apps_domain],
        help_text="The domain of the cluster's HTTP routes: each team's Ingress hosts and "
        "HTTPRoute hostnames are under <team>.<apps domain>, and an inference service is "
        "<service>.<team>.<apps domain>. Point a wildcard DNS record at the cluster's ingress "
        "or gateway.",
    )
    reserved_namespaces = models.JSONField(
        default=default_reserved_namespaces,
        blank=True,
        validators=[validate_reserved_namespaces],
        help_text="Namespaces of the cluster's own components (GPU Operator, Kueue, monitoring, "
        "ingress and gateway controllers) that no team may take as its namespace. Starts with "
        "the usual ones; add your platform's.",
    )
    allowed_priority_classes = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_allowed_priority_classes],
        help_text="PriorityClasses a pod in a team namespace may name (priorityClassName), e.g. "
        '["batch-low"]. Empty allows none: the queue decides what runs first. Kubernetes\' '
        "system-* classes are never allowed.",
    )
    pod_security_level = models.CharField(
        max_length=10,
        choices=PodSecurityLevel.choices,
        default=PodSecurityLevel.BASELINE,
        help_text="The Pod Security Standard team namespaces enforce; they warn and audit at "
        "restricted either way. Under restricted, job images must run as a non-root user.",
    )
    metrics_label_layout = models.CharField(
        max_length=10,
        choices=MetricsLabelLayout.choices,
        default=MetricsLabelLayout.NAMESPACE,
        help_text="How Prometheus labels DCGM series with the pod that holds the GPU.",
    )
    gpu_utilization_metric = models.CharField(
        max_length=64,
        choices=GpuUtilizationMetric.choices,
        default=GpuUtilizationMetric.GPU_UTIL,
        help_text="DCGM_FI_DEV_GPU_UTIL (percent) or DCGM_FI_PROF_GR_ENGINE_ACTIVE (0-1). MIG "
        "instances only publish the engine activity: with GPU_UTIL the portal reads theirs "
        "beside the whole GPUs' utilisation, so either choice shows slices.",
    )
    shared_gpu_replicas = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="Node name -> replicas per GPU, for the nodes whose GPUs are shared "
        "(time-slicing or MPS, the nvidia.com/gpu.replicas label). Written by the capacity "
        "sync; GPU-hours count each pod's series on such a node as 1/replicas of a GPU.",
    )
    dcgm_exporter_selector = models.CharField(
        max_length=500,
        default=DEFAULT_DCGM_EXPORTER_SELECTOR,
        blank=True,
        validators=[validate_label_matchers],
        help_text="PromQL label matchers that only the DCGM exporter's own series carry, added "
        'to every GPU metrics query, e.g. job="dcgm-exporter" (with the exported_* layout '
        'also the exporter\'s namespace="gpu-operator"). Series from any other source, '
        "such as a tenant's pod publishing DCGM metric names with another team's labels, "
        "then never count. Pin labels the scrape sets, which a scraped pod cannot override. "
        "Empty trusts every series.",
    )
    idle_utilization_percent = models.PositiveSmallIntegerField(
        default=10,
        validators=[MaxValueValidator(100)],
        help_text="A job whose GPUs average below this over the idle window is idle.",
    )
    idle_window_minutes = models.PositiveIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(10080)]
    )
    overcommit_ratio = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal("1.00"),
        validators=[MinValueValidator(Decimal("0.01"))],
        help_text="Guaranteed GPUs granted may reach capacity times this ratio.",
    )
    quota_mode = models.CharField(
        max_length=10,
        choices=QuotaMode.choices,
        default=QuotaMode.QUOTA_ONLY,
        help_text="Kueue needs Kueue v0.17+ installed on the cluster.",
    )
    borrowers_share_by_weight = models.BooleanField(
        default=False,
        help_text="Kueue mode: borrowers of idle GPUs preempt one another until the borrowed "
        "GPUs are shared in proportion to the teams' fair-sharing weights. Off: first come, "
        "first served, and only a lender taking its GPUs back preempts a borrower.",
    )
    fair_share_half_life_hours = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(MAX_FAIR_SHARE_HALF_LIFE_HOURS)],
        help_text="Kueue mode: a team's weight for borrowing idle GPUs counts for less the more "
        "its opportunistic jobs used lately, their GPU-hours halved every this many hours. "
        "0: off, the weights alone decide.",
    )
    fair_share_usage_scale_gpu_hours = models.PositiveIntegerField(
        default=100,
        validators=[MinValueValidator(1), MaxValueValidator(1_000_000)],
        help_text="The decayed GPU-hours that halve a team's weight: it borrows with its weight "
        "divided by (1 + decayed GPU-hours / this).",
    )
    borrower_min_runtime_seconds = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(MAX_BORROWER_MIN_RUNTIME_SECONDS)],
        help_text="Kueue mode: an opportunistic job is not preempted before it has run this "
        "long, unless a lender's guaranteed job has waited longer than the lender's bound. "
        "0: borrowers may be preempted at once.",
    )
    lender_wait_bound_seconds = models.PositiveIntegerField(
        default=1800,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_BORROWER_MIN_RUNTIME_SECONDS)],
        help_text="The longest a lender's guaranteed job waits for borrowers still within "
        "their minimum run time: past it they lose their protection.",
    )
    preemption_grace_seconds = models.PositiveIntegerField(
        default=30,
        validators=[MaxValueValidator(MAX_PREEMPTION_GRACE_SECONDS)],
        help_text="Kueue mode: how long a preempted opportunistic job's containers have between "
        "SIGTERM and SIGKILL to save their work (the pods' termination grace period).",
    )
    gateway_api = models.BooleanField(
        null=True,
        blank=True,
        help_text="Whether the cluster serves the Gateway API's HTTPRoute: inference services "
        "then split traffic between revisions with HTTPRoute weights, otherwise by replica "
        "counts behind one Service. Detected from the API's discovery by each pass over the "
        "cluster's services; empty until first detected.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(overcommit_ratio__gt=0), name="cluster_overcommit_ratio_positive"
            ),
            models.CheckConstraint(
                condition=Q(quota_mode__in=["quota", "kueue"]), name="cluster_quota_mode_valid"
            ),
            models.CheckConstraint(
                condition=Q(pod_security_level__in=["baseline", "restricted"]),
                name="cluster_pod_security_level_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or self.name

    @property
    def prometheus_url_shown(self) -> str:
        """The Prometheus URL as pages show it: any credentials in it masked."""
        return redact(self.prometheus_url)


class GpuCapacity(models.Model):
    """How many GPUs of one resource kind (e.g. nvidia.com/gpu) a cluster has to hand out."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="gpu_capacities")
    resource_name = models.CharField(
        max_length=253, default=DEFAULT_GPU_RESOURCE, validators=[extended_resource_name_validator]
    )
    gpu_model = models.CharField(max_length=200, blank=True)
    allocatable = models.PositiveIntegerField(
        default=0, help_text="GPUs the cluster's nodes report (or an admin entered)."
    )
    admin_cap = models.PositiveIntegerField(
        null=True, blank=True, help_text="Optional lower limit set by an admin."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster", "resource_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "resource_name"], name="gpu_capacity_cluster_resource_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}: {self.capacity} × {self.resource_name}"

    @property
    def capacity(self) -> int:
        """GPUs the portal may plan with: what the cluster has, never above the admin's cap."""
        if self.admin_cap is None:
            return self.allocatable
        return min(self.allocatable, self.admin_cap)


class GpuModelCapacity(models.Model):
    """GPUs of one model (as the cluster's GPU model label names it) among the nodes offering a
    GPU resource: what per-model quota and Kueue's resource flavors plan with, and how large a
    job one node of the model can take. Written by the capacity sync from the nodes."""

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="gpu_model_capacities"
    )
    resource_name = models.CharField(
        max_length=253, default=DEFAULT_GPU_RESOURCE, validators=[extended_resource_name_validator]
    )
    gpu_model = models.CharField(max_length=200)
    allocatable = models.PositiveIntegerField(default=0)
    nodes = models.PositiveIntegerField(default=0)
    max_per_node = models.PositiveIntegerField(
        default=0, help_text="The most GPUs one Ready node of this model offers."
    )
    replicas = models.PositiveIntegerField(
        default=1,
        help_text="Replicas each physical GPU of a shared model (nvidia.com/gpu.shared) is "
        "split into, from the nodes' nvidia.com/gpu.replicas label (the most any node says); "
        "1 for whole GPUs and MIG slices. A replica is priced as 1/replicas of the GPU.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster", "resource_name", "gpu_model"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "resource_name", "gpu_model"],
                name="gpu_model_capacity_unique",
            ),
            models.CheckConstraint(
                condition=~Q(gpu_model=""), name="gpu_model_capacity_model_named"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}: {self.allocatable} × {self.gpu_model} ({self.resource_name})"
