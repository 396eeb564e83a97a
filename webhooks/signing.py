"""Signing what a webhook is sent, so its receiver knows it came from the portal and was not
replayed later: ``X-Portal-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`` under
the webhook's secret, with the timestamp (Unix seconds) in ``X-Portal-Timestamp``. A receiver
recomputes the HMAC over the raw body it got, compares in constant time, and refuses a
timestamp too far from its clock. Pure: the caller gives the time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

SIGNATURE_HEADER = "X-Portal-Signature"
TIMESTAMP_HEADER = "X-Portal-Timestamp"
EVENT_HEADER = "X-Portal-Event"
DELIVERY_HEADER = "X-Portal-Delivery"
SCHEME = "sha256"


def new_secret() -> str:
    """A fresh signing secret: 32 random bytes, URL-safe text."""
    return secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"{SCHEME}={digest.hexdigest()}"


def signature_valid(
    secret: str, *, timestamp: str | int, body: bytes, signed: str, now: int, tolerance: int = 300
) -> bool:
    """What a receiver checks: the signature matches and the timestamp is recent."""
    try:
        stamp = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs(now - stamp) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, stamp, body), signed)


def signed_headers(
    *, secret: str, body: bytes, timestamp: int, event: str, delivery_id: int, user_agent: str
) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": user_agent,
        EVENT_HEADER: event,
        DELIVERY_HEADER: str(delivery_id),
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, body),
    }
