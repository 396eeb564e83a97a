"""The portal's PromQL over MIG instances and shared GPUs, evaluated by Prometheus' own engine
(``promtool test rules``) on series laid out as the DCGM exporter publishes them: a whole GPU,
a MIG GPU split into a 3g.40gb and two 1g.10gb instances (engine activity only, no GPU_UTIL),
and a time-sliced GPU of 4 replicas shared by two pods (each series its own share of the GPU).

What it proves: GPU equivalents held (1 + 3/7 + 1/7 + 2 x 1/4), utilisation-weighted hours,
instances seen on a GPU_UTIL cluster, the heatmap's row per instance and shared GPU's total,
and the idle judgement per slice and per share."""

import subprocess

import pytest
import yaml

from monitoring import promql

pytestmark = pytest.mark.integration

NODE, MIG_NODE, SHARED_NODE = "gpu-node-0", "gpu-node-mig-0", "gpu-node-shared-0"
A100 = "NVIDIA A100-SXM4-80GB"


def _labels(node, gpu, namespace=None, pod=None, **extra) -> str:
    labels = {"Hostname": node, "gpu": str(gpu), "modelName": A100, **extra}
    if namespace:
        labels.update(namespace=namespace, pod=pod, container="main")
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def _series(metric: str, labels: str, value: float) -> dict:
    return {"series": f"{metric}{{{labels}}}", "values": f"{value}+0x30"}


INPUT = [
    # team-a: a whole GPU at 80%, and a 3g.40gb instance at 50% (engine activity 0.5).
    _series(promql.GPU_UTIL, _labels(NODE, 0, "team-a", "whole"), 80),
    _series(
        promql.GR_ENGINE_ACTIVE,
        _labels(MIG_NODE, 0, "team-a", "big", GPU_I_PROFILE="3g.40gb", GPU_I_ID="1"),
        0.5,
    ),
    # team-b: two 1g.10gb instances, one busy and one idle (a pod each).
    _series(
        promql.GR_ENGINE_ACTIVE,
        _labels(MIG_NODE, 0, "team-b", "busy", GPU_I_PROFILE="1g.10gb", GPU_I_ID="2"),
        0.7,
    ),
    _series(
        promql.GR_ENGINE_ACTIVE,
        _labels(MIG_NODE, 0, "team-b", "idle", GPU_I_PROFILE="1g.10gb", GPU_I_ID="3"),
        0.02,
    ),
    # team-c: two pods sharing one GPU, 30% and 5% of its time.
    _series(promql.GPU_UTIL, _labels(SHARED_NODE, 0, "team-c", "share-busy"), 30),
    _series(promql.GPU_UTIL, _labels(SHARED_NODE, 0, "team-c", "share-idle"), 5),
    # Nobody uses the shared node's second GPU.
    _series(promql.GPU_UTIL, _labels(SHARED_NODE, 1), 0),
]
CONFIG = promql.MetricsConfig(shared_nodes=promql.MetricsConfig.shared({SHARED_NODE: 4}))
RATIO = promql.MetricsConfig(
    utilisation_metric=promql.GR_ENGINE_ACTIVE,
    shared_nodes=promql.MetricsConfig.shared({SHARED_NODE: 4}),
)


def evaluate(tmp_path, promtool, cases: list[tuple[str, list[dict]]], series=INPUT):
    """Each (expression, expected samples) checked at 20 minutes by promtool, in millionths
    (sums of sevenths differ in the last bit by the order they are added in)."""
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": f"round(({expr}) * 1000000)",
                        "eval_time": "20m",
                        "exp_samples": [
                            {**sample, "value": round(sample["value"] * 1000000)}
                            for sample in expected
                        ],
                    }
                    for expr, expected in cases
                ],
            }
        ],
    }
    path = tmp_path / "tests.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def ns(namespace: str, value: float) -> dict:
    return {"labels": f'{{namespace="{namespace}"}}', "value": value}


@pytest.mark.parametrize("config", [CONFIG, RATIO], ids=["gpu-util", "gr-engine-active"])
def test_gpus_held_count_slices_and_replicas_as_their_share_of_a_gpu(tmp_path, promtool, config):
    ratio = [
        # On the ratio cluster the whole GPUs publish engine activity too.
        _series(promql.GR_ENGINE_ACTIVE, _labels(NODE, 0, "team-a", "whole"), 0.8),
        _series(promql.GR_ENGINE_ACTIVE, _labels(SHARED_NODE, 0, "team-c", "share-busy"), 0.3),
        _series(promql.GR_ENGINE_ACTIVE, _labels(SHARED_NODE, 0, "team-c", "share-idle"), 0.05),
    ]
    series = INPUT if config is CONFIG else [*INPUT, *ratio]
    evaluate(
        tmp_path,
        promtool,
        [
            (
                promql.gpus_held_by_namespace(config),
                [ns("team-a", 1 + 3 / 7), ns("team-b", 2 / 7), ns("team-c", 0.5)],
            ),
            (promql.gpus_held(config, namespace="team-b"), [{"labels": "{}", "value": 2 / 7}]),
        ],
        series=series,
    )


def test_used_hours_weigh_a_slice_by_its_share_and_a_shared_pod_by_its_time(tmp_path, promtool):
    span = {"period_seconds": 600, "resolution": 60, "held": True}
    # Ten samples of a minute each, in hours.
    hours = 10 / 60
    evaluate(
        tmp_path,
        promtool,
        [
            (
                promql.gpu_seconds_held(CONFIG, **span) + " / 3600",
                [ns("team-a", hours * (1 + 3 / 7)), ns("team-b", hours * 2 / 7),
                 ns("team-c", hours * 0.5)],
            ),
            (
                promql.gpu_seconds_used(CONFIG, **span) + " / 3600",
                [ns("team-a", hours * (0.8 + 0.5 * 3 / 7)),
                 ns("team-b", hours * (0.72 / 7)), ns("team-c", hours * 0.35)],
            ),
            (
                promql.gpu_seconds_idle(CONFIG, threshold_percent=10, **span) + " / 3600",
                [ns("team-b", hours / 7), ns("team-c", hours / 4)],
            ),
        ],
    )  # fmt: skip


def test_the_heatmap_has_a_row_per_instance_and_a_shared_gpus_total(tmp_path, promtool):
    def row(node, gpu, value, profile=None, instance=None):
        labels = f'Hostname="{node}",gpu="{gpu}"'
        if profile:
            labels += f',GPU_I_ID="{instance}",GPU_I_PROFILE="{profile}"'
        return {"labels": "{" + labels + "}", "value": value}

    evaluate(
        tmp_path,
        promtool,
        [
            (
                promql.utilisation_heatmap(CONFIG),
                [
                    row(NODE, 0, 80),
                    row(MIG_NODE, 0, 50, "3g.40gb", 1),
                    row(MIG_NODE, 0, 70, "1g.10gb", 2),
                    row(MIG_NODE, 0, 2, "1g.10gb", 3),
                    row(SHARED_NODE, 0, 35),
                    row(SHARED_NODE, 1, 0),
                ],
            )
        ],
    )


def test_a_large_clusters_heatmap_counts_the_same_rows_by_band_full_use_in_the_top_one(
    tmp_path, promtool
):
    # The heatmap's rows above are at 80, 50, 70, 2, 35 and 0; one more GPU runs flat out.
    flat_out = _series(promql.GPU_UTIL, _labels(NODE, 1, "team-a", "whole"), 100)

    def band(low: str, gpus: int) -> dict:
        return {"labels": f'{{band="{low}"}}', "value": gpus}

    evaluate(
        tmp_path,
        promtool,
        [
            (
                promql.utilisation_bands(CONFIG),
                [
                    band("0", 2),
                    band("30", 1),
                    band("50", 1),
                    band("70", 1),
                    band("80", 1),
                    band("90", 1),
                ],
            )
        ],
        series=[*INPUT, flat_out],
    )


def test_a_pod_is_judged_idle_by_its_own_slice_or_share(tmp_path, promtool):
    def pod(namespace, name, value):
        return {"labels": f'{{namespace="{namespace}",pod="{name}"}}', "value": value}

    evaluate(
        tmp_path,
        promtool,
        [
            (
                promql.pod_average_utilisation(CONFIG, window_minutes=5),
                [
                    pod("team-a", "whole", 80),
                    pod("team-a", "big", 50),
                    pod("team-b", "busy", 70),
                    pod("team-b", "idle", 2),
                    pod("team-c", "share-busy", 30),
                    pod("team-c", "share-idle", 5),
                ],
            ),
            (
                promql.idle_rule_expression(CONFIG, threshold_percent=10, window_minutes=5),
                [pod("team-b", "idle", 2), pod("team-c", "share-idle", 5)],
            ),
        ],
    )
