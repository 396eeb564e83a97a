"""Following a job's log without exhausting the web tier.

A followed log is a response that lasts as long as the container writes (up to
``GPUJOBS_LOG_FOLLOW_MAX_SECONDS``). Served from a sync worker, each one would hold that worker
the whole time, and a few clients following logs would leave none for pages. So a follow is
read and sent on the event loop of an ASGI worker (the Dockerfile runs gunicorn with its asgi
worker): ``stream`` is an async generator, and the cluster's log is read by an async HTTP
client (``clusters.workloads``), holding neither a worker nor a thread while it waits.

Each follow also takes a slot, counted in Redis so that the limits hold across every worker
and host: at most ``GPUJOBS_LOG_FOLLOWS_PER_USER`` at once per user, and
``GPUJOBS_LOG_FOLLOWS_TOTAL`` in all; beyond them the API answers 429 with ``Retry-After``.
A slot is given back when its stream ends, however it ends; one whose process died expires a
minute after the longest a follow may last.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import redis
from django.conf import settings

from clusters.kube import KubeError

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 10
STOPPED = "[the portal stopped following this log; ask again to go on]"
# Lines read ahead of a slow client: beyond them the cluster's log is not read further until the
# client takes some (TCP pushes back on the API server).
BUFFERED_LINES = 1000

KEY_PREFIX = "gpuportal:log-follows:"
_TOTAL_KEY = KEY_PREFIX + "all"

# Takes a slot in the user's set and the portal's set at once, or says which limit is full:
# 0 taken, 1 the user's limit, 2 the portal's. A set's members are slots, scored by the time
# (Redis's clock) they expire; expired ones are dropped first.
_TAKE = """
local now = tonumber(redis.call('TIME')[1])
local expires = now + tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 1 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 2 end
redis.call('ZADD', KEYS[1], expires, ARGV[1])
redis.call('ZADD', KEYS[2], expires, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return 0
"""


class TooManyFollows(Exception):
    """A limit on followed logs is reached; the message says which."""


@functools.cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)


def _client() -> redis.Redis:
    return _redis(settings.PORTAL_REDIS_URL)


@dataclass(frozen=True)
class Slot:
    """One follow's place in the counts."""

    id: str
    user_key: str

    def release(self) -> None:
        with _client().pipeline() as pipe:
            pipe.zrem(self.user_key, self.id).zrem(_TOTAL_KEY, self.id).execute()


def take_slot(*, user_id: int) -> Slot:
    """A slot for a new follow by this user, or ``TooManyFollows``."""
    slot = Slot(id=uuid.uuid4().hex, user_key=f"{KEY_PREFIX}user:{user_id}")
    lifetime = settings.GPUJOBS_LOG_FOLLOW_MAX_SECONDS + 60
    full = _client().eval(
        _TAKE,
        2,
        slot.user_key,
        _TOTAL_KEY,
        slot.id,
        lifetime,
        settings.GPUJOBS_LOG_FOLLOWS_PER_USER,
        settings.GPUJOBS_LOG_FOLLOWS_TOTAL,
    )
    if full == 1:
        raise TooManyFollows(
            f"You are following {settings.GPUJOBS_LOG_FOLLOWS_PER_USER} logs already, the most "
            "at once: stop one, or try again later."
        )
    if full == 2:
        raise TooManyFollows(
            "The portal is following as many logs as it can at once: try again later."
        )
    return slot


async def stream(lines: AsyncIterator[str], *, slot: Slot) -> AsyncIterator[str]:
    """The log's lines as text, until the container ends, the cluster fails (said in the last
    line) or ``GPUJOBS_LOG_FOLLOW_MAX_SECONDS`` pass (said too); then the slot is given back.

    The lines are read by a task of their own into a queue, so that the time limit can cut
    the wait for the next line without cancelling the read half-way from another task."""
    queue: asyncio.Queue = asyncio.Queue(maxsize=BUFFERED_LINES)
    reader = asyncio.create_task(_read(lines, queue))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.GPUJOBS_LOG_FOLLOW_MAX_SECONDS
    try:
        while True:
            try:
                kind, value = await asyncio.wait_for(
                    queue.get(), timeout=max(deadline - loop.time(), 0)
                )
            except TimeoutError:
                yield f"{STOPPED}\n"
                return
            if kind == "end":
                return
            yield f"{value}\n" if kind == "line" else f"[log ended: {value}]\n"
            if kind == "error":
                return
    finally:
        # However the stream ends (done, limit, or the client went away and the server
        # cancelled it): stop reading the cluster's log, and give the slot back.
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        await asyncio.to_thread(slot.release)


async def _read(lines: AsyncIterator[str], queue: asyncio.Queue) -> None:
    try:
        async for line in lines:
            await queue.put(("line", line))
    except KubeError as error:
        await queue.put(("error", str(error)))
    except Exception:
        logger.exception("Following a log failed")
        await queue.put(("error", "the portal could not read the log"))
    else:
        await queue.put(("end", None))
