"""Pausing the cyclic garbage collector around a sweep's check."""

import gc

import pytest

from core.memory import cyclic_gc_paused


@pytest.fixture
def collector_restored():
    enabled = gc.isenabled()
    yield
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_off_in_the_block_and_on_again_after_it(collector_restored):
    gc.enable()
    seen = []

    def check() -> None:
        with cyclic_gc_paused():
            seen.append(gc.isenabled())
            raise RuntimeError("the block failed")

    with pytest.raises(RuntimeError):
        check()
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collector_restored):
    gc.disable()
    with cyclic_gc_paused():
        pass
    assert not gc.isenabled()
