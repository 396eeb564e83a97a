"""The demo's commands, run as scripts/demo.sh runs them: ``seed_demo`` (users, teams, the
cluster, grants and pending requests), ``seed_demo_jobs`` (jobs through the portal's service)
and ``check_idle_gpus``. Each is idempotent: a second run adds nothing. Nothing is enqueued (the
test's transaction never commits); tests/e2e/test_demo.py runs them with the worker, the watcher
and the devcluster, and test_idle_gpus.py runs the idle check on the devcluster's Prometheus."""

import io

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from clusters.models import Cluster, GpuCapacity
from gpujobs.models import GpuJob
from tenants.management.commands.seed_demo import DEMO_PASSWORD
from tenants.models import AuditEvent, Membership, QuotaGrant, QuotaRequest, Team
from tests import factories
from tests.integration.conftest import free_port

pytestmark = pytest.mark.django_db

PORTAL_APPS = ("clusters", "tenants", "gpujobs", "monitoring")


def run(command: str, *args, **options) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(command, *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def rows_by_model() -> dict[str, int]:
    counts = {
        model._meta.label: model.objects.count()
        for label in PORTAL_APPS
        for model in apps.get_app_config(label).get_models()
    }
    counts["auth.User"] = User.objects.count()
    return counts


def test_seed_demo_makes_the_demo_and_a_second_run_adds_nothing():
    out, _ = run("seed_demo", kubeconfig="/etc/kube/demo.yaml", prometheus_url="http://p:9090")

    assert "Demo data ready." in out
    usernames = set(User.objects.values_list("username", flat=True))
    assert usernames == {"admin", "lena", "mo", "otto", "sam"}
    assert User.objects.get(username="admin").is_superuser
    assert dict(Team.objects.values_list("slug", "name")) == {
        "vision": "Vision research",
        "speech": "Speech platform",
    }
    assert set(Membership.objects.values_list("team__slug", "user__username", "role")) == {
        ("vision", "lena", "lead"),
        ("vision", "mo", "member"),
        ("speech", "otto", "lead"),
        ("speech", "sam", "member"),
    }
    cluster = Cluster.objects.get(name="devcluster")
    assert (cluster.kubeconfig_path, cluster.prometheus_url) == (
        "/etc/kube/demo.yaml",
        "http://p:9090",
    )
    assert GpuCapacity.objects.get(cluster=cluster).allocatable == 32
    assert sorted(QuotaGrant.objects.values_list("team__slug", "gpus")) == [
        ("speech", 4),
        ("vision", 8),
    ]
    assert sorted(
        QuotaRequest.objects.filter(state="pending").values_list("team__slug", "gpus")
    ) == [("speech", 4), ("vision", 16)]
    first = rows_by_model()

    run("seed_demo", kubeconfig="/etc/kube/demo.yaml", prometheus_url="http://p:9090")

    assert rows_by_model() == first


def test_seed_demo_resets_the_demo_passwords_and_follows_a_new_cluster_address():
    run("seed_demo")
    lena = User.objects.get(username="lena")
    lena.set_password("changed-by-lena")
    lena.save()

    run("seed_demo", kubeconfig="/new/kubeconfig", gpus=48)

    assert User.objects.get(username="lena").check_password(DEMO_PASSWORD)
    assert Cluster.objects.get(name="devcluster").kubeconfig_path == "/new/kubeconfig"
    assert GpuCapacity.objects.get(cluster__name="devcluster").allocatable == 48


def test_seed_demo_jobs_submits_the_demo_jobs_once_through_the_service():
    run("seed_demo")

    out, _ = run("seed_demo_jobs")

    jobs = GpuJob.objects.order_by("pk")
    assert [(j.team.slug, j.name, j.gpus, j.state) for j in jobs] == [
        ("vision", "resnet50-baseline", 1, "queued"),
        ("vision", "augment-sweep", 1, "queued"),
        ("speech", "asr-finetune-de", 2, "queued"),
        ("vision", "detector-train", 2, "queued"),
    ]
    assert jobs.get(name="augment-sweep").submitted_by.username == "mo"
    assert out.count("Submitted job #") == 4
    assert AuditEvent.objects.filter(action=AuditEvent.Action.GPU_JOB_SUBMITTED).count() == 4
    first = rows_by_model()

    out, _ = run("seed_demo_jobs")

    assert "Submitted job" not in out
    assert rows_by_model() == first


def test_seed_demo_jobs_submits_the_running_job_again_once_it_has_ended():
    run("seed_demo")
    run("seed_demo_jobs")
    GpuJob.objects.filter(name="detector-train").update(state=GpuJob.State.FAILED)

    out, _ = run("seed_demo_jobs")

    assert out.count("Submitted job #") == 1
    assert GpuJob.objects.filter(name="detector-train").count() == 2
    assert GpuJob.objects.filter(name="resnet50-baseline").count() == 1


def test_seed_demo_jobs_without_the_demo_says_to_seed_it_first():
    with pytest.raises(CommandError, match="run seed_demo first"):
        run("seed_demo_jobs")


def test_check_idle_gpus_says_which_cluster_it_could_not_check_and_writes_nothing():
    factories.ClusterFactory(name="down", prometheus_url=f"http://127.0.0.1:{free_port()}")
    factories.ClusterFactory(name="no-metrics", prometheus_url="")
    before = rows_by_model()

    for _ in range(2):
        out, err = run("check_idle_gpus")

        assert out == ""
        assert err.startswith("down: not checked: ")
        assert "cannot be reached" in err
        assert "no-metrics" not in err
    assert rows_by_model() == before
