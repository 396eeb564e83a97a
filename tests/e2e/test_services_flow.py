"""An inference service in a real browser, against the devcluster with a real Celery worker and
the watcher: a member deploys a model server with a sidecar from the form, follows its replica
to ready, starts a canary at 10%, sees the two revisions' GPU charts drawn side by side,
promotes the canary, and rolls back to the first revision, which takes over once ready."""

import re

import pytest
from playwright.sync_api import expect

from serving.models import InferenceService
from tests.integration import conftest as integration
from tests.integration.gpujobs import fixtures
from tests.integration.serving import cluster as service_fixtures

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
gateway_api = service_fixtures.gateway_api

pytestmark = [pytest.mark.e2e, pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

LIVE_TIMEOUT_MS = 90_000


@pytest.fixture(autouse=True)
def _services(running_services, gateway_api):
    """The worker applies the service's objects and the watcher brings their state back."""


def charts_drawn(page, number: int):
    return page.get_by_test_id(f"gpus-r{number}").locator(".chart-plot[data-drawn='true']")


def test_member_deploys_canaries_promotes_and_rolls_back(
    sign_in, screenshot, make_gpu_team, gpu_cluster
):
    gpu = make_gpu_team(gpus=3)
    page = sign_in(gpu.member)

    page.goto("/services/")
    page.get_by_role("link", name="Deploy a service").click()
    expect(page.get_by_role("heading", name="Deploy an inference service")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("llm")
    page.get_by_label("Image", exact=True).fill("registry.example.com/vision/llm-server:2.1")
    page.get_by_label("Port", exact=True).fill("8000")
    page.get_by_label("Probe path (optional)", exact=True).fill("/healthz")
    page.get_by_label("Replicas", exact=True).fill("1")
    page.get_by_label("GPUs per replica", exact=True).fill("1")
    page.get_by_label("Sidecar image (optional)", exact=True).fill(
        "registry.example.com/vision/tok:1.0"
    )
    page.get_by_label("Sidecar environment (optional)", exact=True).fill("MODE=tokenize")
    page.get_by_role("button", name="Deploy").click()

    expect(page).to_have_url(re.compile(r"/services/\d+/$"))
    service = InferenceService.objects.get()
    expect(page.get_by_role("status")).to_contain_text("Deployed service llm.")
    expect(page.get_by_test_id("ready-r1")).to_have_text("1/1", timeout=LIVE_TIMEOUT_MS)
    expect(page.get_by_test_id("service-routing")).to_contain_text("HTTPRoute")
    screenshot(page, "service-ready")

    # A canary at 10%: a new image, the rest kept.
    form = page.get_by_test_id("revision-form")
    form.get_by_label("Image", exact=True).fill("registry.example.com/vision/llm-server:2.2")
    form.get_by_label("How").select_option("canary")
    form.get_by_label("Weight of the new revision (%)").fill("10")
    form.get_by_role("button", name="Make the revision").click()

    expect(page.get_by_role("status")).to_contain_text("Started a canary at 10%.")
    expect(page.get_by_test_id("weight-r1")).to_have_text("90%")
    expect(page.get_by_test_id("weight-r2")).to_have_text("10%")
    expect(page.get_by_test_id("ready-r2")).to_have_text("1/1", timeout=LIVE_TIMEOUT_MS)
    expect(page.get_by_test_id("service-progress")).to_contain_text("Canary r2 takes 10%")

    # Both revisions' GPU charts, side by side, once Prometheus has scraped their GPUs.
    def both_drawn():
        page.reload()
        try:
            expect(charts_drawn(page, 1)).to_have_count(3, timeout=10_000)
            expect(charts_drawn(page, 2)).to_have_count(3, timeout=10_000)
        except AssertionError:
            return False
        return True

    integration.wait_for(both_drawn, timeout=120, interval=1, what="both revisions' charts")
    for key in ("utilisation", "memory", "power"):
        expect(page.get_by_test_id(f"chart-r2-{key}")).to_be_visible()
    screenshot(page, "service-canary")

    page.get_by_test_id("promote").click()

    expect(page.get_by_role("status")).to_contain_text("Promoted")
    expect(page.get_by_test_id("role-r2")).to_have_text("Stable")
    expect(page.get_by_test_id("revision-r1")).to_have_count(0)

    page.get_by_label("To revision").select_option("1")
    page.get_by_test_id("rollback").click()

    expect(page.get_by_role("status")).to_contain_text("Rolled back.")
    # r1 rolls out again and takes over once its replica is ready: the page follows.
    expect(page.get_by_test_id("revision-r2")).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    expect(page.get_by_test_id("role-r1")).to_have_text("Stable")
    expect(page.get_by_test_id("ready-r1")).to_have_text("1/1", timeout=LIVE_TIMEOUT_MS)
    service.refresh_from_db()
    assert service.rollout == "none"
