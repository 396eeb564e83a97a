"""A team's GPUs on its monitoring page and through the API, from the real simulator."""

import pytest
from django.contrib.staticfiles import finders

from clusters.models import GpuUtilizationMetric
from devcluster.gpu_models import DEFAULT_GPU_MODEL as A100
from tenants.models import Membership
from tests import factories

from .pages import chart_values, figure_on_page, member_of, portal_namespace
from .workloads import eventually, gpu_pod, prometheus_has, run_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


@pytest.fixture
def team(db, namespace, metrics_cluster):
    team = factories.TeamFactory(slug=namespace, name="Vision")
    portal_namespace(team, metrics_cluster)
    return team


@pytest.fixture
def lead(team):
    return member_of(team, "lena-lead", Membership.Role.LEAD)


def test_a_running_gpu_pod_appears_on_its_teams_chart_with_its_utilisation(
    devcluster, core, metrics_cluster, team, lead, client_as
):
    # The figures below are an A100's; the devcluster has H100 nodes too.
    run_pod(core, team.slug, gpu_pod("trainer", gpus=2, utilisation=73, gpu_model=A100))
    page = client_as(lead)

    def trainer_at_73():
        response = page.get(f"/monitoring/teams/{team.slug}/?window=1h")
        assert response.status_code == 200
        return chart_values(response, "utilisation").get("trainer") == 73 and response

    response = eventually(trainer_at_73, what="trainer at 73% on the team chart")

    assert 'data-testid="metrics-error"' not in response.content.decode()
    for key in ("memory", "power", "temperature", "held"):
        assert figure_on_page(response, key) is not None, key
    # 80 GiB A100 at 73%: 10% + 80% x 0.73 of the framebuffer in use, on each of 2 GPUs.
    assert chart_values(response, "memory")["trainer"] == pytest.approx(
        2 * round(81920 * (0.10 + 0.80 * 0.73)) / 1024, abs=0.1
    )
    assert chart_values(response, "temperature")["trainer"] == 30 + round(50 * 0.73)
    assert chart_values(response, "held")["GPUs held"] == 2
    dashboard = response.context["dashboard"]
    assert dashboard.gpus_held == 2
    (pod,) = dashboard.pods
    assert (pod.pod, pod.gpus, pod.gpus_described) == ("trainer", 2, "2 GPUs")


def test_the_engine_active_ratio_is_charted_as_percent(
    devcluster, core, metrics_cluster, team, lead, client_as
):
    metrics_cluster.gpu_utilization_metric = GpuUtilizationMetric.GR_ENGINE_ACTIVE
    metrics_cluster.save()
    run_pod(core, team.slug, gpu_pod("ratio", gpus=1, utilisation=40))

    eventually(
        lambda: (
            chart_values(client_as(lead).get(f"/monitoring/teams/{team.slug}/"), "utilisation").get(
                "ratio"
            )
            == 40
        ),
        what="0.4 engine-active shown as 40%",
    )


def test_the_pod_page_draws_a_line_per_gpu_the_pod_holds(
    devcluster, core, metrics_cluster, team, lead, client_as
):
    pod = run_pod(core, team.slug, gpu_pod("twin", gpus=2, utilisation="90,10"))
    node = pod.spec.node_name

    def both_gpus():
        response = client_as(lead).get(f"/monitoring/teams/{team.slug}/pods/twin/?window=6h")
        values = chart_values(response, "utilisation")
        return len(values) == 2 and values

    values = eventually(both_gpus, what="two GPU lines on the pod page")
    assert sorted(values.values()) == [10, 90]
    assert all(name.startswith(f"{node} · GPU ") for name in values)


def test_the_api_gives_the_series_and_the_pods_holding_gpus(
    devcluster, core, metrics_cluster, team, lead, api
):
    run_pod(core, team.slug, gpu_pod("api-pod", gpus=1, utilisation=55))
    prometheus_has(devcluster, f'DCGM_FI_DEV_GPU_UTIL{{namespace="{team.slug}"}}')
    api.as_user(lead)

    def series_at_55():
        body = api.get(f"/api/v1/monitoring/teams/{team.slug}/utilisation/?window=6h").json()
        points = [p for s in body["series"] for p in s["points"] if p[1] is not None]
        return points and points[-1][1] == 55 and body

    body = eventually(series_at_55, what="the API series at 55%")
    assert body["team"] == team.slug
    assert body["cluster"] == "devcluster"
    assert body["window"]["label"] == "6h"
    assert body["step_seconds"] == 30
    assert len(body["series"][0]["points"]) <= 1000
    assert body["pods"] == [
        {"namespace": team.slug, "pod": "api-pod", "gpus": 1, "gpu_equivalents": 1.0,
         "gpus_described": "1 GPU", "average_utilisation": None, "idle": False}
    ]  # fmt: skip

    pods = api.get(f"/api/v1/monitoring/teams/{team.slug}/pods/").json()
    assert pods["idle_threshold_percent"] == 10
    assert [p["pod"] for p in pods["pods"]] == ["api-pod"]


def test_a_bad_window_is_a_400_from_the_api_and_the_last_hour_on_the_page(
    devcluster, metrics_cluster, team, lead, api, client_as
):
    response = api.as_user(lead).get(
        f"/api/v1/monitoring/teams/{team.slug}/utilisation/?window=custom"
    )
    assert response.status_code == 400
    assert "start" in response.json()

    page = client_as(lead).get(f"/monitoring/teams/{team.slug}/?window=custom")
    assert page.status_code == 200
    assert page.context["window"].label == "1h"
    assert "A custom window needs a start." in page.content.decode()


def test_auto_refresh_asks_for_the_live_region_only(
    devcluster, metrics_cluster, team, lead, client_as
):
    page = client_as(lead)
    full = page.get(f"/monitoring/teams/{team.slug}/?window=24h")
    assert 'hx-trigger="every 30s' in full.content.decode()

    live = page.get(f"/monitoring/teams/{team.slug}/?window=24h", HTTP_HX_REQUEST="true")
    body = live.content.decode()
    assert live.status_code == 200
    assert body.lstrip().startswith('<div id="live"')
    assert "<html" not in body
    assert "HX-Request" in live["Vary"]


def test_the_team_page_links_to_its_monitoring(metrics_cluster, team, lead, client_as):
    response = client_as(lead).get(f"/teams/{team.slug}/")
    assert f'href="/monitoring/teams/{team.slug}/"' in response.content.decode()


def test_pages_load_plotly_js_from_the_portals_own_static_files(
    metrics_cluster, team, lead, client_as
):
    response = client_as(lead).get(f"/monitoring/teams/{team.slug}/")
    assert '<script src="/static/plotly/plotly.min.js" defer></script>' in response.content.decode()
    found = finders.find("plotly/plotly.min.js")
    assert found is not None
    with open(found, "rb") as script:
        assert b"plotly.js" in script.read(200)
