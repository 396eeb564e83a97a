"""The cluster page's heatmap: a row per GPU on a cluster a person can read row by row, and the
GPUs counted by utilisation band on a larger one. Pure: the part is built from series given
here; ``tests/integration/monitoring/test_cluster_page.py`` asks a real Prometheus."""

import datetime
import json

from monitoring import charts, promql
from monitoring.prometheus import Series

CONFIG = promql.MetricsConfig()
END = datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.UTC)
WINDOW = promql.Window(END - datetime.timedelta(hours=1), END, "1h")


class Prometheus:
    identity = "prometheus-of-the-test"


def test_prometheus_counts_the_gpus_of_each_band_with_full_use_in_the_last():
    query = promql.utilisation_bands(CONFIG)

    assert query.startswith('count_values("band", clamp_max(floor(clamp_min(sum by (Hostname, ')
    assert promql.utilisation_heatmap(CONFIG) in query
    assert query.endswith(", 0) / 10) * 10, 90))")


def test_a_cluster_up_to_the_setting_gets_a_row_per_gpu(settings):
    settings.MONITORING_HEATMAP_GPU_ROWS = 256

    part = charts.heatmap_part(Prometheus(), CONFIG, WINDOW, gpus=256)

    assert promql.utilisation_heatmap(CONFIG) in part.depends_on
    start, _ = WINDOW.aligned(WINDOW.heatmap_step)
    chart = part.build([Series({"Hostname": "gpu-node-0", "gpu": "3"}, [start], [64])])
    assert json.loads(chart.figure_json)["data"][0]["y"] == ["gpu-node-0 · GPU 3"]


def test_a_larger_cluster_gets_its_gpus_counted_in_ten_bands_every_band_a_row(settings):
    settings.MONITORING_HEATMAP_GPU_ROWS = 256
    part = charts.heatmap_part(Prometheus(), CONFIG, WINDOW, gpus=5000)
    start, _ = WINDOW.aligned(WINDOW.heatmap_step)
    step = WINDOW.heatmap_step

    chart = part.build(
        [
            Series({"band": "60"}, [start, start + step], [4900, 4000]),
            Series({"band": "0"}, [start + step], [900]),
            Series({"band": "90"}, [start], [100]),
        ]
    )

    assert promql.utilisation_bands(CONFIG) in part.depends_on
    figure = json.loads(chart.figure_json)
    heatmap = figure["data"][0]
    rows = dict(zip(heatmap["y"], heatmap["z"], strict=True))
    assert list(rows) == [f"{low}–{low + 10}%" for low in range(0, 100, 10)]
    assert rows["60–70%"][:2] == [4900, 4000]
    assert rows["0–10%"][:2] == [None, 900]
    assert rows["90–100%"][:2] == [100, None]
    assert all(cell is None for cell in rows["30–40%"])
    assert heatmap["zmin"] is None
    assert "GPUs" in heatmap["hovertemplate"]
    assert figure["layout"]["title"]["text"] == "GPUs by utilisation band"
