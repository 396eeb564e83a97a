"""One table for every benchmark: each bench script records its rows here as it measures them,
and ``python tests/bench/summary.py`` (the last step of ``make bench``) renders them into
``bench-results/SUMMARY.md``.

A row is one comparison: what was done, the portal's figure, the alternative's figure measured in
the same run and what that alternative is, their ratio (portal / alternative), the goal and
whether it is met, and how busy the machine was (load average when the script started and when
the row was measured, and the CPU count): the figures move with the load of a shared machine.

Rows are appended to ``bench-results/summary.jsonl``, one JSON object a line, kept in git
beside the table; ``make bench`` first forgets the lab's rows (``summary.py forget-lab``) and
keeps those of ``make bench-scale``, which it does not run. A benchmark run on its own
(``scripts/bench.sh NAME``) adds its rows to the others': the table keeps only each benchmark's
latest run, and says when each ran.

How a copy was made, when that is more than one full ``make bench`` (some benchmarks run again
later, on another machine, or not at all), is said by hand in ``bench-results/PROVENANCE.md``,
and for the company scale's rows in ``bench-results/PROVENANCE-scale.md``: the table carries
both under its heading; a full ``make bench`` removes the lab's with its rows.

    summary = Summary("quota-requests API")  # at the start of the run: notes the load
    summary.row(
        "list 10,000 quota requests, 10 a page",
        portal=10.5, alternative=3.8, unit="ms", alternative_is="bare values() view",
        goal=Goal.ratio_at_most(1.5),
    )

Pure Python, no Django: it runs after the benchmarks, outside them.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "bench-results"
ROWS = RESULTS / "summary.jsonl"
TABLE = RESULTS / "SUMMARY.md"
PROVENANCE = RESULTS / "PROVENANCE.md"
SCALE_PROVENANCE = RESULTS / "PROVENANCE-scale.md"


@dataclass(frozen=True)
class Goal:
    """What a row must reach: its ratio (portal / alternative), the portal's own figure, or its
    difference from the alternative (portal - alternative), at most or at least ``value``."""

    of: str  # "ratio", "portal" or "difference"
    at_most: bool
    value: float

    @classmethod
    def ratio_at_most(cls, value: float) -> Goal:
        return cls("ratio", True, value)

    @classmethod
    def ratio_at_least(cls, value: float) -> Goal:
        return cls("ratio", False, value)

    @classmethod
    def portal_at_most(cls, value: float) -> Goal:
        return cls("portal", True, value)

    @classmethod
    def portal_at_least(cls, value: float) -> Goal:
        return cls("portal", False, value)

    @classmethod
    def difference_at_least(cls, value: float) -> Goal:
        """The portal's figure at least the alternative's plus ``value`` (a negative value: at
        most that far below it), for figures where a ratio says less than the gap, such as
        percentages."""
        return cls("difference", False, value)

    def met(
        self, *, portal: float | None, ratio: float | None, alternative: float | None = None
    ) -> bool | None:
        if self.of == "difference":
            figure = None if portal is None or alternative is None else portal - alternative
        else:
            figure = ratio if self.of == "ratio" else portal
        if figure is None:
            return None
        return figure <= self.value if self.at_most else figure >= self.value

    def text(self, unit: str) -> str:
        sign = "≤" if self.at_most else "≥"
        if self.of == "ratio":
            return f"{sign} {self.value:g}×"
        if self.of == "difference":
            gap = f"{abs(self.value):g} {'points' if unit == '%' else unit}"
            return f"{sign} alternative {'−' if self.value < 0 else '+'} {gap}"
        return f"{sign} {self.value:g} {unit}"


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def scale() -> str:
    """The scale the benchmarks run at when it is not the lab's (``make bench-scale`` sets
    ``BENCH_SCALE_LABEL``, ``tests/bench/scale.py``), else ""."""
    return os.environ.get("BENCH_SCALE_LABEL", "")


def scaled_name(bench: str, scale: str) -> str:
    """A benchmark's name in the table when it runs at ``scale``."""
    return f"{bench} ({scale})"


def results_dir() -> Path:
    """Where a benchmark writes its own report: ``bench-results/``, or at another scale than the
    lab's ``bench-results/scale/`` (the lab's reports stay as they are)."""
    return RESULTS / "scale" if scale() else RESULTS


class Summary:
    """The rows of one benchmark's run. Made at the start of the run, it notes the load then.
    At another scale than the lab's, the benchmark's name says which, so that its rows stand
    beside the lab's in the table rather than replace them."""

    def __init__(self, bench: str, *, rows: Path = ROWS) -> None:
        self.scale = scale()
        self.bench = scaled_name(bench, self.scale) if self.scale else bench
        self.rows = rows
        self.run = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        self.load_at_start = _load()

    def row(
        self,
        work: str,
        *,
        portal: float | None,
        unit: str,
        goal: Goal,
        alternative: float | None = None,
        alternative_is: str = "",
        note: str = "",
    ) -> dict:
        """Record one comparison (``alternative`` None when the goal is the portal's own
        figure, with nothing to compare it to) and return it."""
        # Judged unrounded: 1.204 is not "at most 1.2" (the table shows three figures).
        ratio = portal / alternative if portal is not None and alternative else None
        record = {
            "bench": self.bench,
            "run": self.run,
            "work": work,
            "portal": portal,
            "alternative": alternative,
            "alternative_is": alternative_is,
            "unit": unit,
            "ratio": ratio,
            "goal": asdict(goal),
            "met": goal.met(portal=portal, ratio=ratio, alternative=alternative),
            "note": note,
            "load_at_start": self.load_at_start,
            "load_at_end": _load(),
            "cpus": os.cpu_count(),
            "scale": self.scale,
        }
        self.rows.parent.mkdir(parents=True, exist_ok=True)
        with self.rows.open("a") as file:
            file.write(json.dumps(record) + "\n")
        return record


def latest_runs(records: list[dict]) -> list[dict]:
    """Each benchmark's rows from its latest run, in the order the benchmarks first appear."""
    latest: dict[str, str] = {}
    for record in records:
        latest[record["bench"]] = max(latest.get(record["bench"], ""), record["run"])
    return [r for r in records if r["run"] == latest[r["bench"]]]


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    text = f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{text} {unit}".strip()


def render(records: list[dict], provenance: str = "") -> str:
    rows = latest_runs(records)
    met = [r["met"] for r in rows if r["met"] is not None]
    lines = [
        "# Benchmarks: the portal beside the alternative",
        "",
        "Written by `make bench` (`tests/bench/summary.py`) from the rows each benchmark recorded "
        "in `bench-results/summary.jsonl`; each benchmark's own report is beside it in "
        "`bench-results/`. Ratio = portal / alternative, both measured in the same run. Load: "
        "the 1-minute load average when the benchmark started and when the row was measured, "
        "out of that many CPUs.",
        "",
        *([provenance.strip(), ""] if provenance.strip() else []),
        f"{sum(met)} of {len(met)} goals met.",
        "",
        "| benchmark | work | portal | alternative | ratio | goal | met | load (CPUs) |",
        "| --- | --- | ---: | --- | ---: | --- | :---: | --- |",
    ]
    for r in rows:
        goal = Goal(**r["goal"])
        alternative = _number(r["alternative"], r["unit"])
        if r["alternative_is"]:
            alternative = f"{alternative} ({r['alternative_is']})"
        work = f"{r['work']} ({r['note']})" if r["note"] else r["work"]
        met_text = {True: "yes", False: "**no**", None: "—"}[r["met"]]
        lines.append(
            f"| {r['bench']} | {work} | {_number(r['portal'], r['unit'])} | {alternative} "
            f"| {_number(r['ratio'])} | {goal.text(r['unit'])} | {met_text} "
            f"| {r['load_at_start']:g} → {r['load_at_end']:g} ({r['cpus']}) |"
        )
    runs = sorted({(r["bench"], r["run"]) for r in rows}, key=lambda pair: pair[1])
    lines += ["", "Runs: " + "; ".join(f"{bench} {run}" for bench, run in runs) + "."]
    return "\n".join(lines) + "\n"


def read(path: Path = ROWS) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def forget_lab(rows: Path = ROWS, provenance: Path = PROVENANCE) -> None:
    """Before a full ``make bench``: its rows replace the lab's, and how the last copy was made
    no longer holds. The rows of another scale (``make bench-scale``) stay."""
    kept = [r for r in read(rows) if r.get("scale")]
    if rows.exists():
        rows.write_text("".join(json.dumps(r) + "\n" for r in kept))
    provenance.unlink(missing_ok=True)


def main(argv: list[str]) -> None:
    if argv[1:] == ["forget-lab"]:
        forget_lab()
        return
    records = read()
    if not records:
        sys.exit(f"no benchmark recorded a row in {ROWS}")
    provenance = "\n\n".join(
        path.read_text().strip() for path in (PROVENANCE, SCALE_PROVENANCE) if path.exists()
    )
    TABLE.write_text(render(records, provenance))
    print(TABLE.read_text())


if __name__ == "__main__":
    main(sys.argv)
