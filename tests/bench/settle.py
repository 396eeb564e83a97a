"""Between two benchmarks (``scripts/bench.sh``): wait until the devcluster has finished deleting
the namespaces the last benchmark removed.

The benchmarks delete their namespaces without waiting (the reconcile benchmark 2,000 of them,
the Kueue one 2,000 Jobs); the control plane then spends minutes of CPU on the deletions, and a
benchmark started meanwhile shares the machine with them. Nothing to wait for when no devcluster
is running.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kubernetes import client

from devcluster import api as devcluster_api

TIMEOUT_SECONDS = 1800
REPORT_EVERY_SECONDS = 30


def log(message: str) -> None:
    print(f"[bench settle {time.strftime('%H:%M:%S')}] {message}", flush=True)


def terminating(core: client.CoreV1Api) -> int:
    return sum(1 for ns in core.list_namespace().items if ns.status.phase == "Terminating")


def main() -> int:
    handle = devcluster_api.running()
    if handle is None:
        return 0
    core = client.CoreV1Api(handle.api_client())
    started = time.monotonic()
    reported = started
    while (left := terminating(core)) > 0:
        now = time.monotonic()
        if now - started > TIMEOUT_SECONDS:
            log(f"{left} namespaces still terminating after {TIMEOUT_SECONDS} s; going on")
            return 0
        if now - reported >= REPORT_EVERY_SECONDS or reported == started:
            log(f"waiting for {left} namespaces to be deleted")
            reported = now
        time.sleep(2)
    if time.monotonic() - started > 1:
        log(f"namespaces deleted after {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
