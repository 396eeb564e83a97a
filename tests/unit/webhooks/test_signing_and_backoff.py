"""Signatures a receiver can check, and the retry schedule."""

import hashlib
import hmac

from webhooks.sending import backoff_seconds
from webhooks.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    new_secret,
    signature,
    signature_valid,
    signed_headers,
)

BODY = b'{"event":"gpu_job.failed"}'


def test_signature_is_hmac_sha256_of_timestamp_dot_body():
    expected = hmac.new(b"s3cret", b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert signature("s3cret", 1700000000, BODY) == f"sha256={expected}"


def test_signature_changes_with_secret_timestamp_and_body():
    base = signature("s3cret", 1700000000, BODY)
    assert signature("other", 1700000000, BODY) != base
    assert signature("s3cret", 1700000001, BODY) != base
    assert signature("s3cret", 1700000000, BODY + b" ") != base


def test_receiver_accepts_a_fresh_valid_signature():
    signed = signature("s3cret", 1700000000, BODY)
    assert signature_valid(
        "s3cret", timestamp="1700000000", body=BODY, signed=signed, now=1700000100
    )


def test_receiver_refuses_a_wrong_secret_a_changed_body_or_an_old_timestamp():
    signed = signature("s3cret", 1700000000, BODY)
    check = {"timestamp": 1700000000, "signed": signed, "now": 1700000000}
    assert not signature_valid("wrong", body=BODY, **check)
    assert not signature_valid("s3cret", body=BODY + b"x", **check)
    assert not signature_valid("s3cret", body=BODY, **{**check, "now": 1700000000 + 301})
    assert not signature_valid("s3cret", body=BODY, **{**check, "timestamp": "soon"})


def test_signed_headers_carry_event_delivery_timestamp_and_signature():
    headers = signed_headers(
        secret="s3cret",
        body=BODY,
        timestamp=1700000000,
        event="gpu_job.failed",
        delivery_id=42,
        user_agent="gpu-portal-webhooks",
    )
    assert headers["Content-Type"] == "application/json"
    assert headers[EVENT_HEADER] == "gpu_job.failed"
    assert headers[DELIVERY_HEADER] == "42"
    assert headers[TIMESTAMP_HEADER] == "1700000000"
    assert headers[SIGNATURE_HEADER] == signature("s3cret", 1700000000, BODY)


def test_new_secrets_are_long_and_different():
    first, second = new_secret(), new_secret()
    assert first != second
    assert len(first) >= 40


def test_backoff_doubles_from_the_base_up_to_the_cap():
    schedule = [backoff_seconds(n, base=30, cap=600) for n in range(1, 8)]
    assert schedule == [30, 60, 120, 240, 480, 600, 600]


def test_backoff_after_no_attempt_is_the_base():
    assert backoff_seconds(0, base=5, cap=100) == 5
