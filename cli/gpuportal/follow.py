"""``gpuportal jobs logs -f``: print a job's log as it is written, until the job ends.

The portal streams a followed log (``GET /api/v1/jobs/{id}/logs/?follow=true``) while the
container runs, for at most ``GPUJOBS_LOG_FOLLOW_MAX_SECONDS``; then it ends the stream with
``STOPPED`` and the client asks again (for new lines only). A job that has not started yet is
waited for (the portal answers 409 while its container is not running). The stream is read by
a thread of its own, so that the job's state can be checked while no line comes: once the job
has ended, the client stops, whether or not the cluster ends the stream. A stream that breaks
half-way is asked for again while the job runs (and the portal answers).
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from typing import TextIO

from gpuportal import exits
from gpuportal.client import ApiError, Client

FINISHED = frozenset({"succeeded", "failed", "cancelled"})
# The line the portal ends a follow with when its time limit is up (workloads.log_follows.STOPPED;
# tests/unit/cli checks that the two agree).
STOPPED = "[the portal stopped following this log; ask again to go on]"
# How often the job's state is read while no line comes, and while it waits to start.
POLL_SECONDS = 2.0


def follow_job_log(
    api: Client,
    job_id: int,
    *,
    tail: int,
    container: str,
    out: TextIO,
    err: TextIO,
    poll: float = POLL_SECONDS,
) -> int:
    job = api.get(f"jobs/{job_id}/")
    first = True
    said_waiting = False
    while True:
        if job["state"] in FINISHED:
            if first:  # never followed: show the end of its log once
                body = api.get(f"jobs/{job_id}/logs/", tail=tail, container=container)
                out.write(body.get("log") or "")
                out.flush()
                if not body.get("log") and body.get("detail"):
                    err.write(f"gpuportal: {body['detail']}\n")
            err.write(f"gpuportal: job {job_id} {job['state']}\n")
            return exits.OK
        started = time.monotonic()
        try:
            _follow_once(
                api, job_id, tail=tail if first else 0, container=container, out=out, poll=poll
            )
            first = False
        except ApiError as error:
            if error.status != 409:  # 409: its container is not running (yet, or any more)
                raise
            if first and not said_waiting:
                err.write(f"gpuportal: job {job_id} is {job['state']}; waiting for its log\n")
                said_waiting = True
        if time.monotonic() - started < poll:
            time.sleep(poll)  # a stream that ended at once: do not ask again at once
        job = api.get(f"jobs/{job_id}/")


def _follow_once(
    api: Client, job_id: int, *, tail: int, container: str, out: TextIO, poll: float
) -> None:
    """One followed stream, printed line by line; returns when it ends, or when no line has come
    for a while and the job has ended."""
    lines: queue.Queue = queue.Queue()
    opened: list = []  # the streamed response, once it answers
    stream = Client(api.base_url, api.token)
    reader = threading.Thread(
        target=_read,
        args=(
            stream,
            f"jobs/{job_id}/logs/",
            {"follow": "true", "tail": tail, "container": container},
            lines,
            opened,
        ),
        daemon=True,
    )
    reader.start()
    try:
        job_ended = False
        while True:
            try:
                kind, value = lines.get(timeout=poll)
            except queue.Empty:
                if job_ended:
                    return  # the job has ended and the lines have stopped coming
                if api.get(f"jobs/{job_id}/")["state"] in FINISHED:
                    job_ended = True  # one more wait for lines still on their way
                continue
            if kind == "line":
                if value != STOPPED:
                    out.write(value + "\n")
                    out.flush()
            elif kind == "error":
                raise value
            else:
                return
    finally:
        for response in opened:
            _interrupt(response)
        stream.close()
        reader.join(timeout=5)


def _interrupt(response) -> None:
    """Wake the reader if it waits for a line: closing a socket does not end a ``recv`` that
    another thread is blocked in; shutting it down does."""
    network = response.extensions.get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _read(stream: Client, path: str, params: dict, lines: queue.Queue, opened: list) -> None:
    try:
        with stream.stream_lines(path, params=params) as (response, text):
            opened.append(response)
            for line in text:
                lines.put(("line", line))
    except ApiError as error:
        if opened and error.status is None:
            # The stream broke after it began (closed under it when the main thread is done,
            # or cut by the network or a server restart): the caller reads the job's state,
            # which says whether to go on.
            lines.put(("end", None))
        else:
            lines.put(("error", error))
        return
    except Exception:  # the stream was closed under it: the main thread is done
        pass
    lines.put(("end", None))
