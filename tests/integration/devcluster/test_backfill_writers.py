"""The Go block writer (gomodules/tsdb-backfill) writes the very samples promtool makes of the
backfill's OpenMetrics text: same series, same labels, same values at the same times."""

import subprocess

import pytest

from devcluster.backfill import BackfillSpec, write_blocks

pytestmark = pytest.mark.integration

METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
)


def dumped_samples(promtool: str, blocks) -> list[str]:
    """Every sample of the blocks in ``blocks``, one line each, as promtool prints them."""
    (blocks / "wal").mkdir()  # promtool opens the directory as a database, WAL and all
    dump = subprocess.run(
        [promtool, "tsdb", "dump", str(blocks)], check=True, capture_output=True, text=True
    )
    return sorted(dump.stdout.splitlines())


def test_the_go_writer_writes_the_samples_promtool_makes_of_the_text(promtool, tmp_path):
    # A day and a half: two of the Go writer's day-long blocks, the second a part of a day.
    spec = BackfillSpec(
        days=1.5,
        gpus=12,
        namespaces=("a", "b", "c"),
        gpus_per_pod=2,
        end=1_765_000_000,
        metrics=METRICS,
    )
    for writer in ("promtool", "tsdb"):
        (tmp_path / writer).mkdir()
        write_blocks(spec, tmp_path / writer, tmp_path / writer / "blocks", writer)

    from_text = dumped_samples(promtool, tmp_path / "promtool" / "blocks")
    from_go = dumped_samples(promtool, tmp_path / "tsdb" / "blocks")

    assert len(from_go) == spec.gpus * len(METRICS) * spec.samples_per_series
    assert from_go == from_text
    blocks = [
        path for path in (tmp_path / "tsdb" / "blocks").iterdir() if (path / "meta.json").exists()
    ]
    assert len(blocks) == 2
