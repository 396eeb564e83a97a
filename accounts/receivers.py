"""What ``accounts`` does when ``tenants`` says a user lost access (``tenants.signals``):
their API tokens go, so a script holding one stops working at once and stays stopped even if
the user is reactivated or given a team again (they make a new token then)."""

import logging

from accounts import services

logger = logging.getLogger(__name__)


def on_user_lost_access(sender, *, user, why: str, **kwargs) -> None:
    revoked = services.api_tokens_revoke_all(user=user)
    if revoked:
        logger.info("Revoked %d API token(s) of %s: %s.", revoked, user, why)
