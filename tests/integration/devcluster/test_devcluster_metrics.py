"""Prometheus scrapes the DCGM simulator, which attributes each GPU to the pod holding it."""

import pytest

from devcluster.backfill import BackfillSpec
from devcluster.gpu_models import DEFAULT_GPU_MODEL, DEFAULT_SECOND_GPU_MODEL
from tests.integration.conftest import wait_for
from tests.integration.kube import gpu_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

UTILISATION = "devcluster.gpuportal.io/gpu-util"


def run_pod(core, namespace, manifest):
    core.create_namespaced_pod(namespace, manifest)
    name = manifest["metadata"]["name"]
    wait_for(
        lambda: core.read_namespaced_pod(name, namespace).status.phase == "Running",
        what=f"pod {name} to run",
    )


def series_for(devcluster, promql, count):
    return wait_for(
        lambda: len(result := devcluster.prometheus_query(promql)) == count and result,
        timeout=45,
        interval=1,
        what=f"{count} series for {promql}",
    )


def test_prometheus_returns_gpu_util_series_for_a_running_gpu_pod_with_its_namespace_and_pod(
    devcluster, core, namespace
):
    run_pod(core, namespace, gpu_pod("trainer", gpus=2, gpu_model=DEFAULT_GPU_MODEL))

    series = series_for(devcluster, f'DCGM_FI_DEV_GPU_UTIL{{namespace="{namespace}"}}', 2)

    node = core.read_namespaced_pod("trainer", namespace).spec.node_name
    for sample in series:
        labels = sample["metric"]
        assert labels["pod"] == "trainer"
        assert labels["container"] == "main"
        assert labels["Hostname"] == node
        assert labels["modelName"] == "NVIDIA A100-SXM4-80GB"
        assert labels["UUID"].startswith("GPU-")
    assert sorted(s["metric"]["gpu"] for s in series) == sorted(
        {s["metric"]["gpu"] for s in series}
    )


def test_the_annotated_utilisation_is_what_prometheus_returns(devcluster, core, namespace):
    run_pod(core, namespace, gpu_pod("busy", gpus=1, annotations={UTILISATION: "73"}))
    run_pod(core, namespace, gpu_pod("idle", gpus=1, annotations={UTILISATION: "0"}))

    series = series_for(devcluster, f'DCGM_FI_DEV_GPU_UTIL{{namespace="{namespace}"}}', 2)

    values = {s["metric"]["pod"]: float(s["value"][1]) for s in series}
    assert values == {"busy": 73.0, "idle": 0.0}
    (engine,) = devcluster.prometheus_query(
        f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{namespace="{namespace}",pod="busy"}}'
    )
    assert float(engine["value"][1]) == pytest.approx(0.73)


def test_backfilled_history_is_queryable_with_the_expected_gpu_hours(devcluster, namespace):
    spec = BackfillSpec(days=1, gpus=4, gpus_per_pod=1, namespaces=(namespace,))

    devcluster.backfill(spec)

    selector = f'DCGM_FI_DEV_GPU_UTIL{{namespace="{namespace}"}}'
    at = spec.end_timestamp
    (samples,) = devcluster.prometheus_query(f"sum(count_over_time({selector}[1d]))", at=at)
    gpu_hours = float(samples["value"][1]) * spec.step_seconds / 3600
    assert gpu_hours == spec.gpu_hours(namespace) == 96

    (total,) = devcluster.prometheus_query(f"sum(sum_over_time({selector}[1d]))", at=at)
    expected = sum(
        spec.utilisation(gpu, timestamp)
        for gpu in spec.gpu_list()
        for timestamp in spec.timestamps()
    )
    assert float(total["value"][1]) == expected

    (idle_pod,) = devcluster.prometheus_query(
        f'max_over_time({selector[:-1]},pod="train-3"}}[1d])', at=at
    )
    assert float(idle_pod["value"][1]) == 0  # every fourth backfilled pod is an idle job


def test_a_pod_on_an_h100_node_is_published_with_the_h100s_name_and_memory(
    devcluster, core, namespace
):
    run_pod(core, namespace, gpu_pod("hopper", gpus=1, gpu_model=DEFAULT_SECOND_GPU_MODEL))

    (used,) = series_for(devcluster, f'DCGM_FI_DEV_FB_USED{{namespace="{namespace}"}}', 1)
    (free,) = series_for(devcluster, f'DCGM_FI_DEV_FB_FREE{{namespace="{namespace}"}}', 1)

    assert used["metric"]["modelName"] == "NVIDIA H100 80GB HBM3"
    assert used["metric"]["Hostname"].startswith("gpu-node-h100-")
    assert float(used["value"][1]) + float(free["value"][1]) == 81559


def test_a_gpu_stays_its_pods_while_other_pods_on_the_node_come_and_go(devcluster, core, namespace):
    """As the kubelet's device assignment: when an earlier pod on the node ends, a later pod
    keeps its GPUs, and a new pod takes the ones freed (the simulator used to pack the pods
    again at each scrape, so a chart showed a pod on GPUs it never had)."""

    def on_node(name, node=None):
        manifest = gpu_pod(name, gpus=2, gpu_model=DEFAULT_GPU_MODEL)
        if node:
            manifest["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        return manifest

    def gpus_of(pod):
        series = series_for(
            devcluster, f'DCGM_FI_DEV_GPU_UTIL{{namespace="{namespace}",pod="{pod}"}}', 2
        )
        return sorted(s["metric"]["gpu"] for s in series)

    run_pod(core, namespace, on_node("first"))
    node = core.read_namespaced_pod("first", namespace).spec.node_name
    run_pod(core, namespace, on_node("second", node))
    first, second = gpus_of("first"), gpus_of("second")

    core.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
    wait_for(
        lambda: (
            not devcluster.prometheus_query(
                f'DCGM_FI_DEV_GPU_UTIL{{namespace="{namespace}",pod="first"}}'
            )
        ),
        timeout=45,
        interval=1,
        what="the ended pod's series to go",
    )
    run_pod(core, namespace, on_node("third", node))

    assert gpus_of("third") == first
    assert gpus_of("second") == second
