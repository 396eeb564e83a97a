"""Figure builders: plotly-validated dicts with the series the pages draw."""

import datetime
import json
import math

import plotly.graph_objects as go
import pytest

from monitoring import figures
from monitoring.figures import Axis
from monitoring.prometheus import Series


def series(pod, values, start=1_700_000_000, step=60, **labels):
    return Series(
        labels={"pod": pod, **labels},
        timestamps=[start + i * step for i in range(len(values))],
        values=list(values),
    )


def test_time_series_draws_a_named_line_per_series_in_natural_order():
    figure = figures.time_series(
        [series("train-10", [1, 2]), series("train-2", [3, 4])],
        title="Utilisation",
        axis=Axis("Utilisation", "%", (0, 100)),
        name=lambda labels: labels["pod"],
    )
    assert [t["name"] for t in figure["data"]] == ["train-2", "train-10"]
    assert figure["data"][0]["x"] == [1_700_000_000_000, 1_700_000_060_000]
    assert figure["layout"]["xaxis"]["type"] == "date"
    assert figure["layout"]["yaxis"]["range"] == [0, 100]
    go.Figure(figure)  # still a valid figure for plotly


def test_time_series_turns_values_prometheus_could_not_compute_into_gaps():
    figure = figures.time_series(
        [series("p", [math.nan, 1.25, math.inf])], title="t", axis=Axis("x"), name=str
    )
    assert figure["data"][0]["y"] == [None, 1.2, None]


def test_time_series_scales_values():
    figure = figures.time_series(
        [series("p", [2048])], title="t", axis=Axis("Memory", "GiB"), name=str, scale=1 / 1024
    )
    assert figure["data"][0]["y"] == [2.0]


def test_last_values_reads_the_right_edge_of_each_line():
    figure = figures.time_series(
        [series("busy", [10, 73, math.nan]), series("idle", [0, 0])],
        title="t",
        axis=Axis("x"),
        name=lambda labels: labels["pod"],
    )
    assert figures.last_values(figure) == {"busy": 73.0, "idle": 0.0}


def test_held_vs_granted_draws_the_grant_as_a_line_above_the_held_gpus():
    figure = figures.held_vs_granted([series("", [1, 2, 2])], granted=4, title="Held")
    assert figure["data"][0]["y"] == [1, 2, 2]
    assert figure["layout"]["shapes"][0]["y0"] == 4
    assert figure["layout"]["yaxis"]["range"][1] > 4


def test_held_vs_granted_with_no_series_still_shows_the_grant():
    figure = figures.held_vs_granted([], granted=2, title="Held")
    assert figure["data"][0]["y"] == []
    assert figure["layout"]["annotations"][0]["text"] == "granted: 2"


def test_heatmap_has_a_row_per_gpu_and_a_column_per_step_with_gaps_for_missing_samples():
    a = Series({"Hostname": "n1", "gpu": "0"}, [0, 60, 120], [1, 2, 3])
    b = Series({"Hostname": "n1", "gpu": "1"}, [60], [50])
    figure = figures.heatmap(
        [b, a],
        title="Heat",
        row=lambda labels: f"{labels['Hostname']}/{labels['gpu']}",
        start=0,
        end=120,
        step=60,
        axis=Axis("Utilisation", "%", (0, 100)),
    )
    trace = figure["data"][0]
    assert trace["y"] == ["n1/0", "n1/1"]
    assert trace["x"] == [0, 60_000, 120_000]
    assert trace["z"] == [[1, 2, 3], [None, 50, None]]
    assert trace["zmax"] == 100


def test_allocation_bars_put_allocatable_beside_allocated():
    figure = figures.allocation_bars(["n1", "n2"], allocatable=[8, 8], allocated=[3, 0], title="t")
    assert [t["name"] for t in figure["data"]] == ["allocatable", "allocated"]
    assert figure["data"][1]["y"] == [3, 0]
    assert figure["layout"]["barmode"] == "group"


def test_ranking_lists_the_largest_first():
    figure = figures.ranking([("a", 1), ("b", 3), ("c", 2)], title="t", axis=Axis("GPUs"))
    assert figure["data"][0]["y"] == ["b", "c", "a"]


def test_figures_carry_no_plotly_template_weight():
    figure = figures.ranking([("a", 1)], title="t", axis=Axis("GPUs"))
    assert figure["layout"]["template"] in ({}, {"data": {"scatter": [{"type": "scatter"}]}})


def test_an_attribute_plotly_does_not_know_fails_at_build_time():
    with pytest.raises(ValueError, match="colour"):
        figures._figure([{"type": "bar", "colour": "red"}], {})


def test_time_series_spans_the_whole_window_and_marks_lone_points():
    figure = figures.time_series(
        [series("new", [42])], title="t", axis=Axis("x"), name=str, x_range=(100, 3700)
    )
    assert figure["layout"]["xaxis"]["range"] == [100_000, 3_700_000]
    assert figure["data"][0]["mode"] == "lines+markers"
    many = figures.time_series([series("old", [1, 2, 3])], title="t", axis=Axis("x"), name=str)
    assert many["data"][0]["mode"] == "lines"
    assert "range" not in many["layout"]["xaxis"]


def test_every_point_reaches_the_figure_although_plotly_checks_only_the_first():
    values = [float(i % 100) for i in range(1000)]
    figure = figures.time_series([series("p", values)], title="t", axis=Axis("x"), name=str)
    assert figure["data"][0]["y"] == values
    assert len(figure["data"][0]["x"]) == 1000


def test_a_malformed_array_still_fails_at_build_time():
    with pytest.raises(ValueError, match="z"):
        figures._figure([{"type": "heatmap", "z": "not an array"}], {})


# --- what pages send ---------------------------------------------------------------------------


def sent(figure):
    import json

    return json.loads(figures.to_json(figure))


def test_evenly_spaced_points_go_out_as_a_start_and_a_step():
    figure = figures.time_series(
        [series("p", [1, 2.5, 3], start=1_700_000_000, step=60)],
        title="t",
        axis=Axis("x"),
        name=str,
    )
    (trace,) = sent(figure)["data"]
    assert "x" not in trace
    assert (trace["x0"], trace["dx"]) == (1_700_000_000_000, 60_000)
    assert trace["y"] == [1, 2.5, 3]


def test_missing_steps_become_gaps_in_the_line_rather_than_a_straight_line_across():
    gappy = Series({"pod": "p"}, [0, 60, 240], [1, 2, 5])
    (trace,) = sent(figures.time_series([gappy], title="t", axis=Axis("x"), name=str))["data"]
    assert (trace["x0"], trace["dx"]) == (0, 60_000)
    assert trace["y"] == [1, 2, None, None, 5]


def test_a_heatmaps_columns_go_out_as_a_start_and_a_step_and_its_rows_as_they_are():
    a = Series({"Hostname": "n1", "gpu": "0"}, [0, 60, 120], [1.4, 2.6, 3])
    heat = figures.heatmap(
        [a], title="h", row=lambda _: "n1/0", start=0, end=120, step=60, axis=Axis("%")
    )
    (trace,) = sent(heat)["data"]
    assert (trace["x0"], trace["dx"]) == (0, 60_000)
    assert trace["z"] == [[1, 3, 3]]  # a colour cannot show tenths
    assert trace["y"] == ["n1/0"]


def test_bars_keep_their_values_and_categories():
    ranked = sent(figures.ranking([("a", 3), ("b", 2), ("c", 1)], title="t", axis=Axis("GPUs")))
    assert ranked["data"][0]["x"] == [3, 2, 1]
    bars = sent(
        figures.allocation_bars(["n1", "n2"], allocatable=[8, 8], allocated=[1, 2], title="t")
    )
    assert bars["data"][0]["x"] == ["n1", "n2"]


def test_sent_figures_are_compact_whole_numbers_without_a_decimal_point_and_cannot_close_a_script():
    figure = figures.time_series(
        [series("</script><script>alert(1)</script>&", [40.0, 41.5])],
        title="t",
        axis=Axis("x"),
        name=lambda labels: labels["pod"],
    )
    text = figures.to_json(figure)
    assert "</script>" not in text
    assert "<" not in text
    assert "&" not in text
    assert '"type":"scatter"' in text  # no spaces between items
    assert '"y":[40,41.5]' in text
    assert sent(figure)["data"][0]["name"] == "</script><script>alert(1)</script>&"


def test_a_figure_of_a_shape_already_checked_with_a_misspelt_attribute_still_fails():
    figures._figure([{"type": "bar", "x": [1], "y": [2]}], {"title": {"text": "ok"}})
    with pytest.raises(ValueError, match="colour"):
        figures._figure([{"type": "bar", "x": [1], "y": [2], "colour": "red"}], {})


def test_booking_calendar_stacks_granted_and_free_by_day_under_the_capacity():
    days = [datetime.date(2026, 12, 1) + datetime.timedelta(days=n) for n in range(3)]

    figure = figures.booking_calendar(
        days, granted=[6, 8, 0], free=[2, 0, 8], pending=[0, 3, 3], plannable=8, title="H100"
    )

    traces = {trace["name"]: trace for trace in figure["data"]}
    assert traces["granted"]["y"] == [6, 8, 0]
    assert traces["free"]["y"] == [2, 0, 8]
    assert traces["granted"]["stackgroup"] == traces["free"]["stackgroup"]
    assert "stackgroup" not in traces["pending requests"]
    assert traces["free"]["x"][1] - traces["free"]["x"][0] == 86_400_000
    assert figure["layout"]["shapes"][0]["y0"] == 8
    assert figure["layout"]["annotations"][0]["text"] == "capacity: 8"
    wire = json.loads(figures.to_json(figure))
    assert wire["data"][0]["dx"] == 86_400_000


@pytest.mark.parametrize(
    ("values", "decimals", "scale", "expected"),
    [
        (
            [40.0, 40.4, 40.6, -2.5, math.nan, math.inf, -math.inf],
            0,
            1.0,
            [40, 40, 41, -2, None, None, None],
        ),
        ([2048.0, 1536.0, 100.0, math.nan], 1, 1 / 1024, [2, 1.5, 0.1, None]),
        ([1.25, 3.0, -3.0, -0.04, 7.349], 1, 1.0, [1.2, 3, -3, 0, 7.3]),
        ([0.5, 1.5, math.inf], 0, 10.0, [5, 15, None]),
    ],
)
def test_values_are_rounded_whole_numbers_become_ints_and_the_uncomputable_none(
    values, decimals, scale, expected
):
    rounded = figures._rounded_all(values, decimals, scale)
    assert rounded == expected
    assert [type(v) for v in rounded] == [type(v) for v in expected]


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        ([60, 120, 180], [60_000, 120_000, 180_000]),  # on a grid: made as a range
        ([60, 120, 240], [60_000, 120_000, 240_000]),  # a step missing
        ([60, 60.5, 61], [60_000, 60_500, 61_000]),  # fractions of a second
        ((t for t in (5, 10)), [5_000, 10_000]),  # any iterable
        ([7], [7_000]),
        ([], []),
    ],
)
def test_timestamps_become_milliseconds_on_a_grid_or_not(seconds, expected):
    millis = figures._millis(seconds)
    assert millis == expected
    assert all(type(m) is int for m in millis)


def test_heatmap_rows_that_begin_end_or_skip_within_the_window_keep_their_columns():
    rows = {
        "late": Series({"r": "late"}, [120, 180], [3, 4]),
        "early": Series({"r": "early"}, [0, 60], [1, 2]),
        "skips": Series({"r": "skips"}, [0, 120], [5, 6]),
        "beyond": Series({"r": "beyond"}, [-60, 0, 180, 240], [7, 8, 9, 10]),
        "off-grid": Series({"r": "off-grid"}, [30, 60], [11, 12]),
    }
    figure = figures.heatmap(
        list(rows.values()),
        title="Heat",
        row=lambda labels: labels["r"],
        start=0,
        end=180,
        step=60,
        axis=Axis("Utilisation", "%", (0, 100)),
    )
    trace = figure["data"][0]
    assert dict(zip(trace["y"], trace["z"], strict=True)) == {
        "late": [None, None, 3, 4],
        "early": [1, 2, None, None],
        "skips": [5, None, 6, None],
        "beyond": [8, None, None, 9],
        "off-grid": [None, 12, None, None],
    }


def test_held_vs_granted_draws_a_ceiling_of_gpu_equivalents():
    """A team granted 4 x 1g.10gb holds them all: 4/7 held under a ceiling of 4/7, not 4."""
    figure = figures.held_vs_granted([series("", [4 / 7, 4 / 7])], granted=4 / 7, title="Held")

    assert figure["data"][0]["y"] == [0.57, 0.57]
    assert figure["layout"]["shapes"][0]["y0"] == pytest.approx(4 / 7)
    assert figure["layout"]["annotations"][0]["text"] == "granted: 0.57"
