"""The probes a container platform asks the web server: ``/healthz`` (the process answers: no
dependency is checked, so a database outage never gets every web pod restarted) and ``/readyz``
(it can serve: the database answers a trivial query and the Celery broker a ping, each within
``HEALTH_CHECK_TIMEOUT_SECONDS``). ``/readyz`` answers 200 ``{"database": "ok", "broker": "ok"}``
or 503 with ``"unavailable"`` for what failed; the reason goes to the log, not to the anonymous
caller.

Answered by ``HealthCheckMiddleware``, first in ``MIDDLEWARE``, before anything that could turn a
probe away: the kubelet calls the pod's own address over plain http, which is no allowed host
(``CommonMiddleware`` would answer 400) and no https (``SecurityMiddleware`` would redirect), and
a probe signs in to nothing. Only GET and HEAD on these exact paths are answered there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import urlsplit

import redis
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from kombu import Connection

from portal.celery import app as celery_app

logger = logging.getLogger(__name__)

# The broker's answer is awaited this long (connect and ping); the database's connect timeout is
# DATABASE_URL's (``?connect_timeout=3``), its query is one round trip.
HEALTH_CHECK_TIMEOUT_SECONDS = 3

OK = "ok"
UNAVAILABLE = "unavailable"


def check_database() -> None:
    """Raise unless the default database answers ``SELECT 1``."""
    connection = connections["default"]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        # A broken connection must not be kept for the next probe or request of this thread.
        connection.close()
        raise


def check_broker(url: str | None = None) -> None:
    """Raise unless the Celery broker answers: a Redis PING, or for another transport kombu's
    connect, within ``HEALTH_CHECK_TIMEOUT_SECONDS``."""
    url = url or celery_app.conf.broker_url
    if urlsplit(url).scheme in ("redis", "rediss"):
        client = redis.Redis.from_url(
            url,
            socket_connect_timeout=HEALTH_CHECK_TIMEOUT_SECONDS,
            socket_timeout=HEALTH_CHECK_TIMEOUT_SECONDS,
        )
        try:
            client.ping()
        finally:
            client.close()
        return
    with Connection(url, connect_timeout=HEALTH_CHECK_TIMEOUT_SECONDS) as connection:
        connection.ensure_connection(max_retries=1, timeout=HEALTH_CHECK_TIMEOUT_SECONDS)


CHECKS: dict[str, Callable[[], None]] = {"database": check_database, "broker": check_broker}


def readiness() -> dict[str, str]:
    """Each check's result: ``ok`` or ``unavailable`` (the reason logged)."""
    results = {}
    for name, check in CHECKS.items():
        try:
            check()
        except Exception as error:
            logger.warning("readiness: the %s is unavailable: %r", name, error)
            results[name] = UNAVAILABLE
        else:
            results[name] = OK
    return results


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": OK})


def readyz(request: HttpRequest) -> HttpResponse:
    results = readiness()
    ready = all(result == OK for result in results.values())
    return JsonResponse(results, status=200 if ready else 503)


PROBES = {"/healthz": healthz, "/readyz": readyz}


class HealthCheckMiddleware:
    """Answers ``/healthz`` and ``/readyz`` before any other middleware sees the request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path_info)
        if probe is not None and request.method in ("GET", "HEAD"):
            response = probe(request)
            response["Cache-Control"] = "no-store"
            return response
        return self.get_response(request)
