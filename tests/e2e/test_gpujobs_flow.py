"""The GPU job flow in a real browser, against the devcluster with a real Celery worker and the
watcher: a member submits a job from the team page, follows it live to Running on a GPU node,
and stops it; a finishing job turns Succeeded on its page without a reload."""

import re

import pytest
from playwright.sync_api import expect

from gpujobs.models import GpuJob
from tests.integration import conftest as integration
from tests.integration.conftest import wait_for
from tests.integration.gpujobs import fixtures
from tests.integration.gpujobs.fixtures import finishing, job_pods, submit, wait_for_finish

# The integration suite's fixtures: PostgreSQL, a Celery worker, the watcher, the devcluster.
postgres_database = integration.postgres_database
celery_worker_process = integration.celery_worker_process
watcher_process = fixtures.watcher_process
running_services = fixtures.running_services
k8s = integration.k8s
core = integration.core
portal_kubeconfig = fixtures.portal_kubeconfig
gpu_cluster = fixtures.gpu_cluster
make_gpu_team = fixtures.make_gpu_team

pytestmark = [pytest.mark.e2e, pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

LIVE_TIMEOUT_MS = 90_000


@pytest.fixture(autouse=True)
def _services(running_services):
    """The worker creates the Jobs and the watcher brings their state back."""


def test_member_submits_a_job_follows_it_to_running_and_stops_it(
    sign_in, screenshot, make_gpu_team, gpu_cluster, core
):
    gpu = make_gpu_team(gpus=1)
    page = sign_in(gpu.member)

    page.goto(f"/teams/{gpu.team.slug}/")
    team_jobs = page.get_by_test_id("team-jobs")
    expect(team_jobs.get_by_test_id("gpus-in-use-none")).to_be_visible()
    team_jobs.get_by_role("link", name="Submit a job").click()

    expect(page.get_by_role("heading", name="Submit a GPU job")).to_be_visible()
    expect(page.get_by_label("Team")).to_have_value(str(gpu.team.pk))
    page.get_by_label("Name").fill("browser-train")
    page.get_by_label("Image", exact=True).fill("registry.example.com/vision/trainer:1.4")
    page.get_by_label("Command (optional)", exact=True).fill("python\ntrain.py")
    page.get_by_label("Arguments (optional)", exact=True).fill("--epochs\n3")
    page.get_by_label("Environment (optional)", exact=True).fill("LR=3e-4")
    page.get_by_label("GPUs", exact=True).fill("2")
    page.get_by_role("button", name="Submit job").click()

    # Over the team's quota: refused on the form, beside the GPUs field, nothing submitted.
    gpus_field = page.locator("#field-gpus")
    expect(gpus_field.locator(".errorlist")).to_contain_text("exceeding it by 1")
    assert not GpuJob.objects.exists()
    screenshot(page, "job-form-over-quota")

    page.get_by_label("GPUs", exact=True).fill("1")
    page.get_by_role("button", name="Submit job").click()

    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    job = GpuJob.objects.get()
    expect(page.get_by_role("status")).to_contain_text(f"Submitted job #{job.pk} browser-train")
    # The page follows the job without a reload: queued, then running on a GPU node.
    expect(page.get_by_test_id("job-state")).to_have_text("running", timeout=LIVE_TIMEOUT_MS)
    expect(page.get_by_test_id("job-node")).to_have_text(re.compile(r"^gpu-node-\d+$"))
    expect(page.get_by_test_id("job-started")).not_to_have_text("—")
    expect(page.get_by_test_id("job-spec")).to_contain_text("train.py")
    screenshot(page, "job-running")

    page.get_by_test_id("stop-job").click()

    expect(page.get_by_test_id("job-state")).to_have_text("cancelled")
    expect(page.get_by_test_id("job-message")).to_have_text(f"Stopped by {gpu.member.username}.")
    expect(page.get_by_test_id("stop-job")).to_have_count(0)
    job.refresh_from_db()
    wait_for(lambda: not job_pods(core, job), timeout=60, what="the job's pods to be removed")

    page.get_by_role("link", name="GPU jobs").first.click()
    row = page.get_by_test_id(f"job-row-{job.pk}")
    expect(row).to_contain_text("browser-train")
    expect(row.get_by_test_id(f"job-state-{job.pk}")).to_have_text("Cancelled")


def test_job_page_turns_succeeded_with_its_exit_code_without_a_reload(
    sign_in, make_gpu_team, gpu_cluster
):
    gpu = make_gpu_team(gpus=1)
    response = submit(gpu.member, gpu.team, gpu_cluster, name="short", annotations=finishing(6))
    job_id = response.data["id"]
    page = sign_in(gpu.member)
    page.goto(f"/jobs/{job_id}/")
    expect(page.get_by_test_id("job-state")).to_have_text(
        re.compile("^(queued|submitted|pending|running)$")
    )

    expect(page.get_by_test_id("job-state")).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(page.get_by_test_id("job-exit-code")).to_have_text("0")
    expect(page.get_by_test_id("job-finished")).not_to_have_text("—")
    job = wait_for_finish(job_id, "succeeded")
    expect(page.get_by_test_id("job-node")).to_have_text(job.node)
