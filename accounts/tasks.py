"""Celery tasks of accounts: small and safe to run twice."""

from celery import shared_task

from accounts import sso


@shared_task
def expire_stale_sign_ins() -> int:
    """Withdraw what stale single sign-ons' groups gave (``sso.sso_expire_stale_sign_ins``)."""
    return sso.sso_expire_stale_sign_ins()
