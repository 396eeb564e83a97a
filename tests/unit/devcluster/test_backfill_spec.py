"""The deterministic backfill: who holds which GPU, when samples fall, what they read."""

import pytest

from devcluster import builder
from devcluster.backfill import BackfillSpec, openmetrics_lines, tsdb_backfill_spec, write_blocks


def test_gpus_are_split_into_contiguous_blocks_one_per_namespace():
    spec = BackfillSpec(gpus=6, namespaces=("a", "b", "c"), end=7200, days=0.5)

    assert [gpu.namespace for gpu in spec.gpu_list()] == ["a", "a", "b", "b", "c", "c"]
    assert [gpu.pod for gpu in spec.gpu_list()] == ["train-0"] * 6


def test_each_namespace_fills_pods_of_gpus_per_pod_and_nodes_of_gpus_per_node():
    spec = BackfillSpec(gpus=20, namespaces=("a",), gpus_per_pod=4, end=7200, days=0.5)
    gpus = spec.gpu_list()

    assert gpus[3].pod == "train-0"
    assert gpus[4].pod == "train-1"
    assert gpus[8].node == "backfill-node-1"
    assert gpus[8].gpu == 0


def test_samples_end_on_a_whole_step_and_cover_the_window():
    spec = BackfillSpec(gpus=1, days=1, step_seconds=60, end=86_400 * 10 + 59)

    assert spec.end_timestamp == 86_400 * 10
    assert len(spec.timestamps()) == 1440
    assert spec.timestamps()[0] == spec.end_timestamp - 1439 * 60


def test_gpu_hours_are_gpus_times_the_window():
    spec = BackfillSpec(gpus=16, namespaces=("a", "b"), days=7, end=10**9)

    assert spec.gpu_hours() == 16 * 7 * 24
    assert spec.gpu_hours("a") == 8 * 7 * 24


def test_every_fourth_pod_is_idle_and_the_others_follow_the_formula():
    spec = BackfillSpec(gpus=32, gpus_per_pod=2, end=10**9)
    gpus = spec.gpu_list()

    assert spec.utilisation(gpus[6], 3600 * 5) == 0  # pod 3
    assert spec.utilisation(gpus[1], 3600 * 5) == (1 * 37 + 5 * 11) % 101


def test_unknown_metrics_are_rejected():
    with pytest.raises(ValueError, match="unknown metrics"):
        BackfillSpec(metrics=("NOT_A_METRIC",))


def test_the_openmetrics_output_has_one_family_with_timestamped_samples_and_an_eof():
    spec = BackfillSpec(gpus=2, days=1 / 24, step_seconds=600, end=36_000, namespaces=("ns",))

    lines = list(openmetrics_lines(spec))

    assert lines[0].startswith("# HELP DCGM_FI_DEV_GPU_UTIL ")
    assert lines[1] == "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    assert lines[-1] == "# EOF\n"
    samples = lines[2:-1]
    assert len(samples) == 2 * 6
    assert samples[0].startswith('DCGM_FI_DEV_GPU_UTIL{job="dcgm-exporter",')
    assert 'namespace="ns",pod="train-0"}' in samples[0]
    assert samples[-1].endswith(" 36000\n")


def test_the_go_writers_spec_holds_each_gpus_hourly_utilisation_and_each_metrics_values(tmp_path):
    spec = BackfillSpec(
        gpus=8, gpus_per_pod=2, days=0.25, end=36_000 + 1800, metrics=("DCGM_FI_DEV_GPU_TEMP",)
    )
    described = tsdb_backfill_spec(spec, tmp_path / "utilisation.bin")
    utilisation = (tmp_path / "utilisation.bin").read_bytes()

    # 04:31 to 10:30: seven hours, 4 to 10.
    assert (described["first_hour"], described["hours"]) == (4, 7)
    assert described["start_ms"] == spec.start_timestamp * 1000
    assert len(utilisation) == 8 * 7
    gpus = spec.gpu_list()
    for gpu in gpus:
        for column, hour in enumerate(spec.hours()):
            level = utilisation[gpu.index * 7 + column]
            assert level == spec.utilisation(gpu, hour * 3600)
    assert utilisation[6 * 7 : 8 * 7] == bytes(14)  # the fourth pod idles
    (temperature,) = described["metrics"]
    assert len(temperature["values"]) == 101
    assert temperature["values"][0] < temperature["values"][100]
    assert described["gpus"][1]["gpu"] == "1"
    assert described["gpus"][1]["namespace"] == "research"


def test_the_go_writer_is_built_only_on_first_use():
    assert "tsdb-backfill" not in {tool.name for tool in builder.TOOL_BUILDS}
    assert "tsdb-backfill" not in builder.ALL_BINARIES
    assert "tsdb-backfill" in {tool.name for tool in builder.ON_DEMAND_BUILDS}
    with pytest.raises(ValueError, match="no Go tool named nope"):
        builder.build_tools(names=("nope",))


def test_an_unknown_writer_is_refused_by_name(tmp_path):
    spec = BackfillSpec(days=0.1, gpus=1, end=1_765_000_000)

    with pytest.raises(ValueError, match="writer must be one of promtool, tsdb, not 'text'"):
        write_blocks(spec, tmp_path, tmp_path / "blocks", "text")
