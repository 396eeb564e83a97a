"""Setting prices: admins only, validated first, audited. A price applies from a month's first
day; setting one for a model and month that has one replaces it (the audit keeps the old)."""

from __future__ import annotations

import datetime

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from billing.amounts import read_amount
from billing.models import Price
from tenants.audit import audit, snapshot
from tenants.models import AuditEvent
from tenants.permissions import is_portal_admin

PRICE_FIELDS = ("gpu_hour", "cpu_core_hour", "memory_gib_hour")


def check_price(*, gpu_model: str, effective_from, amounts: dict) -> dict:
    """The price's fields, cleaned; one ValidationError naming every bad one."""
    errors: dict[str, str] = {}
    cleaned = {
        name: read_amount(amounts.get(name), field=name, errors=errors, required=name == "gpu_hour")
        for name in PRICE_FIELDS
    }
    if not isinstance(gpu_model, str) or len(gpu_model) > 200:
        errors["gpu_model"] = "A GPU model name of at most 200 characters (empty: any model)."
    if isinstance(effective_from, str):
        try:
            effective_from = datetime.date.fromisoformat(effective_from)
        except ValueError:
            effective_from = None
    if not isinstance(effective_from, datetime.date):
        errors["effective_from"] = "A date, YYYY-MM-DD."
    elif effective_from.day != 1:
        errors["effective_from"] = (
            f"Prices start on a month's first day, so that a month has one price "
            f"({effective_from} was given)."
        )
    if errors:
        raise ValidationError(errors)
    return {
        "gpu_model": gpu_model.strip(),
        "effective_from": effective_from,
        **{name: value if value is not None else 0 for name, value in cleaned.items()},
    }


def price_set(
    *,
    actor: User,
    gpu_model: str = "",
    effective_from,
    gpu_hour,
    cpu_core_hour=None,
    memory_gib_hour=None,
) -> Price:
    """Price GPU-hours of a model (empty: any model), and CPU core-hours and GiB-hours with
    them, from a month on."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can set prices.")
    cleaned = check_price(
        gpu_model=gpu_model,
        effective_from=effective_from,
        amounts={
            "gpu_hour": gpu_hour,
            "cpu_core_hour": cpu_core_hour,
            "memory_gib_hour": memory_gib_hour,
        },
    )
    with transaction.atomic():
        price = (
            Price.objects.select_for_update()
            .filter(gpu_model=cleaned["gpu_model"], effective_from=cleaned["effective_from"])
            .first()
        )
        before = snapshot(price) if price else None
        price = price or Price(gpu_model=cleaned["gpu_model"])
        for name, value in cleaned.items():
            setattr(price, name, value)
        price.created_by = price.created_by or actor
        price.save()
        after = snapshot(price)
        if before != after:
            audit(
                actor=actor,
                action=AuditEvent.Action.PRICE_SET,
                target=price,
                team=None,
                before=before,
                after=after,
            )
    return price
