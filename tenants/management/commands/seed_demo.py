"""Demo data: an admin, two teams with leads and members, a cluster with capacity, a grant for
each team and requests waiting in the review queue.

Idempotent: running it again leaves existing rows alone, adds what is missing and resets the
demo passwords. The demo's jobs and its GPU history come from ``seed_demo_jobs`` and
``python -m devcluster.demo_history`` (see scripts/demo.sh).
"""

import datetime
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from clusters.image_references import registry_entries
from clusters.kube import KubeClient, KubeError
from clusters.models import Cluster, GpuCapacity
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from tenants import cluster_settings, quota, services
from tenants.models import Membership, QuotaRequest, Team

DEMO_PASSWORD = "gpu-portal-demo"
USERS = {
    # username: (is_admin, team slug, role)
    "admin": (True, None, None),
    "lena": (False, "vision", Membership.Role.LEAD),
    "mo": (False, "vision", Membership.Role.MEMBER),
    "otto": (False, "speech", Membership.Role.LEAD),
    "sam": (False, "speech", Membership.Role.MEMBER),
}
TEAMS = {"vision": "Vision research", "speech": "Speech platform"}
# The demo cluster's allowed registries: the demo's own images, and the public registries a
# newcomer's first job most likely pulls from (nvcr.io/nvidia/pytorch, pytorch/pytorch on
# Docker Hub, ...). A real cluster lists its own (the cluster's queueing page).
DEMO_REGISTRIES = (
    "registry.example.com",
    "nvcr.io",
    "docker.io",
    "ghcr.io",
    "quay.io",
    "registry.k8s.io",
)


@dataclass(frozen=True)
class DemoRequest:
    """A quota request of the demo, made once (known by its team and justification)."""

    team: str
    requested_by: str
    gpus: int
    justification: str
    days: int | None = None  # open-ended when None
    approval: str | None = None  # the admin's note; None leaves it pending in the review queue
    cpu_cores: int | None = None
    memory_gib: int | None = None


REQUESTS = (
    DemoRequest(
        "vision",
        "lena",
        8,
        "Training the defect-detection model for Q1.",
        days=90,
        approval="Approved for the quarter.",
        cpu_cores=64,
        memory_gib=512,
    ),
    DemoRequest(
        "speech",
        "otto",
        4,
        "Evaluating and serving the speech recogniser.",
        days=60,
        approval="Approved.",
    ),
    DemoRequest("speech", "otto", 4, "Fine-tuning the speech recogniser on new accents."),
    DemoRequest("vision", "lena", 16, "Hyper-parameter sweep before the paper deadline.", days=14),
)


class Command(BaseCommand):
    help = "Create the demo's admin, teams, leads, cluster, grants and pending quota requests."

    def add_arguments(self, parser):
        parser.add_argument("--cluster-name", default="devcluster")
        parser.add_argument("--gpus", type=int, default=32, help="nvidia.com/gpu capacity")
        parser.add_argument("--kubeconfig", default="")
        parser.add_argument("--prometheus-url", default="")

    @transaction.atomic
    def handle(self, *args, **options):
        users = {}
        for username, (is_admin, _, _) in USERS.items():
            user, _ = User.objects.get_or_create(
                username=username, defaults={"email": f"{username}@example.com"}
            )
            user.is_staff = user.is_superuser = is_admin
            user.set_password(DEMO_PASSWORD)
            user.save()
            users[username] = user
        admin = users["admin"]
        teams = {}
        for slug, name in TEAMS.items():
            teams[slug] = Team.objects.filter(slug=slug).first() or services.team_create(
                actor=admin, slug=slug, name=name
            )
        for username, (_, slug, role) in USERS.items():
            if slug:
                services.membership_set(
                    actor=admin, team=teams[slug], user=users[username], role=role
                )

        address = {
            "display_name": "Local dev cluster",
            "kubeconfig_path": options["kubeconfig"],
            "prometheus_url": options["prometheus_url"],
        }
        cluster, created = Cluster.objects.update_or_create(
            name=options["cluster_name"],
            defaults=address,
            # Where the demo's images come from; any other image is refused, by the portal and
            # by the cluster's admission policy.
            create_defaults={
                **address,
                "allowed_registries": list(DEMO_REGISTRIES),
                "allow_all_registries": False,
            },
        )
        listed = registry_entries(cluster.allowed_registries or [])
        missing = [r for r in DEMO_REGISTRIES if r not in listed]
        if not created and missing:
            # A demo made before: add what it lacks, keeping what an admin added (audited, and
            # the cluster's admission policies follow).
            cluster = cluster_settings.cluster_set_registries(
                actor=admin,
                cluster=cluster,
                allowed_registries=[*cluster.allowed_registries, *missing],
            )
        GpuCapacity.objects.update_or_create(
            cluster=cluster,
            resource_name=DEFAULT_GPU_RESOURCE,
            defaults={"allocatable": options["gpus"], "gpu_model": "NVIDIA-A100-SXM4-80GB"},
        )
        self._portal_namespace(cluster)

        today = timezone.localdate()
        for demo in REQUESTS:
            team = teams[demo.team]
            if QuotaRequest.objects.filter(team=team, justification=demo.justification).exists():
                continue
            quota_request = quota.quota_request_create(
                requested_by=users[demo.requested_by],
                team=team,
                cluster=cluster,
                gpus=demo.gpus,
                justification=demo.justification,
                ends_on=today + datetime.timedelta(days=demo.days) if demo.days else None,
                cpu_cores=demo.cpu_cores,
                memory_gib=demo.memory_gib,
            )
            if demo.approval is not None:
                quota.quota_request_approve(
                    reviewer=admin, quota_request=quota_request, note=demo.approval
                )
        self.stdout.write(self.style.SUCCESS("Demo data ready."))

    def _portal_namespace(self, cluster: Cluster) -> None:
        """The portal's own namespace on the demo's cluster (deploy/namespace.yaml), where the
        watcher's leader election keeps its Lease: in a real cluster its admin makes it; the
        demo runs with the cluster's admin credentials and plays that part."""
        if not cluster.kubeconfig_path:
            return
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": settings.PORTAL_NAMESPACE,
                "labels": {"app.kubernetes.io/name": settings.PORTAL_NAME},
            },
        }
        try:
            KubeClient.for_cluster(cluster).apply(namespace)
        except KubeError as error:
            self.stderr.write(f"The portal's namespace was not made: {error}")
