"""`make demo` opens on a portal in use: seeded the way scripts/demo.sh seeds it (seed_demo,
seed_demo_jobs, the week of GPU history, an idle check), with the real worker and watcher on the
devcluster, every chart a newcomer opens first draws data and the usage report has rows.

The demo's teams have fixed slugs, so this test takes the namespaces ``vision`` and ``speech``
on the devcluster for its run (leftovers of an earlier demo there are removed first). The shared
Prometheus is not restarted: the history is loaded at its next block reload (within a minute).
"""

import datetime
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from devcluster import demo_history
from gpujobs.models import GpuJob
from tenants.management.commands.seed_demo import DEMO_PASSWORD
from tests.integration import conftest as integration
from tests.integration.conftest import wait_for
from tests.integration.gpujobs import fixtures
from tests.integration.gpujobs.fixtures import wait_for_job, wait_for_state
from tests.integration.kube import delete_namespace, read_or_none
from tests.integration.monitoring.workloads import delete_series, prometheus_has

# The integration suite's fixtures: PostgreSQL, a Celery worker, the watcher, the devcluster.
postgres_database = integration.postgres_database
celery_worker_process = integration.celery_worker_process
watcher_process = fixtures.watcher_process
running_services = fixtures.running_services
k8s = integration.k8s
core = integration.core

pytestmark = [pytest.mark.e2e, pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

DEMO_NAMESPACES = ("vision", "speech")
TEAM_CHARTS = 5  # utilisation, memory, power, temperature, GPUs held vs granted
JOB_CHARTS = 4  # utilisation, memory, power, temperature
CLUSTER_CHARTS = 5  # GPUs per node and per model, the heatmap, teams by GPUs held and by use

# Per chart on the page: how many numbers its Plotly traces draw (a heatmap's z, a horizontal
# bar's x, otherwise y; gaps are null).
DRAWN_POINTS = """elements => elements.map(element => (element.data || []).reduce(
    (sum, trace) => {
        const values = trace.z || (trace.orientation === "h" ? trace.x : trace.y) || [];
        return sum + values.flat(2).filter(value => typeof value === "number").length;
    }, 0))"""


def _without_demo_namespaces(core) -> None:
    for name in DEMO_NAMESPACES:
        delete_namespace(core, name)
    wait_for(
        lambda: all(read_or_none(core.read_namespace, n) is None for n in DEMO_NAMESPACES),
        timeout=120,
        what="the demo namespaces to go",
    )


@pytest.fixture
def demo(devcluster, core, running_services, settings):
    """The demo's data, seeded as scripts/demo.sh does; its jobs and history removed after."""
    settings.MONITORING_CACHE_SECONDS = 0
    _without_demo_namespaces(core)
    call_command(
        "seed_demo",
        kubeconfig=str(devcluster.kubeconfig),
        prometheus_url=devcluster.prometheus_url,
    )
    call_command("seed_demo_jobs")
    demo_history.load(restart_prometheus=False)
    call_command("check_idle_gpus")
    yield
    _without_demo_namespaces(core)
    delete_series(devcluster, demo_history.history_selector(demo_history.DEMO_PODS))


def sign_in(new_page, username: str) -> Page:
    page = new_page()
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("username")).to_have_text(username)
    return page


def drawn_points(page: Page, charts: int) -> list[int]:
    """Wait until the page's ``charts`` charts are drawn; the numbers each one's traces hold."""
    expect(page.locator(".chart-plot")).to_have_count(charts)
    expect(page.locator(".chart-plot[data-drawn='true']")).to_have_count(charts)
    return page.locator(".chart-plot").evaluate_all(DRAWN_POINTS)


def test_the_demo_opens_on_charts_with_data_jobs_an_idle_notice_and_a_usage_report(
    demo, devcluster, new_page, screenshot
):
    running = wait_for_job(
        GpuJob.objects.get(name="detector-train").pk,
        lambda job: job.state == "running" and job.pods,
        timeout=120,
        what="detector-train to run",
    )
    for name, state in (
        ("resnet50-baseline", "succeeded"),
        ("augment-sweep", "failed"),
        ("asr-finetune-de", "succeeded"),
    ):
        wait_for_state(GpuJob.objects.get(name=name).pk, state, timeout=120)
    # The job page draws what Prometheus scraped of the running job's GPUs so far.
    pod_series = f'DCGM_FI_DEV_GPU_UTIL{{namespace="vision",pod="{running.pods[0]}"}}'
    prometheus_has(devcluster, f"count_over_time({pod_series}[5m]) >= 2", count=2)

    lena = sign_in(new_page, "lena")
    expect(lena.get_by_test_id("notifications-link")).to_contain_text("1")
    lena.get_by_test_id("notifications-link").click()
    expect(lena.get_by_test_id("notification-idle")).to_contain_text("vision/notebook-lena")

    lena.goto("/teams/vision/")
    expect(lena.locator("#cluster-devcluster")).to_contain_text("In sync")
    screenshot(lena, "demo-team")

    lena.goto("/monitoring/teams/vision/")
    team_points = drawn_points(lena, TEAM_CHARTS)
    assert all(points > 0 for points in team_points), team_points
    screenshot(lena, "demo-team-monitoring")

    lena.goto(f"/jobs/{running.pk}/")
    expect(lena.get_by_test_id("job-state")).to_have_text("running")
    job_points = drawn_points(lena, JOB_CHARTS)
    assert all(points > 0 for points in job_points), job_points
    screenshot(lena, "demo-job")

    lena.goto("/jobs/?team=vision")
    for name in ("resnet50-baseline", "augment-sweep", "detector-train"):
        expect(lena.get_by_role("link", name=re.compile(rf"#\d+ {name}$"))).to_be_visible()

    lena.goto("/monitoring/usage/")
    expect(lena.get_by_test_id("usage-vision")).to_be_visible()
    week_ago = (datetime.date.today() - datetime.timedelta(days=7)).isoformat()
    lena.goto(f"/monitoring/usage/?start={week_ago}&bucket=total")
    held = lena.get_by_test_id("usage-vision").locator("td.num").nth(1)
    expect(held).to_have_text(re.compile(r"^[1-9]\d*\.\d$"))  # a week of five GPUs: hundreds
    screenshot(lena, "demo-usage")

    admin = sign_in(new_page, "admin")
    admin.goto("/review/")
    expect(admin.get_by_test_id("review-item")).to_have_count(2)
    admin.goto("/monitoring/clusters/devcluster/")
    cluster_points = drawn_points(admin, CLUSTER_CHARTS)
    assert all(points > 0 for points in cluster_points), cluster_points
    screenshot(admin, "demo-cluster")
    admin.goto("/monitoring/usage/")
    expect(admin.get_by_test_id("usage-speech")).to_be_visible()
