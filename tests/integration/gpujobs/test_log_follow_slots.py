"""The limits on followed logs (workloads/log_follows.py), counted in the real Redis: per user,
in all, given back when a stream ends however it ends, and expired when a process died."""

import asyncio
import time

import pytest

from clusters.kube import ClusterUnreachable
from tests.integration.conftest import run_in_new_loop
from workloads import log_follows


@pytest.fixture(autouse=True)
def _limits(settings, redis_url):
    settings.GPUJOBS_LOG_FOLLOWS_PER_USER = 2
    settings.GPUJOBS_LOG_FOLLOWS_TOTAL = 3
    settings.GPUJOBS_LOG_FOLLOW_MAX_SECONDS = 5


def test_a_user_takes_at_most_their_share_of_slots():
    log_follows.take_slot(user_id=1)
    log_follows.take_slot(user_id=1)

    with pytest.raises(log_follows.TooManyFollows, match="following 2 logs already"):
        log_follows.take_slot(user_id=1)
    log_follows.take_slot(user_id=2)  # another user still may


def test_the_portal_takes_at_most_its_total():
    for user_id in (1, 1, 2):
        log_follows.take_slot(user_id=user_id)

    with pytest.raises(log_follows.TooManyFollows, match="as many logs as it can"):
        log_follows.take_slot(user_id=3)


def test_a_released_slot_can_be_taken_again():
    first = log_follows.take_slot(user_id=1)
    log_follows.take_slot(user_id=1)

    first.release()

    log_follows.take_slot(user_id=1)


def test_the_slot_of_a_process_that_died_expires(settings):
    settings.GPUJOBS_LOG_FOLLOW_MAX_SECONDS = -59  # slots outlive the longest follow by 1 s
    log_follows.take_slot(user_id=1)
    log_follows.take_slot(user_id=1)  # neither given back: their process "died"

    time.sleep(2)

    log_follows.take_slot(user_id=1)


async def _lines(*lines, then=None, pause: float = 0):
    for line in lines:
        yield line
    if pause:
        await asyncio.sleep(pause)
    if then is not None:
        raise then


def _read(stream) -> list[str]:
    async def read():
        return [chunk async for chunk in stream]

    return run_in_new_loop(read())


def test_the_stream_ends_with_the_log_and_gives_its_slot_back():
    slot = log_follows.take_slot(user_id=1)
    log_follows.take_slot(user_id=1)

    text = _read(log_follows.stream(_lines("one", "two"), slot=slot))

    assert text == ["one\n", "two\n"]
    log_follows.take_slot(user_id=1)  # the slot is free again


def test_a_cluster_failure_is_the_last_line():
    slot = log_follows.take_slot(user_id=1)

    text = _read(log_follows.stream(_lines("one", then=ClusterUnreachable("gone")), slot=slot))

    assert text == ["one\n", "[log ended: gone]\n"]


def test_the_time_limit_ends_a_quiet_log(settings):
    settings.GPUJOBS_LOG_FOLLOW_MAX_SECONDS = 1
    slot = log_follows.take_slot(user_id=1)
    log_follows.take_slot(user_id=1)

    text = _read(log_follows.stream(_lines("one", pause=30), slot=slot))

    assert text == ["one\n", f"{log_follows.STOPPED}\n"]
    log_follows.take_slot(user_id=1)


def test_a_client_that_goes_away_gives_the_slot_back():
    slot = log_follows.take_slot(user_id=1)
    log_follows.take_slot(user_id=1)

    async def read_one_then_leave():
        stream = log_follows.stream(_lines("one", pause=30), slot=slot)
        first = await anext(stream)
        await stream.aclose()  # what the server does when the client disconnects
        return first

    assert run_in_new_loop(read_one_then_leave()) == "one\n"
    log_follows.take_slot(user_id=1)
