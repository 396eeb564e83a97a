"""The portal's Celery app for a worker that a test kills in the middle of a reconcile.

Each server-side apply first writes the kind it is about to apply to $SLOW_APPLY_MARKER and then
waits $SLOW_APPLY_SECONDS, so the test knows the task is mid-way and has time to kill it.
Run as ``celery -A tests.integration.reconcile.slow_worker worker``.

The applies still go to the devcluster's real API server; only the moment between two of them is
drawn out. The shared API server cannot be made to hold one apply that long (stopping it, as
``devcluster.apiserver_stopped`` does, stops it for every session and every request).
"""

import os
import time
from pathlib import Path

import django

from portal.celery import app

django.setup()

from clusters import kube  # noqa: E402 - needs Django set up

_apply = kube.KubeClient.apply


def _slow_apply(self, obj: dict) -> dict:
    Path(os.environ["SLOW_APPLY_MARKER"]).write_text(obj["kind"])
    time.sleep(float(os.environ.get("SLOW_APPLY_SECONDS", "60")))
    return _apply(self, obj)


kube.KubeClient.apply = _slow_apply

__all__ = ["app"]
