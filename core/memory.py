"""Pausing Python's cyclic garbage collector around work that builds many objects at once.

The collector runs whenever enough new objects have been allocated, and each full pass walks
every live object. A sweep that decodes thousands of the cluster's objects and builds as many
desired ones triggers pass after pass over a heap that only grows: at 500 teams they were half
of an unchanged sweep's time. Objects without reference cycles are freed by reference counting
whether or not the collector runs, and what such work leaves in cycles is collected at the next
pass after it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic collection while the block runs (in any thread: the collector is the
    process's); back on after it, unless it was off already."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
