"""``python manage.py watch_jobs``: the watcher process (a docker compose service of its own).

Follows every cluster's GPU Jobs, their pods and the Jobs' events, and writes each job's state
to the database as it changes (``gpujobs.watcher``); and, in threads of the same process, every
other workload the portal runs: each ``run`` named in ``settings.PORTAL_WATCHERS`` (inference
services' Deployments, ReplicaSets and pods: ``serving.watcher``). Stops cleanly on SIGTERM or
Ctrl-C.

Before its threads start it limits glibc's malloc to ``MALLOC_ARENAS`` arenas (``mallopt``, as
the environment variable ``MALLOC_ARENA_MAX`` would; one set in the environment wins): by
default every thread that allocates gets an arena of its own, and what the list threads free
in theirs stays resident. Following 10,000 jobs that is some 16 MiB of the process's memory
(``tests/bench/bench_watcher_memory.py``).
"""

import ctypes
import ctypes.util
import os
import platform
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils.module_loading import import_string

# glibc's malloc arenas for the whole process (the main thread's and one more).
MALLOC_ARENAS = 2
M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Limit glibc's malloc to ``arenas`` arenas, unless ``MALLOC_ARENA_MAX`` is set (glibc
    read it at start) or the C library is not glibc. Whether it set the limit."""
    if os.environ.get("MALLOC_ARENA_MAX") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, arenas))


class Command(BaseCommand):
    help = (
        "Follow the GPU jobs' Jobs, pods and events, and the inference services' Deployments, "
        "ReplicaSets and pods, on every cluster and record their state."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--discover-every",
            type=float,
            default=5.0,
            help="Seconds between looking for new, changed or removed clusters (default 5).",
        )
        parser.add_argument(
            "--watch-timeout",
            type=int,
            default=240,
            help="Seconds after which the API server ends a watch and it resumes (default 240).",
        )
        parser.add_argument(
            "--once",
            action="store_true",
            help="Make one full pass over every cluster (list, no watch) and exit.",
        )

    def handle(self, *args, discover_every, watch_timeout, once, **options):
        stop = threading.Event()

        def request_stop(signum, frame):
            stop.set()

        limit_malloc_arenas()  # before the threads start and make arenas of their own
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        runs = [import_string(path) for path in settings.PORTAL_WATCHERS]
        self.stderr.write("watch_jobs: following GPU jobs (SIGTERM to stop)")
        options = {
            "stop": stop,
            "discover_every": discover_every,
            "watch_timeout": watch_timeout,
            "once": once,
        }
        threads = [
            threading.Thread(target=run, kwargs=options, name=path, daemon=True)
            for run, path in zip(runs, settings.PORTAL_WATCHERS, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            # Joined in short waits, so that the signal handler runs in this (the main) thread.
            while thread.is_alive():
                thread.join(timeout=0.5)
        stop.set()
        self.stderr.write("watch_jobs: stopped")
