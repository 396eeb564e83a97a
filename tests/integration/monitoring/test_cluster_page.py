"""The admins' cluster page: GPUs allocatable vs allocated from the cluster's nodes, the
utilisation heatmap from Prometheus, and teams ranked by GPUs held and by utilisation."""

import pytest

from tests import factories

from .pages import figure_on_page, portal_namespace
from .workloads import eventually, gpu_pod, run_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


def test_the_cluster_page_shows_nodes_heatmap_and_team_rankings(
    devcluster, core, metrics_cluster, namespace, admin, client_as
):
    team = factories.TeamFactory(slug=namespace, name="Ranked Team")
    portal_namespace(team, metrics_cluster)
    pod = run_pod(core, namespace, gpu_pod("ranked", gpus=3, utilisation=64))
    node = pod.spec.node_name
    page = client_as(admin)

    def held_cells(response) -> list:
        figure = figure_on_page(response, "heatmap")
        if figure is None:  # a Prometheus that has just started has no sample at a step yet
            return []
        heatmap = figure["data"][0]
        rows = dict(zip(heatmap["y"], heatmap["z"], strict=True))
        return [v for r, z in rows.items() if r.startswith(f"{node} · GPU ") for v in z if v == 64]

    def ranked_and_charted():
        response = page.get("/monitoring/clusters/devcluster/?window=1h")
        held = figure_on_page(response, "rank-held")
        return held and team.name in held["data"][0]["y"] and held_cells(response) and response

    # The heatmap's steps are whole 30 s, so a new sample shows at the next step boundary.
    response = eventually(
        ranked_and_charted, timeout=90, what="the team ranked and its GPUs in the heatmap"
    )

    assert response.status_code == 200
    held = figure_on_page(response, "rank-held")["data"][0]
    assert dict(zip(held["y"], held["x"], strict=True))[team.name] == 3

    nodes = figure_on_page(response, "nodes")["data"]
    allocatable = dict(zip(nodes[0]["x"], nodes[0]["y"], strict=True))
    allocated = dict(zip(nodes[1]["x"], nodes[1]["y"], strict=True))
    assert allocatable[node] == 8
    assert allocated[node] >= 3  # others' pods may share the node
    assert all(
        name.startswith("gpu-") or name not in ("cpu-node-0", "cpu-node-1") for name in allocatable
    )
    assert "cpu-node-0" not in allocatable

    models = response.context["dashboard"].models
    assert "NVIDIA-A100-SXM4-80GB" in {m.gpu_model for m in models}

    heatmap = figure_on_page(response, "heatmap")["data"][0]
    rows = dict(zip(heatmap["y"], heatmap["z"], strict=True))
    assert {f"gpu-node-{i} · GPU {g}" for i in range(4) for g in range(8)} <= set(rows)

    assert figure_on_page(response, "rank-utilisation") is not None


def test_a_cluster_of_more_gpus_than_rows_counts_them_by_utilisation_band(
    devcluster, core, metrics_cluster, namespace, admin, client_as, settings
):
    # The devcluster's 32 GPUs (metrics_cluster's capacity) stand for a company's thousands.
    settings.MONITORING_HEATMAP_GPU_ROWS = 16
    team = factories.TeamFactory(slug=namespace, name="Banded Team")
    portal_namespace(team, metrics_cluster)
    run_pod(core, namespace, gpu_pod("banded", gpus=3, utilisation=64))
    page = client_as(admin)

    def banded():
        response = page.get("/monitoring/clusters/devcluster/?window=1h")
        figure = figure_on_page(response, "heatmap")
        if figure is None:
            return None
        heatmap = figure["data"][0]
        rows = dict(zip(heatmap["y"], heatmap["z"], strict=True))
        # The pod's 3 GPUs at 64% (others' pods may be in the band too).
        return rows if max((c or 0) for c in rows.get("60–70%", [])) >= 3 else None

    rows = eventually(banded, timeout=90, what="the pod's GPUs counted in the 60-70% band")

    assert list(rows) == [f"{low}–{low + 10}%" for low in range(0, 100, 10)]
    columns = list(zip(*rows.values(), strict=True))
    counted = [sum(c or 0 for c in column) for column in columns]
    # Every GPU of the devcluster's Prometheus is in one band at each step it reported.
    assert max(counted) >= 32


def test_the_clusters_list_links_each_cluster(metrics_cluster, admin, client_as):
    response = client_as(admin).get("/monitoring/clusters/")
    assert 'href="/monitoring/clusters/devcluster/"' in response.content.decode()


def test_admins_download_the_cluster_wide_rules(metrics_cluster, admin, client_as):
    response = client_as(admin).get("/monitoring/clusters/devcluster/alert-rules/?format=rules")
    assert response.status_code == 200
    assert b'namespace!=""' in response.content
    bad = client_as(admin).get("/monitoring/clusters/devcluster/alert-rules/?format=grafana")
    assert bad.status_code == 400
