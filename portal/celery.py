"""The Celery application: configured from Django settings (``CELERY_*``), tasks found per app."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def route_task(name, args, kwargs, options, task=None, **kw):
    """``CELERY_TASK_ROUTES``: webhook tasks to ``WEBHOOKS_QUEUE``, the rest to the default
    queue. Read at each send, so a test can name a queue of its own."""
    from django.conf import settings

    if name.startswith("webhooks.tasks."):
        return {"queue": settings.WEBHOOKS_QUEUE}
    return None
