"""Queueing with Kueue in a real browser, against the devcluster's Kueue with a real Celery
worker and the watcher: the team pages show GPUs lent and borrowed while one team's
opportunistic job runs on another's idle GPUs; the lender submits guaranteed work from the form
and gets its GPUs back; the borrower's job page says who preempted it and why; and a waiting
job's page says why it waits, where it stands and when it may start."""

import re

import pytest
from playwright.sync_api import expect

from gpujobs import queue_reads
from gpujobs.models import GpuJob
from tests.integration import conftest as integration
from tests.integration.conftest import wait_for
from tests.integration.gpujobs import fixtures, kueue
from tests.integration.gpujobs.fixtures import submit, wait_for_state
from tests.integration.gpujobs.kueue import A100, H100

# The integration suite's fixtures: PostgreSQL, a Celery worker, the watcher, the devcluster.
postgres_database = integration.postgres_database
celery_worker_process = integration.celery_worker_process
watcher_process = fixtures.watcher_process
running_services = fixtures.running_services
k8s = integration.k8s
core = integration.core
portal_kubeconfig = fixtures.portal_kubeconfig
gpu_cluster = fixtures.gpu_cluster
kueue_cluster = kueue.kueue_cluster
make_kueue_team = kueue.make_kueue_team

pytestmark = [pytest.mark.e2e, pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

LIVE_TIMEOUT_MS = 90_000


@pytest.fixture(autouse=True)
def _services(running_services):
    """The worker creates the Jobs and the watcher brings their state and the queues back."""


def submit_from_the_form(page, *, name: str, gpus: int, model: str, kind: str) -> GpuJob:
    page.goto("/jobs/new/")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Image", exact=True).fill("registry.example.com/vision/trainer:1.4")
    page.get_by_label("GPUs", exact=True).fill(str(gpus))
    page.get_by_label("GPU model").select_option(model)
    page.get_by_label("Kind of work").select_option(kind)
    expect(page.locator("#field-priority")).to_contain_text("never preempted")
    page.get_by_role("button", name="Submit job").click()
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    return GpuJob.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))


def test_members_see_lent_and_borrowed_gpus_preemption_and_why_a_job_waits(
    sign_in, screenshot, make_kueue_team, kueue_cluster
):
    cluster = kueue_cluster.cluster
    lender = make_kueue_team({A100: 2}, name="lender")
    borrower = make_kueue_team({H100: 1}, name="borrower")
    response = submit(
        borrower.member,
        borrower.team,
        cluster,
        name="borrows",
        gpus=2,
        gpu_model=A100,
        priority="opportunistic",
    )
    borrowing = wait_for_state(response.json()["id"], GpuJob.State.RUNNING, timeout=60)
    wait_for(
        lambda: queue_reads.team_queue(team=lender.team, cluster=cluster).lent == 2,
        timeout=30,
        what="the watcher to read the lender's 2 A100 lent",
    )

    # The team pages: the lender lends its 2 idle A100, the borrower borrows them.
    lender_page = sign_in(lender.member)
    lender_page.goto(f"/teams/{lender.team.slug}/")
    queue = lender_page.get_by_test_id("team-queue")
    expect(queue.get_by_test_id("team-lent")).to_have_text("2")
    expect(queue.get_by_test_id("team-borrowed")).to_have_text("0")
    expect(queue.get_by_test_id("team-queue-gpus")).to_contain_text(A100)
    borrower_page = sign_in(borrower.member)
    borrower_page.goto(f"/teams/{borrower.team.slug}/")
    expect(borrower_page.get_by_test_id("team-borrowed")).to_have_text("2")
    expect(borrower_page.get_by_test_id("team-admitted-count")).to_have_text("1")
    screenshot(borrower_page, "kueue-team-borrowing")

    # The lender submits guaranteed work and gets its GPUs back.
    mine = submit_from_the_form(lender_page, name="mine", gpus=2, model=A100, kind="guaranteed")
    expect(lender_page.get_by_test_id("job-state")).to_have_text("running", timeout=LIVE_TIMEOUT_MS)
    expect(lender_page.get_by_test_id("job-priority")).to_contain_text("Guaranteed")

    borrower_page.goto(f"/jobs/{borrowing.pk}/")
    expect(borrower_page.get_by_test_id("job-preempted")).to_contain_text(
        f"by job #{mine.pk} of team {lender.team.slug} (guaranteed): the team whose idle GPUs "
        "it borrowed took them back",
        timeout=LIVE_TIMEOUT_MS,
    )
    expect(borrower_page.get_by_test_id("job-state")).to_have_text("pending")
    expect(borrower_page.get_by_test_id("queue-why")).to_contain_text("idle in the cohort")
    screenshot(borrower_page, "kueue-job-preempted")

    # One more guaranteed job of the lender waits: why, where, and until when at the latest.
    waits = submit_from_the_form(lender_page, name="next", gpus=2, model=A100, kind="guaranteed")
    status = lender_page.get_by_test_id("queue-status")
    expect(status.get_by_test_id("queue-why")).to_have_text(
        f"Team {lender.team.slug}'s guaranteed jobs use 2 of its 2 {A100}; this job needs 2 and "
        "0 are free. Guaranteed jobs run only within the team's own quota.",
        timeout=LIVE_TIMEOUT_MS,
    )
    expect(status.get_by_test_id("queue-position-team")).to_have_text("1 of 1")
    expect(status.get_by_test_id("queue-position-cluster")).to_have_text(
        re.compile(r"^1 of 2 waiting$")
    )
    expect(status.get_by_test_id("queue-estimated-start")).to_contain_text("by ")
    expect(status.get_by_test_id("queue-estimated-start")).to_contain_text("maximum run time")
    screenshot(lender_page, "kueue-job-waiting")
    assert waits.priority == "guaranteed"
