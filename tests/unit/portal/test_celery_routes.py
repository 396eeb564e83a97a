"""Webhook tasks go to ``WEBHOOKS_QUEUE`` and every other task to the default queue, so that a
slow receiver only ever holds up other deliveries (the worker-level proof is
tests/integration/reconcile/test_webhooks_never_delay_reconciles.py)."""

from portal.celery import app as celery_app
from reconcile.tasks import reconcile_sweep, reconcile_team
from webhooks.tasks import deliver, send_due_deliveries


def queue_of(task) -> str:
    return celery_app.amqp.router.route({}, task.name, (), {}, task)["queue"].name


def test_deliveries_and_their_sweep_go_to_the_webhooks_queue(settings):
    settings.WEBHOOKS_QUEUE = "hooks-of-this-test"

    assert queue_of(deliver) == "hooks-of-this-test"
    assert queue_of(send_due_deliveries) == "hooks-of-this-test"


def test_reconciles_stay_on_the_default_queue(settings):
    settings.WEBHOOKS_QUEUE = "hooks-of-this-test"

    assert queue_of(reconcile_team) == celery_app.conf.task_default_queue
    assert queue_of(reconcile_sweep) == celery_app.conf.task_default_queue


def test_the_default_webhooks_queue_is_not_the_default_queue():
    from portal import settings as portal_settings

    assert portal_settings.WEBHOOKS_QUEUE not in ("", portal_settings.CELERY_TASK_DEFAULT_QUEUE)
