"""The monitoring pages in a real browser: plotly.js from the portal draws every chart the
server built, auto refresh swaps in fresh ones, and nothing is logged to the console."""

import re

import pytest
from playwright.sync_api import expect

from tenants.models import Membership
from tests import factories
from tests.integration import conftest as integration
from tests.integration.monitoring.pages import portal_namespace
from tests.integration.monitoring.workloads import (
    create_team_namespace,
    delete_namespace,
    gpu_pod,
    prometheus_has,
    run_pod,
)

pytestmark = [pytest.mark.e2e, pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

TEAM_CHARTS = 5  # utilisation, memory, power, temperature, GPUs held vs granted


# The integration suite's admin clients of the devcluster.
k8s = integration.k8s
core = integration.core


@pytest.fixture
def namespace(core):
    name = create_team_namespace(core, "e2e-mon")
    yield name
    delete_namespace(core, name)


@pytest.fixture
def metrics_cluster(devcluster, settings):
    settings.MONITORING_CACHE_SECONDS = 0
    settings.MONITORING_REFRESH_SECONDS = 3
    return factories.ClusterFactory(
        name="devcluster",
        prometheus_url=devcluster.prometheus_url,
        kubeconfig_path=str(devcluster.kubeconfig),
    )


def test_team_dashboard_draws_its_charts_and_refreshes_them(
    devcluster, core, namespace, metrics_cluster, sign_in, screenshot, console
):
    team = factories.TeamFactory(slug=namespace, name="Browser Team")
    portal_namespace(team, metrics_cluster)
    lead = factories.UserFactory(username="bruno-lead")
    factories.MembershipFactory(team=team, user=lead, role=Membership.Role.LEAD)
    run_pod(core, namespace, gpu_pod("trainer", gpus=2, utilisation=73))
    prometheus_has(devcluster, f'DCGM_FI_DEV_GPU_UTIL{{namespace="{namespace}"}}', count=2)

    page = sign_in(lead)
    page.goto(f"/teams/{namespace}/")
    page.get_by_test_id("monitoring-link").click()
    expect(page.get_by_role("heading", name="GPU monitoring: Browser Team")).to_be_visible()

    charts = page.locator(".chart-plot")
    expect(charts).to_have_count(TEAM_CHARTS)
    expect(page.locator(".chart-plot[data-drawn='true']")).to_have_count(TEAM_CHARTS)
    expect(page.locator(".chart-plot .main-svg").first).to_be_visible()
    expect(page.get_by_test_id("chart-utilisation").locator(".gtitle")).to_have_text(
        "GPU utilisation per pod"
    )
    expect(page.get_by_test_id("gpus-held")).to_have_text("2")
    expect(page.get_by_test_id("pod-trainer")).to_contain_text("2")
    screenshot(page, "monitoring-team")

    # Auto refresh: htmx asks for the live region again and the new figures are drawn.
    with page.expect_response(
        lambda r: r.request.headers.get("hx-request") == "true" and "/monitoring/teams/" in r.url,
        timeout=30_000,
    ) as refreshed:
        pass
    assert refreshed.value.status == 200
    expect(page.locator(".chart-plot[data-drawn='true']")).to_have_count(TEAM_CHARTS)

    # Choosing another window reloads the page with it.
    page.get_by_label("Window", exact=True).select_option("6h")
    expect(page).to_have_url(re.compile(r"window=6h"))
    expect(page.locator(".chart-plot[data-drawn='true']")).to_have_count(TEAM_CHARTS)
    assert console.unexpected() == []


def test_cluster_page_draws_nodes_heatmap_and_rankings(devcluster, metrics_cluster, sign_in):
    admin = factories.AdminFactory(username="ada-browser-admin")

    page = sign_in(admin)
    page.get_by_test_id("nav-menu-admin").locator("summary").click()
    page.get_by_role("link", name="Clusters").click()
    page.get_by_role("link", name="Devcluster").click()

    expect(page.get_by_test_id("chart-heatmap").locator(".main-svg").first).to_be_visible()
    expect(page.get_by_test_id("chart-nodes").locator(".main-svg").first).to_be_visible()
    drawn = page.locator(".chart-plot[data-drawn='true']")
    expect(drawn).to_have_count(page.locator(".chart-plot").count())
