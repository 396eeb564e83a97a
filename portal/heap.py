"""A served process's startup objects, kept out of the garbage collector's full passes.

Everything a web worker makes while it starts (Django's apps and settings, the URLconf and every
view it imports, the libraries behind them) lives as long as the process, yet each full pass of
CPython's cyclic collector walks all of it again. A page that decodes a large Prometheus answer
makes tens of thousands of small lists, and such allocation sets off full passes: measured with
the cluster page's heatmap query (1h, 304 GPU series), every third read of its answer paid about
40 ms for one (85 ms instead of 48). ``gc.freeze()`` moves what exists at that
moment into a generation the collector never walks; objects made later are collected as before,
and frozen ones are still freed when nothing refers to them.
"""

import gc

from django.urls import get_resolver


def freeze_startup_objects() -> int:
    """Import every view now (not at the first request), collect what startup left behind, then
    freeze the rest. Call once, at the end of starting the application. Returns how many objects
    were frozen."""
    get_resolver().url_patterns  # noqa: B018 - reading it imports the whole URLconf
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
