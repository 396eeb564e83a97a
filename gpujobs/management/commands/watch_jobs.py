"""``python manage.py watch_jobs``: the watcher process (a docker compose service of its own).

Follows every cluster's GPU Jobs, their pods and the Jobs' events, and writes each job's state
to the database as it changes (``gpujobs.watcher``); and, in threads of the same process, every
other workload the portal runs: each ``run`` named in ``settings.PORTAL_WATCHERS`` (inference
services' Deployments, ReplicaSets and pods: ``serving.watcher``). Stops cleanly on SIGTERM or
Ctrl-C.
"""

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils.module_loading import import_string


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
