"""The demo's GPU jobs: a few that finish by themselves (one of them fails) and one that keeps
running, submitted through the portal's own service as their team's members. The worker creates
them on the cluster and the watcher records what becomes of them, as for any job.

Run after ``seed_demo`` (the teams, their grants and the cluster). Idempotent: a job that ends is
submitted once; the running one again only when no job of its name is still active (a cluster
started afresh lost it, say).
"""

from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from clusters.models import Cluster
from gpujobs import services
from gpujobs.models import GpuJob
from gpujobs.observe import ACTIVE_STATES
from gpujobs.specs import JobRequest
from tenants.models import Team

# The devcluster's simulated pods read these (devcluster/README.md, "Pod annotations"); a real
# cluster ignores them, and its jobs run for as long as their images do.
COMPLETE_AFTER = "devcluster.gpuportal.io/complete-after-seconds"
EXIT_CODE = "devcluster.gpuportal.io/exit-code"
GPU_UTILISATION = "devcluster.gpuportal.io/gpu-util"


@dataclass(frozen=True)
class DemoJob:
    """A job of the demo: who submits it, what it runs, and how the simulated pod behaves."""

    team: str
    submitted_by: str
    name: str
    image: str
    command: list[str]
    args: list[str] = field(default_factory=list)
    gpus: int = 1
    utilisation: tuple[int, ...] = (90,)  # % of its simulated GPUs, one by one (the last repeats)
    finishes_after: int | None = None  # seconds after it starts running; None: keeps running
    exit_code: int = 0

    @property
    def annotations(self) -> dict[str, str]:
        annotations = {GPU_UTILISATION: ",".join(str(u) for u in self.utilisation)}
        if self.finishes_after is not None:
            annotations[COMPLETE_AFTER] = str(self.finishes_after)
            annotations[EXIT_CODE] = str(self.exit_code)
        return annotations


DEMO_JOBS = (
    DemoJob(
        "vision",
        "lena",
        "resnet50-baseline",
        "registry.example.com/vision/trainer:1.4",
        ["python", "train.py"],
        ["--model", "resnet50", "--epochs", "3"],
        utilisation=(91,),
        finishes_after=30,
    ),
    DemoJob(
        "vision",
        "mo",
        "augment-sweep",
        "registry.example.com/vision/trainer:1.4",
        ["python", "sweep.py"],
        ["--trials", "12"],
        utilisation=(47,),
        finishes_after=20,
        exit_code=1,
    ),
    DemoJob(
        "speech",
        "sam",
        "asr-finetune-de",
        "registry.example.com/speech/asr:2.1",
        ["python", "finetune.py"],
        ["--language", "de"],
        gpus=2,
        utilisation=(76, 64),
        finishes_after=40,
    ),
    DemoJob(
        "vision",
        "lena",
        "detector-train",
        "registry.example.com/vision/trainer:1.4",
        ["python", "train.py"],
        ["--model", "detector", "--epochs", "200"],
        gpus=2,
        utilisation=(86, 78),
    ),
)


class Command(BaseCommand):
    help = "Submit the demo's GPU jobs: a few that finish by themselves and one that keeps running."

    def add_arguments(self, parser):
        parser.add_argument("--cluster-name", default="devcluster")

    def handle(self, *args, cluster_name, **options):
        cluster = Cluster.objects.filter(name=cluster_name).first()
        if cluster is None:
            raise CommandError(f"No cluster {cluster_name!r}: run seed_demo first.")
        for demo in DEMO_JOBS:
            team = Team.objects.get(slug=demo.team)
            jobs = GpuJob.objects.filter(team=team, cluster=cluster, name=demo.name)
            if demo.finishes_after is None:
                jobs = jobs.filter(state__in=ACTIVE_STATES)
            if jobs.exists():
                continue
            job = services.job_submit(
                user=User.objects.get(username=demo.submitted_by),
                team=team,
                cluster=cluster,
                job_request=JobRequest.parse(
                    {
                        "name": demo.name,
                        "image": demo.image,
                        "command": demo.command,
                        "args": demo.args,
                        "gpus": demo.gpus,
                        "annotations": demo.annotations,
                    }
                ),
            )
            self.stdout.write(f"Submitted job #{job.pk} {job.name} for team {team.slug}.")
        self.stdout.write(self.style.SUCCESS("Demo jobs submitted."))
