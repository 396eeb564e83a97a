"""The demo's notice while its cluster is built and started (scripts/demo.sh): the portal shows
the text of its ``PORTAL_NOTICE_FILE`` at the top of every page, and this writes that text from
the progress lines of ``python -m devcluster up`` (``devcluster.log.progress``), so that whoever
opened the portal meanwhile sees how far the cluster is and what waits for it.

    python -m devcluster up 2>&1 >cluster.env | python -m devcluster.demo_notice follow NOTICE
    python -m devcluster.demo_notice step NOTICE "installing the portal on it"
    python -m devcluster.demo_notice failed NOTICE cluster.log

``follow`` copies its input to its output (the demo's log) and rewrites the notice at each step
and every few seconds (the time so far moves on while Go compiles). ``--since`` (Unix seconds)
is when the demo began waiting for the cluster. The file is replaced whole, never written in
place, so a page never reads half a notice.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import sys
import threading
import time
from pathlib import Path

from devcluster import builder

WAITING = "Until it is up, reconciles, jobs and charts wait; they catch up on their own."
REFRESH_SECONDS = 10.0

# What each Go module build makes, in words, by its name in devcluster.builder.
PART_NAMES = {
    "etcd": "etcd",
    "kwok": "kwok (the simulated nodes)",
    "kube": "Kubernetes",
    "kueue": "Kueue",
}
# What the demo's `up` builds: the cluster's binaries (the tests' tools are built apart).
PARTS = tuple(build.name for build in builder.MODULE_BUILDS)

_LINE = re.compile(r"^\[devcluster [0-9:]+\] (?P<message>.*)$")
_GO_BUILD = re.compile(r"^go build (?P<part>[\w-]+):")
_PACKAGES = re.compile(r"^ {2}(?P<part>[\w-]+): (?P<count>\d+) packages so far")
_DOWNLOADING = re.compile(r"^ {2}(?P<part>[\w-]+): go: downloading ")
_STARTED = re.compile(r"^started (?P<component>[\w-]+) \(pid \d+\)$")
_HEALTHY = re.compile(r"^(?P<component>[\w-]+) is healthy$")


def elapsed(seconds: float) -> str:
    """``4 minutes so far``: the time the demo has waited for its cluster, in words."""
    minutes = int(max(seconds, 0) // 60)
    if minutes == 0:
        return "under a minute so far"
    return f"{minutes} minute{'s' if minutes != 1 else ''} so far"


def notice_text(step: str, seconds: float) -> str:
    """The notice for a cluster at ``step`` after ``seconds``."""
    return f"The local GPU cluster is being built: {step}, {elapsed(seconds)}. {WAITING}"


def failed_text(reason: str, log: str) -> str:
    """The notice for a cluster that did not come up: the portal runs on without it."""
    reason = reason.rstrip(".") or "see the log"
    return (
        f"The local GPU cluster did not come up: {reason}. Reconciles, jobs and charts wait for "
        f"it. The log is {log}; stop the demo and start it again to try again."
    )


class BuildProgress:
    """The step a ``devcluster up`` is at, from its progress lines one by one."""

    def __init__(self, step: str = "starting the build"):
        self.step = step
        self._part = ""
        self._detail = ""

    def feed(self, line: str) -> bool:
        """Take one line of ``up``'s output; whether the step changed. Lines that are not
        progress lines (a traceback, a tool's own output) leave the step as it is."""
        match = _LINE.match(line.rstrip("\n"))
        if match is None:
            return False
        step = self._step(match["message"])
        if step is None or step == self.step:
            return False
        self.step = step
        return True

    def _compiling(self) -> str:
        name = PART_NAMES.get(self._part, self._part)
        where = f"part {PARTS.index(self._part) + 1} of {len(PARTS)}" if self._part in PARTS else ""
        details = ", ".join(filter(None, (where, self._detail)))
        return f"compiling {name}" + (f" ({details})" if details else "")

    def _step(self, message: str) -> str | None:
        if message.startswith("building "):
            return "compiling its binaries (the first time takes many minutes)"
        if match := _GO_BUILD.match(message):
            self._part, self._detail = match["part"], ""
            return self._compiling()
        if match := _PACKAGES.match(message):
            self._part, self._detail = match["part"], f"{match['count']} packages so far"
            return self._compiling()
        if match := _DOWNLOADING.match(message):
            self._part, self._detail = match["part"], "downloading its Go modules"
            return self._compiling()
        if message.startswith(("build finished", "binaries for ")):
            return "starting it"
        if match := _STARTED.match(message):
            return f"starting {match['component']}"
        if match := _HEALTHY.match(message):
            return f"starting it ({match['component']} is up)"
        if message.startswith("applied Kueue's CRDs"):
            return "installing Kueue"
        if message.startswith("creating nodes"):
            return "creating its simulated GPU nodes"
        if message.startswith(("devcluster up in", "devcluster already running")):
            return "it is up; installing the portal on it"
        return None


def write_notice(path: Path, text: str) -> None:
    """Replace the notice file with ``text`` at once (a reader sees the old or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text + "\n")
    os.replace(partial, path)


def follow(lines, output, path: Path, since: float, refresh: float = REFRESH_SECONDS) -> None:
    """Copy ``lines`` to ``output`` until they end, keeping the notice at ``path`` on the
    step they are at (rewritten at each new step and every ``refresh`` seconds)."""
    progress = BuildProgress()
    incoming: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in lines:
            incoming.put(line)
        incoming.put(None)

    threading.Thread(target=read, daemon=True).start()
    write_notice(path, notice_text(progress.step, time.time() - since))
    while True:
        try:
            line = incoming.get(timeout=refresh)
        except queue.Empty:
            write_notice(path, notice_text(progress.step, time.time() - since))
            continue
        if line is None:
            return
        output.write(line)
        output.flush()
        if progress.feed(line):
            write_notice(path, notice_text(progress.step, time.time() - since))


def last_error(log: Path) -> str:
    """The reason a ``devcluster up`` gave for failing (its ``devcluster: ...`` line), else the
    log's last line."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    for line in reversed(lines):
        if line.startswith("devcluster: "):
            return line.removeprefix("devcluster: ")
    return lines[-1] if lines else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster.demo_notice", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("follow", "copy `up`'s output from stdin to stdout and keep the notice on its step"),
        ("step", "write the notice for one step of the demo's own"),
        ("failed", "write the notice for a cluster that did not come up"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("notice", type=Path, help="the notice file (PORTAL_NOTICE_FILE)")
        if name == "step":
            command.add_argument("step", help="what the demo is doing, in words")
        if name == "failed":
            command.add_argument("log", type=Path, help="the log of `up`")
        command.add_argument(
            "--since",
            type=float,
            default=time.time(),
            help="when the demo began waiting for the cluster (Unix seconds; default now)",
        )
    args = parser.parse_args(argv)
    if args.command == "follow":
        follow(sys.stdin, sys.stdout, args.notice, args.since)
    elif args.command == "step":
        write_notice(args.notice, notice_text(args.step, time.time() - args.since))
    else:
        write_notice(args.notice, failed_text(last_error(args.log), str(args.log)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
