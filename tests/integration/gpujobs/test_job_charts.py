"""A job's GPU charts with data: a job submitted through the portal runs on the devcluster with
simulated utilisation on its two GPUs; its page's GPU fragment draws a line per GPU, with points,
at the utilisation the simulator publishes through the devcluster's Prometheus."""

import pytest

from gpujobs.models import GpuJob
from tests.integration.gpujobs.fixtures import api_client_for, submit, wait_for_state
from tests.integration.monitoring.pages import chart_values, figure_on_page
from tests.integration.monitoring.workloads import UTILISATION, eventually

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

CHARTS = ("utilisation", "memory", "power", "temperature")


@pytest.fixture(autouse=True)
def _services(running_services, settings):
    """The worker and the watcher; every chart read asks Prometheus afresh."""
    settings.MONITORING_CACHE_SECONDS = 0


def points(figure: dict) -> dict[str, int]:
    """How many points each line of the figure draws (gaps left out)."""
    return {
        trace.get("name", ""): sum(y is not None for y in trace.get("y", []))
        for trace in figure["data"]
    }


def test_a_running_jobs_page_charts_each_of_its_gpus_with_points(
    make_gpu_team, gpu_cluster, client_as
):
    gpu = make_gpu_team(gpus=2)
    annotations = {UTILISATION: "80,20"}
    response = submit(
        gpu.member, gpu.team, gpu_cluster, name="charted", gpus=2, annotations=annotations
    )
    assert response.status_code == 201, response.data
    job = wait_for_state(response.data["id"], "running")
    page = client_as(gpu.member)

    def both_gpus_drawn():
        fragment = page.get(f"/jobs/{job.pk}/gpus/")
        assert fragment.status_code == 200
        values = chart_values(fragment, "utilisation")
        return len(values) == 2 and None not in values.values() and fragment

    fragment = eventually(both_gpus_drawn, timeout=90, what="two GPU lines on the job's page")

    html = fragment.content.decode()
    assert 'data-testid="metrics-error"' not in html
    assert sorted(chart_values(fragment, "utilisation").values()) == [20, 80]
    job = GpuJob.objects.get(pk=job.pk)
    (pod,) = job.pods
    assert f"/monitoring/teams/{gpu.team.slug}/pods/{pod}/" in html
    for key in CHARTS:
        figure = figure_on_page(fragment, key)
        assert figure is not None, key
        lines = points(figure)
        assert len(lines) == 2, (key, lines)
        assert all(count >= 1 for count in lines.values()), (key, lines)
    api_client_for(gpu.member).post(f"/api/v1/jobs/{job.pk}/cancel/")
