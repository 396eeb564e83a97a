"""The ``exported_*`` label layout against a real scrape: a Prometheus that scrapes the DCGM
exporter as a pod target (without ``honor_labels``) renames the exporter's ``namespace``, ``pod``
and ``container`` to ``exported_*``; a cluster set to that layout still finds the team's pods,
and one left on the default layout finds nothing of them."""

import pytest

from clusters.models import MetricsLabelLayout
from tenants.models import Membership
from tests import factories

from .pages import chart_values, member_of, portal_namespace
from .workloads import OwnPrometheus, eventually, gpu_pod, run_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


@pytest.fixture
def relabelling_prometheus(devcluster, tmp_path):
    """Scrapes the simulator as kube-prometheus scrapes the dcgm-exporter pod: the target's
    own namespace/pod/container labels win, the exporter's become exported_*."""
    prometheus = OwnPrometheus(
        tmp_path,
        scrape_configs=(
            "  - job_name: dcgm-exporter\n"
            "    static_configs:\n"
            f"      - targets: ['127.0.0.1:{devcluster.settings.dcgm_port}']\n"
            "        labels: {namespace: gpu-operator, pod: nvidia-dcgm-exporter-x7k2p, "
            "container: nvidia-dcgm-exporter}\n"
        ),
    )
    prometheus.start()
    yield prometheus
    prometheus.stop()


def test_the_exported_layout_finds_the_teams_pods_where_the_default_finds_none(
    db, core, namespace, relabelling_prometheus, client_as
):
    team = factories.TeamFactory(slug=namespace, name="Exported")
    lead = member_of(team, "ella-lead", Membership.Role.LEAD)
    cluster = factories.ClusterFactory(
        name="relabelled",
        prometheus_url=relabelling_prometheus.url,
        metrics_label_layout=MetricsLabelLayout.EXPORTED,
    )
    portal_namespace(team, cluster)
    run_pod(core, namespace, gpu_pod("relabelled", gpus=1, utilisation=37))
    page = client_as(lead)

    def charted_at_37():
        response = page.get(f"/monitoring/teams/{team.slug}/?window=1h")
        return chart_values(response, "utilisation").get("relabelled") == 37 and response

    response = eventually(charted_at_37, what="the pod at 37% through exported_* labels")
    assert [p.pod for p in response.context["dashboard"].pods] == ["relabelled"]

    cluster.metrics_label_layout = MetricsLabelLayout.NAMESPACE
    cluster.save()
    default = page.get(f"/monitoring/teams/{team.slug}/?window=1h")
    assert chart_values(default, "utilisation") == {}
    assert default.context["dashboard"].pods == []
