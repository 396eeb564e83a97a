from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ValidationError
from django.db import IntegrityError


class InvalidTransition(Exception):
    """A state change that the object's current state does not allow (e.g. approving a
    cancelled request). Shown to users as it is, so the message must read well."""

    def __init__(self, message: str, *, current_state: str):
        super().__init__(message)
        self.current_state = current_state


@contextmanager
def refuse_taken_slug(kind: str, slug: str | None) -> Iterator[None]:
    """A slug that another admin took between ``full_clean``'s uniqueness check and the save
    (the unique index's ``IntegrityError``) refused as that check refuses it: a ValidationError
    on ``slug`` naming the ``kind`` of row. Wrap the whole transaction, which cannot go on
    after the error."""
    try:
        yield
    except IntegrityError as error:
        raise ValidationError({"slug": f"A {kind} with slug {slug!r} already exists."}) from error
