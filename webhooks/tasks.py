"""Celery tasks for webhooks: given ids, safe to run twice (``sending`` claims each delivery
before posting it). A failed attempt enqueues the next one after its backoff; the periodic
``send_due_deliveries`` sends whatever is due and was never enqueued or was lost."""

from celery import shared_task

from webhooks import sending
from webhooks.services import send_now


@shared_task(acks_late=True)
def deliver(*, delivery_id: int) -> str:
    outcome = sending.delivery_send(delivery_id=delivery_id)
    if outcome is None:
        return "not due"
    if outcome.retry_in is not None:
        deliver.apply_async(kwargs={"delivery_id": delivery_id}, countdown=outcome.retry_in)
    return outcome.status


@shared_task
def send_due_deliveries() -> int:
    due = sending.deliveries_due()
    send_now(due)
    return len(due)
