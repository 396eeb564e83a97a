"""The portal's Celery app for a worker that a test kills in the middle of a job submission.

Once it has created a job's Job on the cluster, and before the job's row records it, it writes
the Job's name to $SLOW_SUBMIT_MARKER and waits $SLOW_SUBMIT_SECONDS, so the test knows the
submission is half done and has time to kill it. Run as
``celery -A tests.integration.faults.slow_submit_worker worker``.
"""

import os
import time
from pathlib import Path

import django

from portal.celery import app

django.setup()

from clusters.workloads import WorkloadClient  # noqa: E402 - needs Django set up

_create_job = WorkloadClient.create_job


def _slow_create_job(self, manifest: dict) -> tuple[dict, bool]:
    result = _create_job(self, manifest)
    Path(os.environ["SLOW_SUBMIT_MARKER"]).write_text(manifest["metadata"]["name"])
    time.sleep(float(os.environ.get("SLOW_SUBMIT_SECONDS", "120")))
    return result


WorkloadClient.create_job = _slow_create_job

__all__ = ["app"]
