"""How a page's parts are fetched and kept: all at once, each built in the request's thread, kept
in the cache under what they depend on, failures never kept. Plain callables stand in for the
queries; no Prometheus."""

import threading

import pytest
from django.core.cache import cache

from monitoring.parts import Fetching, Part, later, resolve
from monitoring.prometheus import PrometheusUnreachable


@pytest.fixture(autouse=True)
def _cache(settings):
    settings.MONITORING_CACHE_SECONDS = 30
    cache.clear()
    yield
    cache.clear()


def part(key, fetch, *, depends_on=None, built_in=None):
    """A part whose result is ``key:what it fetched``; ``built_in`` collects the threads that
    built it."""

    def build(fetched):
        if built_in is not None:
            built_in.append(threading.current_thread())
        return f"{key}:{fetched}"

    return Part(key, depends_on or (key,), fetch, build, lambda error: f"{key} failed: {error}")


def test_the_parts_of_a_page_are_fetched_at_the_same_time():
    # Each fetch waits for the other: one after another, neither would ever finish.
    both = threading.Barrier(2, timeout=5)

    def fetch():
        both.wait()
        return "ok"

    assert resolve([part("a", fetch), part("b", fetch)]) == {"a": "a:ok", "b": "b:ok"}


def test_parts_are_built_in_the_requests_thread_where_the_database_may_be_used():
    built = []
    resolve([part("a", lambda: 1, built_in=built), part("b", lambda: 2, built_in=built)])
    assert built == [threading.current_thread()] * 2


def test_a_part_asked_again_comes_from_the_cache_until_what_it_depends_on_changes():
    calls = []

    def fetch():
        calls.append(1)
        return len(calls)

    assert resolve([part("a", fetch, depends_on=("a", 1))]) == {"a": "a:1"}
    assert resolve([part("a", fetch, depends_on=("a", 1))]) == {"a": "a:1"}
    assert resolve([part("a", fetch, depends_on=("a", 2))]) == {"a": "a:2"}
    assert len(calls) == 2


def test_a_failed_part_shows_its_message_and_is_asked_again_next_time(settings):
    outcomes = [PrometheusUnreachable("down"), "back"]

    def fetch():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert resolve([part("a", fetch), part("b", lambda: "fine")]) == {
        "a": "a failed: down",
        "b": "b:fine",
    }
    assert resolve([part("a", fetch), part("b", lambda: "never asked")]) == {
        "a": "a:back",
        "b": "b:fine",
    }


def test_without_a_cache_lifetime_every_part_is_fetched_every_time(settings):
    settings.MONITORING_CACHE_SECONDS = 0
    calls = []
    for _ in range(2):
        resolve([part("a", lambda: calls.append(1))])
    assert len(calls) == 2


def test_parts_are_fetched_from_the_start_and_built_only_when_the_page_reads_them():
    fetched, built = threading.Event(), []

    def fetch():
        fetched.set()
        return "ok"

    fetching = Fetching([part("a", fetch, built_in=built)])
    assert fetched.wait(5)  # on its way before anything asked for the result
    shown = later(fetching, lambda results: {"shown": results["a"]})
    assert built == []
    assert shown["shown"] == "a:ok"  # reading it waits for the parts and builds them
    assert built == [threading.current_thread()]
    assert shown["shown"] == "a:ok"
    assert len(built) == 1
