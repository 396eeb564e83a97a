"""The company scale of ``make bench-scale``: the lab benchmarks run again at the size of a
company of 5,000 GPUs (625 nodes of 8 GPUs, 500 teams, 200,000 finished jobs, 10,000 running
at once), each beside the same alternative as at the lab's size.

One place for the sizes: ``python tests/bench/scale.py exports`` prints the environment that
sets every benchmark's sizes (each benchmark reads its own ``BENCH_*`` variables, as a smaller
run does; one already set wins, for a smaller trial of the same shape), ``... benchmarks`` the
benchmarks that run at this scale, and ``... render`` writes ``bench-results/scale.md`` from
the rows they recorded (their benchmark names carry the scale, so the summary table keeps them
beside the lab's rows) and lists the scale's comparisons no benchmark measured in that run.

Pure Python, no Django.
"""

from __future__ import annotations

import sys

if __package__ in (None, ""):  # run as a script: ``python tests/bench/scale.py``
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))

from tests.bench import summary

LABEL = "company of 5,000 GPUs"
SCALE_MD = summary.RESULTS / "scale.md"

# Every benchmark's sizes at this scale, by its own environment variable.
SIZES = {
    "BENCH_SCALE_LABEL": LABEL,
    # API lists and the review queue: 200,000 finished jobs of 500 teams.
    "BENCH_API_JOBS": "200000",
    "BENCH_API_TEAMS": "500",
    # The web tier: 500 teams of 400 jobs each (200,000), 50 users; the goal 300 ms p95.
    "BENCH_LOAD_TEAMS": "500",
    "BENCH_LOAD_JOBS_PER_TEAM": "400",
    "BENCH_LOAD_GOAL_MS": "300",
    # Planning and money: 500 teams x 12 months, against the same at 100 teams.
    "BENCH_CALENDAR_TEAMS": "100,500",
    "BENCH_STATEMENTS_TEAMS": "500",
    # Reconcile 500 teams, kubectl beside it at the same size; 200 first, to show that the
    # reads of an unchanged pass do not grow.
    "BENCH_RECONCILE_TEAMS": "200,500",
    "BENCH_RECONCILE_KUBECTL_SIZES": "500",
    # The watcher: 10,000 one-GPU Jobs on 625 simulated 8-GPU nodes (5,000 pods run, the other
    # 5,000 wait Pending), and the time from a pod Running to the portal's row saying so.
    "BENCH_WATCHER_JOBS": "10000",
    "BENCH_WATCHER_RUNNING": "1",
    "BENCH_WATCHER_GPU_NODES": "625",
    "BENCH_WATCHER_CPU_NODES": "50",
    "BENCH_WATCHER_GOAL_MB": "300",
    # Kueue: 500 teams' queues over 625 nodes of 8 GPUs (2,500 of each model), through the
    # portal and by kubectl create -f. The control plane creates about 4 Jobs a second through
    # Kueue's webhooks, so 4-GPU jobs (1,250 fill the GPUs, 2,000 keep 750 waiting) and each run
    # ends at its last admission: one-GPU jobs would need 20 minutes a run before any waits.
    "BENCH_KUEUE_TEAMS": "500",
    "BENCH_KUEUE_GPUS_PER_MODEL": "2500",
    "BENCH_KUEUE_NODE_GPUS": "8",
    "BENCH_KUEUE_GPUS_PER_JOB": "4",
    "BENCH_KUEUE_JOBS": "2000",
    "BENCH_KUEUE_RUN_SECONDS": "480",
    "BENCH_KUEUE_RUNS": "portal,kubectl",
    "BENCH_KUEUE_FOLLOW_UNTIL": "admitted",
    "BENCH_KUEUE_TIMEOUT": "2400",
    # Monitoring: 30 days of DCGM history for 5,000 GPUs of 500 teams (10 each) on 625 nodes,
    # written by the Go block writer (promtool would take hours over the text); the pages within
    # 1.3 times their raw PromQL (the goal for the cluster page) and 500 KiB, the usage
    # report within 0.1 times the figures by hand over every GPU's series and 200 ms warm.
    "BENCH_MONITORING_GPUS": "5000",
    "BENCH_MONITORING_DAYS": "30",
    "BENCH_MONITORING_TEAMS": "500",
    "BENCH_MONITORING_GPU_NODES": "625",
    "BENCH_MONITORING_WRITER": "tsdb",
    "BENCH_MONITORING_COLD_GOAL": "1.3",
    "BENCH_MONITORING_HTML_GOAL_KIB": "500",
    "BENCH_MONITORING_USAGE_COLD_GOAL": "0.1",
    "BENCH_MONITORING_USAGE_WARM_GOAL_MS": "200",
}

BENCHMARKS = (
    "api_lists",
    "calendar",
    "statements",
    "reconcile",
    "watcher_memory",
    "web_load",
    "kueue",
    "monitoring",
)

# The scale's comparisons (issue 33), and the benchmarks whose rows measure each.
COMPARISONS = (
    (
        "20,000 one-GPU jobs of 500 teams through the API, Kueue mode, beside the same Jobs by "
        "`kubectl create -f` to Kueue alone: admissions/s ≥ 0.95×, GPUs busy while jobs wait "
        "≥ Kueue alone − 1 point",
        ("kueue",),
    ),
    (
        "reconcile 500 teams, cold and unchanged, beside `kubectl apply --server-side` and the "
        "cold pass: cold ≤ 0.8×; unchanged ≤ 0.05× cold, constant reads",
        ("reconcile",),
    ),
    (
        "watcher following 10,000 running pods: memory ≤ 300 MiB; pod Running → portal p99 ≤ 1 s",
        ("watcher memory",),
    ),
    (
        "cluster page, 5,000 GPUs, 1 h / 24 h / 7 d, beside its raw PromQL: ≤ 1.3×, HTML ≤ 500 KiB",
        ("monitoring",),
    ),
    (
        "usage report, 500 teams, 30 days, beside raw PromQL: ≤ 0.1× cold, ≤ 200 ms warm",
        ("monitoring",),
    ),
    (
        "review queue, API lists and the jobs list with 200,000 jobs, beside a bare `values()` "
        "view: ≤ 1.5×, constant queries; pages ≤ 300 ms p95 with 50 users",
        ("API lists", "web tier under load"),
    ),
    (
        "the booking calendar and statements for 500 teams × 12 months, beside one raw SQL "
        "query: ≤ 1.5×",
        ("booking calendar", "statements"),
    ),
)


def scaled(bench: str) -> str:
    """A benchmark's name in the summary table when it runs at this scale."""
    return summary.scaled_name(bench, LABEL)


def render(records: list[dict], provenance: str = "") -> str:
    """``scale.md``: how the copy was made (``provenance``), the table of the scale's rows (each
    benchmark's latest run), then each of the scale's comparisons with the benchmarks that
    measured it, or that none did."""
    rows = [r for r in summary.latest_runs(records) if r.get("scale") == LABEL]
    measured = {r["bench"] for r in rows}
    table = summary.render(rows).splitlines()
    # The lab table's heading and introduction left out: from "N of M goals met." on.
    body = table[next(i for i, line in enumerate(table) if line.endswith("goals met.")) :]
    lines = [
        f"# Benchmarks at the scale of a {LABEL}",
        "",
        "Written by `make bench-scale` (`tests/bench/scale.py`): the benchmarks of `make bench` "
        "run again at these sizes, each beside the same alternative in the same run "
        "(`python tests/bench/scale.py exports` prints them). Ratio = portal / alternative. "
        "Load: the 1-minute load average when the benchmark started and when the row was "
        "measured, out of that many CPUs. The rows are also in `bench-results/SUMMARY.md`, "
        "under the benchmarks' names with the scale; `bench-results/PROVENANCE-scale.md` says "
        "how this copy was made. Each benchmark's own report is in `bench-results/scale/`.",
        "",
        "Sizes: "
        + ", ".join(f"`{k}={v}`" for k, v in SIZES.items() if k != "BENCH_SCALE_LABEL")
        + " (a trial may set smaller ones: each row says what it measured).",
        "",
        *([provenance.strip(), ""] if provenance.strip() else []),
        *body,
        "",
        "## The scale's comparisons",
        "",
    ]
    for comparison, benches in COMPARISONS:
        done = [b for b in benches if scaled(b) in measured]
        state = (
            "measured: " + ", ".join(scaled(b) for b in done)
            if len(done) == len(benches)
            else "**not measured in this run**"
            + (f" (only {', '.join(scaled(b) for b in done)})" if done else "")
        )
        lines.append(f"- {comparison}: {state}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else ""
    if command == "exports":
        # A size already in the environment wins: a smaller trial of the same shape.
        # (The values hold no quote, $, backslash or backtick: they go inside double quotes.)
        print("\n".join(f'export {k}="${{{k}:-{v}}}"' for k, v in SIZES.items()))
    elif command == "benchmarks":
        print(" ".join(BENCHMARKS))
    elif command == "render":
        provenance = (
            summary.SCALE_PROVENANCE.read_text() if summary.SCALE_PROVENANCE.exists() else ""
        )
        SCALE_MD.write_text(render(summary.read(), provenance))
        print(SCALE_MD.read_text())
    else:
        print(f"usage: {argv[0]} exports|benchmarks|render", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
