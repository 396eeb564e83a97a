"""Backfill days of DCGM history into the devcluster's Prometheus.

Samples are generated deterministically (see BackfillSpec.utilisation), written as OpenMetrics,
turned into TSDB blocks with `promtool tsdb create-blocks-from openmetrics` and moved into the
Prometheus data directory. A company's history (5,000 GPUs over 30 days: 860 million samples)
would take promtool hours as text; ``writer="tsdb"`` has the devcluster's own Go tool
(gomodules/tsdb-backfill, built on first use) write the same samples into blocks directly, from
the same model: each GPU's labels, each metric's value at every utilisation, and each GPU's
utilisation every hour. Prometheus 2.42 accepts blocks that overlap its head or each other
without any flag (overlapping blocks are on by default since 2.39) but only notices new blocks on
its next periodic reload, up to a minute later, so by default Prometheus is restarted (a few
seconds) to make the history queryable at once.

Series look like the live simulator's (job="dcgm-exporter", the same labels), on synthetic nodes
named <node_prefix>-<n> that do not exist in the cluster.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from devcluster import bootstrap, builder, cluster, dcgm_metrics
from devcluster.components import COMPONENTS_BY_NAME
from devcluster.gpu_models import DEFAULT_GPU_MODEL, model_for
from devcluster.log import progress
from devcluster.settings import Settings, current

IDLE_POD_EVERY = 4  # every 4th backfilled pod (pod index 3, 7, ...) sits idle at 0%
WRITERS = ("promtool", "tsdb")  # what turns the samples into TSDB blocks (backfill's writer)
TSDB_WINDOW_SECONDS = 86400  # the Go writer's blocks: a day each


@dataclass(frozen=True)
class BackfilledGpu:
    """One GPU of the backfill and who held it for the whole window."""

    index: int  # 0..gpus-1 across the backfill
    node: str
    gpu: int  # index on its node
    namespace: str
    pod: str
    pod_index: int  # index of its pod within the namespace


@dataclass(frozen=True)
class BackfillSpec:
    """What to backfill. GPUs are split into contiguous blocks, one per namespace, and each
    namespace's GPUs into pods of gpus_per_pod; every GPU is held for the whole window."""

    days: float = 7.0
    gpus: int = 256
    namespaces: tuple[str, ...] = ("research",)
    step_seconds: int = 60
    end: int = field(default_factory=lambda: int(time.time()))  # unix seconds, window end
    gpus_per_node: int = 8
    gpus_per_pod: int = 8
    gpu_model: str = DEFAULT_GPU_MODEL
    node_prefix: str = "backfill-node"
    metrics: tuple[str, ...] = ("DCGM_FI_DEV_GPU_UTIL",)

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.step_seconds < 1 or self.days <= 0 or not self.namespaces:
            raise ValueError("backfill needs gpus >= 1, step >= 1s, days > 0 and a namespace")
        unknown = set(self.metrics) - set(dcgm_metrics.METRIC_HELP)
        if unknown:
            raise ValueError(
                f"unknown metrics {sorted(unknown)}; choose from {sorted(dcgm_metrics.METRIC_HELP)}"
            )

    @property
    def end_timestamp(self) -> int:
        """The last sample's time: `end` rounded down to a whole step."""
        return self.end // self.step_seconds * self.step_seconds

    @property
    def samples_per_series(self) -> int:
        return int(self.days * 86400 // self.step_seconds)

    @property
    def start_timestamp(self) -> int:
        return self.end_timestamp - (self.samples_per_series - 1) * self.step_seconds

    def timestamps(self) -> range:
        return range(self.start_timestamp, self.end_timestamp + 1, self.step_seconds)

    def gpu_list(self) -> list[BackfilledGpu]:
        gpus = []
        namespace_count = len(self.namespaces)
        for index in range(self.gpus):
            namespace_number = index * namespace_count // self.gpus
            namespace_first_gpu = math.ceil(namespace_number * self.gpus / namespace_count)
            pod_index = (index - namespace_first_gpu) // self.gpus_per_pod
            gpus.append(
                BackfilledGpu(
                    index=index,
                    node=f"{self.node_prefix}-{index // self.gpus_per_node}",
                    gpu=index % self.gpus_per_node,
                    namespace=self.namespaces[namespace_number],
                    pod=f"train-{pod_index}",
                    pod_index=pod_index,
                )
            )
        return gpus

    @staticmethod
    def hourly_utilisation(gpu: BackfilledGpu, hour: int) -> int:
        """Utilisation in % of a GPU through one hour (unix seconds // 3600): idle pods read 0,
        the others cycle through 0..100 with the GPU index and the hour."""
        if gpu.pod_index % IDLE_POD_EVERY == IDLE_POD_EVERY - 1:
            return 0
        return (gpu.index * 37 + hour * 11) % 101

    @classmethod
    def utilisation(cls, gpu: BackfilledGpu, timestamp: int) -> int:
        """Utilisation in % of a GPU at a sample time: that of its hour."""
        return cls.hourly_utilisation(gpu, timestamp // 3600)

    def hours(self) -> range:
        """Every hour (unix seconds // 3600) a sample falls in."""
        return range(self.start_timestamp // 3600, self.end_timestamp // 3600 + 1)

    def gpu_hours(self, namespace: str | None = None) -> float:
        """Allocated GPU-hours in the window (each sample counts for one step)."""
        gpus = [g for g in self.gpu_list() if namespace in (None, g.namespace)]
        return len(gpus) * self.samples_per_series * self.step_seconds / 3600


def series_labels(spec: BackfillSpec) -> list[tuple[BackfilledGpu, dict[str, str]]]:
    """Each GPU of the backfill with the labels of its series, as the live simulator's."""
    model = model_for(spec.gpu_model)
    labelled = []
    for gpu in spec.gpu_list():
        labels = {"job": "dcgm-exporter", "instance": f"{gpu.node}:9400"}
        holder = dcgm_metrics.GpuHolder(gpu.namespace, gpu.pod, "main", 0.0)
        labels.update(dcgm_metrics.gpu_labels(gpu.node, gpu.gpu, model, holder))
        labelled.append((gpu, labels))
    return labelled


def openmetrics_lines(spec: BackfillSpec) -> Iterator[str]:
    """The backfill as OpenMetrics text, one metric family after another."""
    model = model_for(spec.gpu_model)
    labelled = series_labels(spec)
    gpus = [gpu for gpu, _ in labelled]
    label_strings = [dcgm_metrics.format_labels(labels) for _, labels in labelled]
    timestamps = spec.timestamps()
    for metric in spec.metrics:
        yield f"# HELP {metric} {dcgm_metrics.METRIC_HELP[metric]}\n"
        yield f"# TYPE {metric} gauge\n"
        for gpu, labels in zip(gpus, label_strings, strict=True):
            prefix = f"{metric}{labels} "
            for timestamp in timestamps:
                utilisation = spec.utilisation(gpu, timestamp)
                value = dcgm_metrics.readings_for_utilisation(model, utilisation, True)[metric]
                yield f"{prefix}{dcgm_metrics.format_value(value)} {timestamp}\n"
    yield "# EOF\n"


def tsdb_backfill_spec(spec: BackfillSpec, utilisation_file: Path) -> dict:
    """What the Go block writer (gomodules/tsdb-backfill) multiplies out into the backfill's
    samples: its JSON spec. Writes each GPU's utilisation every hour to ``utilisation_file``
    (a byte per GPU and hour, GPU after GPU)."""
    model = model_for(spec.gpu_model)
    labelled = series_labels(spec)
    hours = spec.hours()
    with open(utilisation_file, "wb") as out:
        for gpu, _ in labelled:
            out.write(bytes(spec.hourly_utilisation(gpu, hour) for hour in hours))
    readings = [dcgm_metrics.readings_for_utilisation(model, level, True) for level in range(101)]
    return {
        "start_ms": spec.start_timestamp * 1000,
        "step_ms": spec.step_seconds * 1000,
        "samples": spec.samples_per_series,
        "window_ms": TSDB_WINDOW_SECONDS * 1000,
        "first_hour": hours.start,
        "hours": len(hours),
        "utilisation_file": str(utilisation_file),
        "gpus": [labels for _, labels in labelled],
        "metrics": [
            {"name": metric, "values": [reading[metric] for reading in readings]}
            for metric in spec.metrics
        ],
    }


def _write_with_promtool(spec: BackfillSpec, work: Path, staging: Path) -> None:
    promtool = _promtool()
    source = work / "backfill.om"
    with open(source, "w") as out:
        out.writelines(openmetrics_lines(spec))
    window_hours = max(2, math.ceil(spec.days * 24))
    progress("converting to TSDB blocks with promtool")
    subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--quiet",
            f"--max-block-duration={window_hours}h",
            str(source),
            str(staging),
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def _write_with_tsdb_backfill(spec: BackfillSpec, work: Path, staging: Path) -> None:
    builder.build_tools(names=("tsdb-backfill",))
    spec_file = work / "tsdb-backfill.json"
    spec_file.write_text(json.dumps(tsdb_backfill_spec(spec, work / "utilisation.bin")))
    progress("writing TSDB blocks with tsdb-backfill")
    # The block writer keeps its head's chunks in a temporary directory: beside the blocks.
    subprocess.run(
        [str(builder.binary("tsdb-backfill")), str(spec_file), str(staging)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(work)},
    )


def write_blocks(spec: BackfillSpec, work: Path, staging: Path, writer: str) -> None:
    """Write the backfill's TSDB blocks into ``staging`` with ``writer`` (one of ``WRITERS``),
    its intermediate files in ``work``."""
    if writer not in WRITERS:
        raise ValueError(f"writer must be one of {', '.join(WRITERS)}, not {writer!r}")
    write = _write_with_promtool if writer == "promtool" else _write_with_tsdb_backfill
    write(spec, work, staging)


def _promtool() -> str:
    promtool = shutil.which("promtool")
    if not promtool:
        raise RuntimeError("promtool not found: apt-get install prometheus")
    return promtool


@dataclass(frozen=True)
class BackfillResult:
    spec: BackfillSpec
    blocks: list[Path]
    samples: int


def _prometheus_running(settings: Settings) -> bool:
    return cluster.component_pid(settings, COMPONENTS_BY_NAME["prometheus"]) is not None


def backfill(
    spec: BackfillSpec,
    restart_prometheus: bool = True,
    settings: Settings | None = None,
    *,
    writer: str = "promtool",
) -> BackfillResult:
    """Generate, convert and load the backfill into the running devcluster's Prometheus (that
    of ``settings``, default the cluster DEVCLUSTER_INSTANCE names), its blocks written by
    ``writer``: "promtool" from OpenMetrics text, or "tsdb" by the Go block writer."""
    settings = settings or current()
    if not _prometheus_running(settings):
        raise RuntimeError("Prometheus is not running; start the devcluster first (up)")
    work_root = settings.state_dir / "backfill"
    work_root.mkdir(parents=True, exist_ok=True)
    samples = spec.gpus * spec.samples_per_series * len(spec.metrics)
    with tempfile.TemporaryDirectory(dir=work_root) as work:
        progress(
            f"writing {samples} samples ({spec.gpus} GPUs x {spec.days} days every "
            f"{spec.step_seconds}s) with {writer}"
        )
        staging = Path(work) / "blocks"
        write_blocks(spec, Path(work), staging, writer)
        blocks = _move_blocks(settings, staging, restart_prometheus)
    return BackfillResult(spec=spec, blocks=blocks, samples=samples)


def _move_blocks(settings: Settings, staging: Path, restart_prometheus: bool) -> list[Path]:
    # Under the state lock: another process may be restarting Prometheus or stopping the
    # cluster at this moment.
    with cluster.state_lock(settings):
        if not _prometheus_running(settings):
            raise RuntimeError("Prometheus stopped while the backfill was being prepared")
        blocks = []
        for block in sorted(staging.iterdir()):
            destination = settings.prometheus_data_dir / block.name
            shutil.move(str(block), destination)
            blocks.append(destination)
        progress(f"moved {len(blocks)} block(s) into {settings.prometheus_data_dir}")
        if restart_prometheus:
            cluster.restart_locked(settings, "prometheus")
    return blocks


def backfill_rules(
    *, start: int, end: int, restart_prometheus: bool = False, settings: Settings | None = None
) -> list[Path]:
    """Evaluate the rules file Prometheus loads (``cluster.load_prometheus_rules``) over the
    history from ``start`` to ``end`` (unix seconds) with ``promtool tsdb create-blocks-from
    rules``, and load the blocks: recorded series for the time before the rules were loaded.
    ``end`` should be where Prometheus began evaluating them itself, or both would count."""
    settings = settings or current()
    if not _prometheus_running(settings):
        raise RuntimeError("Prometheus is not running; start the devcluster first (up)")
    promtool = _promtool()
    rules = settings.state_dir / "prometheus" / "rules" / bootstrap.PROMETHEUS_RULES_FILE
    work_root = settings.state_dir / "backfill"
    work_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work_root) as work:
        staging = Path(work) / "blocks"
        progress(f"evaluating {rules.name} from {start} to {end} with promtool")
        subprocess.run(
            [
                promtool,
                "tsdb",
                "create-blocks-from",
                "rules",
                "--quiet",
                f"--url={settings.prometheus_url}",
                f"--start={start}",
                f"--end={end}",
                f"--output-dir={staging}",
                str(rules),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return _move_blocks(settings, staging, restart_prometheus)
