"""The types of the commands' arguments: ids and counts, refused as usage errors (exit 1) before
anything reaches the portal."""

from __future__ import annotations

import argparse
from collections.abc import Callable

# How many rows a list command asks for unless told (``--limit``).
DEFAULT_LIMIT = 50


def object_id(kind: str) -> Callable[[str], int]:
    """The type of an argument naming one ``kind`` (a job, a session) by its id."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {kind} id: {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"not a {kind} id: {text!r}")
        return value

    parse.__name__ = f"{kind}_id"
    return parse


job_id = object_id("job")
session_id = object_id("session")


def whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def positive(text: str) -> int:
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def not_negative(text: str) -> int:
    value = whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value
