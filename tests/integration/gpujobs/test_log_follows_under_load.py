"""Following logs cannot exhaust the web tier: against a real server process (the Dockerfile's
gunicorn with its asgi worker, ONE worker), twenty followed logs stream while pages still
answer at once, and the limits on follows answer 429 with ``Retry-After`` across the server,
counted in the real Redis. (A sync worker would be held by the first follow, and the pages
would wait for it.) The server keeps a pool of fewer database connections than there are
follows: a follow gives its connection back before it streams."""

import queue
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore

from accounts import services as account_services
from tests.integration.conftest import REDIS_TEST_DB
from tests.integration.servers import BEHIND_TLS_PROXY, portal_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

FOLLOWS = 20
PER_USER = 20
TOTAL = 21
# Fewer than the follows: were a follow to hold its request's connection while it streams, the
# fifth would wait out the pool and be answered 503.
DATABASE_POOL = 4
# A page of the portal answers within this while the follows stream (it takes well under a
# second on an idle machine; the bound leaves room for a busy one).
PAGE_ANSWERS_WITHIN = 3.0


@pytest.fixture(autouse=True)
def _services(running_services):
    """The job's worker and watcher."""


@pytest.fixture(scope="module")
def portal(postgres_database, tmp_path_factory):
    broker = settings.CELERY_BROKER_URL
    with portal_server(
        postgres_database,
        tmp_path_factory.mktemp("follows"),
        workers=1,
        # The test's own key: the server then accepts the sessions the test makes.
        DJANGO_SECRET_KEY=settings.SECRET_KEY,
        PORTAL_REDIS_URL=broker.rsplit("/", 1)[0] + f"/{REDIS_TEST_DB}",
        GPUJOBS_LOG_FOLLOWS_PER_USER=str(PER_USER),
        GPUJOBS_LOG_FOLLOWS_TOTAL=str(TOTAL),
        GPUJOBS_LOG_FOLLOW_MAX_SECONDS="120",
        DJANGO_DB_POOL_MAX_SIZE=str(DATABASE_POOL),
        DJANGO_DB_POOL_TIMEOUT="5",
    ) as base:
        yield base


def api_headers(user) -> dict:
    _, secret = account_services.api_token_create(user=user)
    return {**BEHIND_TLS_PROXY, "Authorization": f"Token {secret}"}


def page_headers(user) -> dict:
    """A signed-in browser's headers (a session made as ``Client.force_login`` makes one)."""
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return {**BEHIND_TLS_PROXY, "Cookie": f"{settings.SESSION_COOKIE_NAME}={session.session_key}"}


@dataclass
class Follow:
    """One followed log, read by a thread of its own."""

    status: int | None = None
    retry_after: str | None = None
    lines: queue.Queue = field(default_factory=queue.Queue)
    stop: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def line(self, timeout: float = 30) -> str:
        return self.lines.get(timeout=timeout)


def _read(follow: Follow, url: str, headers: dict) -> None:
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(10, read=150)) as http,
            http.stream("GET", url, headers=headers) as response,
        ):
            follow.status = response.status_code
            follow.retry_after = response.headers.get("Retry-After")
            follow.started.set()
            for line in response.iter_lines():
                follow.lines.put(line)
                if follow.stop.is_set():
                    return  # leaving closes the connection: the server ends the stream
    finally:
        follow.started.set()


class Logs:
    """Follows of one running job's log through the server, and lines its container writes."""

    def __init__(self, base: str, job, devcluster):
        self.url = f"{base}/api/v1/jobs/{job.pk}/logs/?follow=true&tail=1"
        self.job, self.devcluster = job, devcluster
        (self.pod,) = job.pods

    def write(self, line: str) -> None:
        self.devcluster.write_pod_log(self.job.team.slug, self.pod, [line])

    @contextmanager
    def followed(self, headers: dict, count: int = 1):
        """``count`` follows, open (or refused) while the block runs; ended after it."""
        follows = []
        try:
            for _ in range(count):
                follow = Follow()
                follow.thread = threading.Thread(
                    target=_read, args=(follow, self.url, headers), daemon=True
                )
                follow.thread.start()
                assert follow.started.wait(30), "a follow got no answer"
                follows.append(follow)
            yield follows
        finally:
            self.end(follows)

    def end(self, follows: list[Follow]) -> None:
        for follow in follows:
            follow.stop.set()
        self.write("[a line to wake the readers that should stop]")
        for follow in follows:
            follow.thread.join(timeout=30)


@pytest.fixture
def logs(portal, running_job, devcluster, redis_url):
    return Logs(portal, running_job[1], devcluster)


def timed_get(url: str, headers: dict) -> tuple[int, float]:
    started = time.monotonic()
    response = httpx.get(url, headers=headers, timeout=30)
    return response.status_code, time.monotonic() - started


def test_pages_answer_at_once_while_twenty_logs_are_followed(portal, running_job, logs):
    gpu, job = running_job
    browser = page_headers(gpu.member)

    with logs.followed(api_headers(gpu.member), FOLLOWS) as follows:
        assert [f.status for f in follows] == [200] * FOLLOWS
        assert {f.line() for f in follows} == {f"{logs.pod}/main line 50"}  # each one's tail

        answers = [
            timed_get(f"{portal}{url}", browser)
            for url in ["/", f"/jobs/{job.pk}/", "/", f"/jobs/{job.pk}/"]
        ]
        logs.write(f"{logs.pod}/main written while followed")
        newest = {f.line() for f in follows}

    assert [status for status, _ in answers] == [200] * 4
    slowest = max(seconds for _, seconds in answers)
    assert slowest < PAGE_ANSWERS_WITHIN, f"a page took {slowest:.2f} s"
    assert newest == {f"{logs.pod}/main written while followed"}  # every stream is live


def test_follows_beyond_the_limits_answer_429_until_one_ends(running_job, logs):
    gpu, _ = running_job
    member, lead = api_headers(gpu.member), api_headers(gpu.lead)

    with logs.followed(member, PER_USER) as follows:
        with logs.followed(member) as (over_own_limit,):
            pass
        with logs.followed(lead) as (leads_first,), logs.followed(lead) as (over_total,):
            pass
        logs.end(follows[:1])  # one of the member's follows ends: its slot is free again
        deadline = time.monotonic() + 15
        while True:
            with logs.followed(member) as (again,):
                if again.status == 200 or time.monotonic() > deadline:
                    break
            time.sleep(0.5)

    assert over_own_limit.status == 429
    assert over_own_limit.retry_after == "10"
    assert leads_first.status == 200  # another user's first, the portal's 21st
    assert over_total.status == 429
    assert over_total.retry_after == "10"
    assert again.status == 200
