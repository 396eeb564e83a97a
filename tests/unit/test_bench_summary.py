"""The benchmarks' summary table: rows recorded by each benchmark, rendered into one table with
each row's ratio, goal and verdict; only each benchmark's latest run."""

from tests.bench import scale, summary
from tests.bench.summary import Goal, Summary


def test_a_row_records_both_figures_their_ratio_the_goal_its_verdict_and_the_load(tmp_path):
    rows = tmp_path / "summary.jsonl"
    run = Summary("quota-requests API", rows=rows)
    row = run.row(
        "list, 10 a page",
        portal=10.5,
        alternative=3.5,
        alternative_is="bare values() view",
        unit="ms",
        goal=Goal.ratio_at_most(1.5),
    )
    assert row["ratio"] == 3.0
    assert row["met"] is False
    assert row["cpus"] >= 1
    assert {"load_at_start", "load_at_end"} <= set(row)
    assert summary.read(rows) == [row]


def test_a_ratio_just_above_its_goal_is_not_met_though_it_rounds_to_it(tmp_path):
    run = Summary("monitoring", rows=tmp_path / "summary.jsonl")

    row = run.row(
        "page, cold", portal=120.4, alternative=100, unit="ms", goal=Goal.ratio_at_most(1.2)
    )

    assert row["met"] is False
    assert summary._number(row["ratio"]) == "1.2"


def test_goals_on_the_ratio_or_on_the_portals_own_figure_either_way():
    assert Goal.ratio_at_most(1.2).met(portal=110, ratio=1.1)
    assert not Goal.ratio_at_least(1.0).met(portal=9.8, ratio=0.43)
    assert Goal.portal_at_most(100).met(portal=60, ratio=None)
    assert Goal.portal_at_least(10).met(portal=10, ratio=None)
    assert Goal.ratio_at_most(1.2).met(portal=1, ratio=None) is None
    assert Goal.ratio_at_most(1.2).text("ms") == "≤ 1.2×"
    assert Goal.portal_at_most(100).text("ms") == "≤ 100 ms"


def test_a_goal_on_the_gap_to_the_alternative_counts_points_not_a_ratio(tmp_path):
    within_a_point = Goal.difference_at_least(-1)

    assert within_a_point.met(portal=89.0, ratio=89.0 / 89.9, alternative=89.9)
    assert not within_a_point.met(portal=88.8, ratio=88.8 / 89.9, alternative=89.9)
    assert within_a_point.met(portal=90, ratio=None, alternative=None) is None
    assert within_a_point.text("%") == "≥ alternative − 1 points"
    row = Summary("kueue", rows=tmp_path / "summary.jsonl").row(
        "GPUs busy while jobs wait", portal=97.5, alternative=99.0, unit="%", goal=within_a_point
    )
    assert row["met"] is False


def test_a_full_lab_run_forgets_the_labs_rows_and_provenance_but_keeps_the_scales(
    tmp_path, monkeypatch
):
    rows, provenance = tmp_path / "summary.jsonl", tmp_path / "PROVENANCE.md"
    provenance.write_text("**How this copy was made:** by hand.\n")
    Summary("reconcile", rows=rows).row(
        "200 teams, cold", portal=3.7, alternative=5.8, unit="s", goal=Goal.ratio_at_most(0.8)
    )
    monkeypatch.setenv("BENCH_SCALE_LABEL", scale.LABEL)
    Summary("reconcile", rows=rows).row(
        "500 teams, cold", portal=9.0, alternative=15.0, unit="s", goal=Goal.ratio_at_most(0.8)
    )

    summary.forget_lab(rows, provenance)

    assert [r["work"] for r in summary.read(rows)] == ["500 teams, cold"]
    assert not provenance.exists()


def test_the_table_has_a_row_per_comparison_of_each_benchmarks_latest_run(tmp_path):
    rows = tmp_path / "summary.jsonl"
    old = Summary("monitoring", rows=rows)
    old.run = "2026-01-01T00:00:00+00:00"
    old.row("team page, cold", portal=300, alternative=100, unit="ms", goal=Goal.ratio_at_most(1.2))
    new = Summary("monitoring", rows=rows)
    new.run = "2026-01-02T00:00:00+00:00"
    new.row("team page, cold", portal=110, alternative=100, unit="ms", goal=Goal.ratio_at_most(1.2))
    new.row("team page, warm", portal=40, unit="ms", goal=Goal.portal_at_most(100))
    Summary("reconcile", rows=rows).row(
        "200 teams, cold",
        portal=7.2,
        alternative=5.1,
        alternative_is="kubectl apply --server-side",
        unit="s",
        goal=Goal.ratio_at_most(0.8),
    )

    table = summary.render(summary.read(rows))

    lines = [line for line in table.splitlines() if line.startswith("| monitoring")]
    assert lines == [
        "| monitoring | team page, cold | 110 ms | 100 ms | 1.1 | ≤ 1.2× | yes "
        f"| {lines[0].rsplit('| ', 1)[1]}",
        "| monitoring | team page, warm | 40 ms | — | — | ≤ 100 ms | yes "
        f"| {lines[1].rsplit('| ', 1)[1]}",
    ]
    assert (
        "| reconcile | 200 teams, cold | 7.2 s | 5.1 s (kubectl apply --server-side) | 1.41 "
        in table
    )
    assert "**no**" in table
    assert "2 of 3 goals met." in table


def test_a_hand_written_provenance_stands_under_the_heading_and_survives_a_render(tmp_path):
    rows = tmp_path / "summary.jsonl"
    Summary("monitoring", rows=rows).row(
        "team page, warm", portal=40, unit="ms", goal=Goal.portal_at_most(100)
    )
    provenance = "**How this copy was made:** monitoring alone, on a quiet machine.\n"

    table = summary.render(summary.read(rows), provenance)

    assert table.index(provenance.strip()) < table.index("1 of 1 goals met.")
    assert provenance.strip() not in summary.render(summary.read(rows))


def test_rows_at_a_companys_scale_stand_beside_the_labs_and_fill_scale_md(tmp_path, monkeypatch):
    rows = tmp_path / "summary.jsonl"
    Summary("reconcile", rows=rows).row(
        "200 teams, cold", portal=3.7, alternative=5.8, unit="s", goal=Goal.ratio_at_most(0.8)
    )
    monkeypatch.setenv("BENCH_SCALE_LABEL", scale.LABEL)
    at_scale = Summary("reconcile", rows=rows)
    at_scale.run = "2999-01-01T00:00:00+00:00"  # later than the lab's run
    at_scale.row(
        "500 teams, cold", portal=9.0, alternative=15.0, unit="s", goal=Goal.ratio_at_most(0.8)
    )

    records = summary.read(rows)
    table = summary.render(records)
    scale_md = scale.render(records)

    assert "| reconcile | 200 teams, cold |" in table
    assert f"| reconcile ({scale.LABEL}) | 500 teams, cold |" in table
    assert "200 teams" not in scale_md
    assert f"| reconcile ({scale.LABEL}) | 500 teams, cold | 9 s |" in scale_md
    assert "1 of 1 goals met." in scale_md
    comparisons = scale_md.split("## The scale's comparisons")[1]
    assert "cold ≤ 0.8×; unchanged ≤ 0.05× cold, constant reads: measured: reconcile (" in (
        comparisons
    )
    assert comparisons.count("**not measured in this run**") == len(scale.COMPARISONS) - 1
    told = scale.render(records, "**Company scale:** reconcile alone.\n")
    assert told.index("**Company scale:** reconcile alone.") < told.index("1 of 1 goals met.")


def test_a_size_set_in_the_environment_wins_over_the_scales(capsys):
    scale.main(["scale.py", "exports"])

    exports = capsys.readouterr().out.splitlines()

    assert 'export BENCH_API_JOBS="${BENCH_API_JOBS:-200000}"' in exports
    assert len(exports) == len(scale.SIZES)
