"""factory_boy factories for every model the tests create: ``XFactory(field=...)`` saves one
row with sensible defaults for the rest. State that a service would write (a decision, a grant's
reconcile) is better made through the service, so the test sees the same rules as the portal."""

import datetime
import functools

import factory
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.utils import timezone

from accounts.models import OidcIdentity
from clusters.models import Cluster, GpuCapacity, GpuModelCapacity
from gpujobs.models import GpuJob
from interactive.models import HomeVolume, InteractiveSession
from monitoring.models import IdlePod, IdlePolicy, Notification
from serving.models import InferenceService, Revision
from sharing.models import LayoutRequest
from tenants.models import (
    AuditEvent,
    ClusterState,
    Department,
    Membership,
    QuotaGrant,
    QuotaRequest,
    Team,
    TeamCluster,
    TeamQueuePolicy,
)
from webhooks.models import Delivery, Webhook
from workloads.models import MemberLimit

PASSWORD = "correct-horse-battery"


@functools.cache
def password_hash() -> str:
    """Every user's password, hashed once (by the suite's fast hasher, see tests/conftest.py):
    a user is then one INSERT, not an INSERT and an UPDATE with the hash."""
    return make_password(PASSWORD)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ["username"]

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.LazyFunction(password_hash)


class AdminFactory(UserFactory):
    is_staff = True


class OidcIdentityFactory(factory.django.DjangoModelFactory):
    """A user who signed in through single sign-on (who has no password of their own)."""

    class Meta:
        model = OidcIdentity

    user = factory.SubFactory(UserFactory, password="!")
    subject = factory.Sequence(lambda n: f"subject-{n}")
    last_sign_in_at = factory.LazyFunction(timezone.now)
    groups = factory.LazyFunction(lambda: ["gpu-vision-members"])


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        django_get_or_create = ["name"]

    name = factory.Sequence(lambda n: f"cluster-{n}")
    display_name = factory.LazyAttribute(lambda c: c.name.title())
    # Tests that are about registries list them (an empty list allows none).
    allow_all_registries = True


class GpuCapacityFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GpuCapacity

    cluster = factory.SubFactory(ClusterFactory)
    resource_name = "nvidia.com/gpu"
    gpu_model = "NVIDIA-A100-SXM4-80GB"
    allocatable = 32


class GpuModelCapacityFactory(factory.django.DjangoModelFactory):
    """GPUs of one model on a cluster, as the capacity sync writes them from the nodes."""

    class Meta:
        model = GpuModelCapacity

    cluster = factory.SubFactory(ClusterFactory)
    resource_name = "nvidia.com/gpu"
    gpu_model = "NVIDIA-A100-SXM4-80GB"
    allocatable = 32
    nodes = factory.LazyAttribute(lambda m: max(m.allocatable // m.max_per_node, 1))
    max_per_node = 8


class DepartmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Department
        django_get_or_create = ["slug"]

    slug = factory.Sequence(lambda n: f"department-{n}")
    name = factory.LazyAttribute(lambda d: d.slug.title())


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ["slug"]

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda t: t.slug.replace("-", " ").title())


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.MEMBER


class QuotaRequestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaRequest

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)
    gpu_resource = "nvidia.com/gpu"
    gpus = 4
    starts_on = factory.LazyFunction(timezone.localdate)
    ends_on = factory.LazyAttribute(lambda r: r.starts_on + datetime.timedelta(days=30))
    justification = "Fine-tuning the support model."
    requested_by = factory.SubFactory(UserFactory)


class QuotaGrantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaGrant

    request = factory.SubFactory(QuotaRequestFactory, state=QuotaRequest.State.APPROVED)
    team = factory.SelfAttribute("request.team")
    cluster = factory.SelfAttribute("request.cluster")
    gpu_resource = factory.SelfAttribute("request.gpu_resource")
    gpu_model = factory.SelfAttribute("request.gpu_model")
    gpus = factory.SelfAttribute("request.gpus")
    starts_on = factory.SelfAttribute("request.starts_on")
    ends_on = factory.SelfAttribute("request.ends_on")
    granted_by = factory.SubFactory(AdminFactory)


class TeamClusterFactory(factory.django.DjangoModelFactory):
    """A team's reconcile state on one cluster (the worker writes these in the product)."""

    class Meta:
        model = TeamCluster

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)


class ClusterStateFactory(factory.django.DjangoModelFactory):
    """A cluster's cluster-wide reconcile state (the worker writes these in the product)."""

    class Meta:
        model = ClusterState

    cluster = factory.SubFactory(ClusterFactory)


class TeamQueuePolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TeamQueuePolicy

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)


class AuditEventFactory(factory.django.DjangoModelFactory):
    """An audit event as the services write them; tests that check what a service wrote read
    the real ones instead."""

    class Meta:
        model = AuditEvent

    team = factory.SubFactory(TeamFactory)
    actor = factory.SubFactory(UserFactory)
    action = "quota_request.created"
    target_type = "QuotaRequest"
    target_id = factory.Sequence(lambda n: n + 1)


class GpuJobFactory(factory.django.DjangoModelFactory):
    """A job row as if submitted; nothing is enqueued (the services do that on commit)."""

    class Meta:
        model = GpuJob

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)
    submitted_by = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"job-{n}")
    image = "registry.example.com/ml/trainer:1.0"
    gpus = 1
    max_runtime_seconds = 3600


class InteractiveSessionFactory(factory.django.DjangoModelFactory):
    """A session row as if started; nothing is enqueued (the services do that on commit)."""

    class Meta:
        model = InteractiveSession

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)
    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"notebook-{n}")
    image = "registry.example.com/ml/notebook:1.0"
    cpu_cores = 1
    memory_gib = 2
    max_lifetime_seconds = 8 * 3600


class HomeVolumeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = HomeVolume

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)
    owner = factory.SubFactory(UserFactory)
    size_gib = 10


class IdlePolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = IdlePolicy
        django_get_or_create = ["team"]

    team = factory.SubFactory(TeamFactory)


class IdlePodFactory(factory.django.DjangoModelFactory):
    """An open idle episode of one pod, idle for the last hour."""

    class Meta:
        model = IdlePod

    cluster = factory.SubFactory(ClusterFactory)
    team = factory.SubFactory(TeamFactory)
    namespace = factory.SelfAttribute("team.slug")
    pod = factory.Sequence(lambda n: f"pod-{n}")
    gpus = 1
    average_utilisation = 0.0
    first_idle_at = factory.LazyFunction(lambda: timezone.now() - datetime.timedelta(hours=1))
    last_idle_at = factory.LazyFunction(timezone.now)


class NotificationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Notification

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    kind = Notification.Kind.IDLE
    subject = factory.Sequence(lambda n: f"GPUs idle in pod-{n}")


class InferenceServiceFactory(factory.django.DjangoModelFactory):
    """A service row as if deployed; nothing is enqueued (the services do that on commit).
    Give it revisions with ``RevisionFactory``."""

    class Meta:
        model = InferenceService

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)
    created_by = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"llm-{n}")


class RevisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Revision

    service = factory.SubFactory(InferenceServiceFactory)
    number = factory.Sequence(lambda n: n + 1)
    created_by = factory.SelfAttribute("service.created_by")
    image = "registry.example.com/ml/llm-server:1.0"
    gpus = 1
    port = 8000


class WebhookFactory(factory.django.DjangoModelFactory):
    """A webhook row as if added (no audit event: ``webhooks.services.webhook_create`` writes
    that), for a receiver the test runs."""

    class Meta:
        model = Webhook

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"hook-{n}")
    url = "http://127.0.0.1:9/hook"
    format = Webhook.Format.GENERIC
    events = factory.LazyFunction(lambda: ["gpu_job.failed"])
    secret = factory.Sequence(lambda n: f"secret-{n:04d}-for-tests")


class DeliveryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Delivery

    webhook = factory.SubFactory(WebhookFactory)
    event = "gpu_job.failed"
    payload = factory.LazyFunction(lambda: {"event": "gpu_job.failed", "data": {}})
    next_attempt_at = factory.LazyFunction(timezone.now)


class LayoutRequestFactory(factory.django.DjangoModelFactory):
    """A lead's pending sharing layout: 2 of a grant's A100 as 14 x mig-1g.10gb. Give it a
    ``source_grant`` of whole GPUs of one model (its team, cluster and model follow)."""

    class Meta:
        model = LayoutRequest

    source_grant = factory.SubFactory(QuotaGrantFactory, request__gpu_model="NVIDIA-A100-SXM4-80GB")
    team = factory.SelfAttribute("source_grant.team")
    cluster = factory.SelfAttribute("source_grant.cluster")
    gpu_model = factory.SelfAttribute("source_grant.gpu_model")
    gpus = 2
    kind = LayoutRequest.Kind.MIG
    mig_profile = "1g.10gb"
    slices = factory.LazyAttribute(lambda layout: layout.gpus * 7)
    ends_on = factory.LazyAttribute(lambda layout: layout.source_grant.ends_on)
    justification = "Notebooks need a slice each."
    requested_by = factory.SubFactory(UserFactory)


class MemberLimitFactory(factory.django.DjangoModelFactory):
    """A lead's limit of 2 GPUs at once for a member of the team on a cluster."""

    class Meta:
        model = MemberLimit

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)
    cluster = factory.SubFactory(ClusterFactory)
    max_gpus = 2
    max_running = None
    set_by = factory.SubFactory(UserFactory)
