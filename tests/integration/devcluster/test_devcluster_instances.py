"""Two devclusters side by side (instance 1 and instance 2): separate control planes, CAs, nodes,
DCGM simulators and Prometheus servers, sharing nothing but the binaries."""

import ssl
import urllib.error
import urllib.request

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from devcluster import cluster
from tests.integration.conftest import wait_for
from tests.integration.kube import create_namespace, delete_namespace, read_or_none

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

L40S = "NVIDIA-L40S"


def gpu_nodes(api) -> dict[str, tuple[str, str]]:
    nodes = client.CoreV1Api(api).list_node(label_selector="hardware-type=gpu").items
    return {
        n.metadata.name: (
            n.metadata.labels["nvidia.com/gpu.product"],
            n.status.allocatable["nvidia.com/gpu"],
        )
        for n in nodes
    }


def test_the_second_instance_runs_apart_on_its_own_ports_and_state(devcluster, devcluster_second):
    first, second = devcluster.settings, devcluster_second.settings

    assert (first.instance, second.instance) == (1, 2)
    assert second.state_dir == first.state_dir.with_name(f"{first.state_dir.name}-2")
    assert not set(first.ports().values()) & set(second.ports().values())
    assert cluster.is_healthy(first)
    assert cluster.is_healthy(second)


def test_the_second_instance_has_its_own_nodes(devcluster, devcluster_second):
    with devcluster_second.api_client() as api:
        second = gpu_nodes(api)
    with devcluster.api_client() as api:
        first = gpu_nodes(api)

    wanted = cluster.NodeOptions.from_env(2)
    assert second == {
        f"gpu-node-{i}": (wanted.gpu_model, str(wanted.gpus_per_node))
        for i in range(wanted.gpu_nodes)
    }
    assert L40S not in {model for model, _ in first.values()}


def test_a_namespace_made_on_one_cluster_is_not_on_the_other(devcluster_second, core):
    second = client.CoreV1Api(devcluster_second.api_client())
    name = create_namespace(second, "dc-second")
    try:
        assert read_or_none(second.read_namespace, name) is not None
        assert read_or_none(core.read_namespace, name) is None
    finally:
        delete_namespace(second, name)


def test_each_cluster_trusts_only_its_own_certificate_authority(devcluster, devcluster_second):
    # Instance 1's admin credentials, sent to instance 2's API server (its own CA trusted):
    # the client certificate is not one instance 2's CA signed.
    first = config.kube_config.KubeConfigLoader(
        config_dict=yaml.safe_load(devcluster.kubeconfig.read_text())
    )
    configuration = client.Configuration()
    first.load_and_set(configuration)
    configuration.host = devcluster_second.settings.apiserver_url
    configuration.ssl_ca_cert = str(devcluster_second.settings.pki_dir / "ca.crt")
    with client.ApiClient(configuration) as api, pytest.raises(ApiException) as refused:
        client.CoreV1Api(api).list_namespace()
    assert refused.value.status == 401

    # Instance 2's API server does not present a certificate instance 1's CA signed.
    context = ssl.create_default_context(cafile=str(devcluster.settings.pki_dir / "ca.crt"))
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(
            f"{devcluster_second.settings.apiserver_url}/readyz", context=context
        )


def test_each_prometheus_scrapes_its_own_clusters_gpus(devcluster, devcluster_second):
    wanted = cluster.NodeOptions.from_env(2)
    second = wait_for(
        lambda: (
            len(result := devcluster_second.prometheus_query("DCGM_FI_DEV_GPU_UTIL"))
            == wanted.gpu_nodes * wanted.gpus_per_node
            and result
        ),
        timeout=45,
        interval=1,
        what="instance 2's GPUs in its Prometheus",
    )

    assert {s["metric"]["modelName"] for s in second} == {"NVIDIA L40S"}
    first = devcluster.prometheus_query('DCGM_FI_DEV_GPU_UTIL{modelName="NVIDIA L40S"}')
    assert first == []
