"""Demo data: an admin, two teams with leads and members, a cluster with capacity, some requests.

Idempotent: running it again leaves existing rows alone and resets the demo passwords.
"""

import datetime

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster, GpuCapacity
from tenants import services
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


class Command(BaseCommand):
    help = "Create the demo's admin, teams, leads, cluster and a few quota requests."

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
                services.membership_set(actor=admin, team=teams[slug], user=users[username],
                                        role=role)  # fmt: skip

        cluster, _ = Cluster.objects.update_or_create(
            name=options["cluster_name"],
            defaults={
                "display_name": "Local dev cluster",
                "kubeconfig_path": options["kubeconfig"],
                "prometheus_url": options["prometheus_url"],
            },
        )
        GpuCapacity.objects.update_or_create(
            cluster=cluster,
            resource_name="nvidia.com/gpu",
            defaults={"allocatable": options["gpus"], "gpu_model": "NVIDIA-A100-SXM4-80GB"},
        )

        if not QuotaRequest.objects.exists():
            today = timezone.localdate()
            granted = services.quota_request_create(
                requested_by=users["lena"], team=teams["vision"], cluster=cluster, gpus=8,
                ends_on=today + datetime.timedelta(days=90), cpu_cores=64, memory_gib=512,
                justification="Training the defect-detection model for Q1.",
            )  # fmt: skip
            services.quota_request_approve(reviewer=admin, quota_request=granted,
                                           note="Approved for the quarter.")  # fmt: skip
            services.quota_request_create(
                requested_by=users["otto"], team=teams["speech"], cluster=cluster, gpus=4,
                justification="Fine-tuning the speech recogniser on new accents.",
            )  # fmt: skip
            services.quota_request_create(
                requested_by=users["lena"], team=teams["vision"], cluster=cluster, gpus=16,
                ends_on=today + datetime.timedelta(days=14),
                justification="Hyper-parameter sweep before the paper deadline.",
            )  # fmt: skip
        self.stdout.write(self.style.SUCCESS("Demo data ready."))
