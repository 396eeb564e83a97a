"""Reading prices and budget sizes from what a form or a client sent: Decimals, not negative,
at most 4 decimal places, each refusal naming its field."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

MAX_DECIMALS = 4
MAX_AMOUNT = Decimal("9999999999")


def read_amount(value, *, field: str, errors: dict[str, str], required: bool = True):
    """``value`` as a Decimal, or None with ``errors[field]`` saying why (None is also the
    answer for an empty optional value)."""
    if value is None or value == "":
        if required:
            errors[field] = "This field is required."
        return None
    if isinstance(value, bool):
        errors[field] = "Must be a number."
        return None
    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        errors[field] = f"Must be a number ({value!r} was given)."
        return None
    if not amount.is_finite():
        errors[field] = "Must be a finite number."
    elif amount < 0:
        errors[field] = f"Must not be negative ({amount} was given)."
    elif amount > MAX_AMOUNT:
        errors[field] = f"Must be at most {MAX_AMOUNT} ({amount} was given)."
    elif amount != amount.quantize(Decimal(1).scaleb(-MAX_DECIMALS)):
        errors[field] = f"At most {MAX_DECIMALS} decimal places ({amount} was given)."
    else:
        return amount.quantize(Decimal(1).scaleb(-MAX_DECIMALS))
    return None
