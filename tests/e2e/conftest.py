"""A real headless browser (Debian's chromium, driven by Playwright's sync API) against
pytest-django's live server.

One browser per session; each ``new_page()`` gets its own context (its own cookies), so a lead
and an admin can be signed in side by side. Any console error or uncaught page error fails the
test unless the test said it expects it (``console.expect(...)``, e.g. a deliberate 404). Any
Content-Security-Policy violation on any page (a ``securitypolicyviolation`` event: an inline
script or style, an eval, a resource from elsewhere) fails the test, always.
"""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.factories import PASSWORD

# Playwright's sync API runs an event loop in this thread; Django would otherwise refuse the
# ORM calls the tests make to set up data.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
# The machine is shared and may be busy: generous, but bounded.
ACTION_TIMEOUT_MS = 30_000
NAVIGATION_TIMEOUT_MS = 60_000

expect.set_options(timeout=ACTION_TIMEOUT_MS)


@pytest.fixture(scope="session")
def browser() -> Browser:
    if not Path(CHROMIUM).exists():
        # Only the fast loop leaves the browser out (by marker); the full suite needs it.
        pytest.fail(
            f"no chromium at {CHROMIUM}: install Debian's chromium (scripts/bootstrap.sh does) or "
            "point E2E_CHROMIUM at one",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=120_000
        )
        yield browser
        browser.close()


# Runs in every frame before the page's own scripts (Playwright injects it past the CSP) and
# reports each violation of the page's Content-Security-Policy as it happens.
CSP_VIOLATION_LISTENER = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.__reportCspViolation([
    event.effectiveDirective, event.blockedURI, event.sourceFile, event.lineNumber, event.sample,
  ]);
});
"""


class Console:
    """Console errors, uncaught exceptions and CSP violations seen by every page of one test."""

    def __init__(self):
        self.errors: list[str] = []
        self.expected: list[re.Pattern] = []
        self.csp_violations: list[str] = []

    def record(self, where: str, text: str) -> None:
        self.errors.append(f"{where}: {text}")

    def record_csp_violation(self, where: str, violation: list) -> None:
        directive, blocked, source, line, sample = violation
        self.csp_violations.append(
            f"{where}: CSP {directive} refused {blocked or 'inline'} "
            f"(at {source}:{line}{f', {sample!r}' if sample else ''})"
        )

    def expect(self, pattern: str) -> None:
        """Allow errors matching the pattern (say, the 404 a test opens on purpose)."""
        self.expected.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        """Errors no test expected, and every CSP violation (no test may expect one)."""
        errors = [e for e in self.errors if not any(p.search(e) for p in self.expected)]
        return errors + self.csp_violations


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def new_page(browser, live_server, console, transactional_db):
    """``new_page()``: a page in a fresh browser context pointed at the live server."""
    contexts = []

    def make() -> Page:
        context = browser.new_context(base_url=live_server.url, locale="en-US")
        context.set_default_timeout(ACTION_TIMEOUT_MS)
        context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
        contexts.append(context)
        context.expose_binding(
            "__reportCspViolation",
            lambda source, violation: console.record_csp_violation(source["page"].url, violation),
        )
        context.add_init_script(CSP_VIOLATION_LISTENER)
        page = context.new_page()

        def on_console(message) -> None:
            if message.type == "error":
                console.record(page.url, f"{message.text} ({message.location.get('url')})")

        page.on("console", on_console)
        page.on("pageerror", lambda error: console.record(page.url, f"uncaught {error}"))
        return page

    yield make
    for context in contexts:
        for page in context.pages:
            # A round trip to each page: the violations it reported before this are recorded.
            page.evaluate("0")
        context.close()
    unexpected = console.unexpected()
    if unexpected:
        pytest.fail(
            "browser console errors or CSP violations:\n" + "\n".join(unexpected), pytrace=False
        )


@pytest.fixture
def sign_in(new_page):
    """``sign_in(user)``: a new page signed in as that user through the login form."""

    def login(user) -> Page:
        page = new_page()
        page.goto("/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_test_id("username")).to_have_text(user.username)
        return page

    return login


@pytest.fixture
def screenshot():
    """``screenshot(page, name)``: saved as ``<name>.png`` under $E2E_SCREENSHOT_DIR when it is
    set. ``make docs-screenshots`` sets it to docs/screenshots/, whose pictures the docs show
    (tests/unit/test_docs.py holds the docs to the names taken here)."""
    directory = os.environ.get("E2E_SCREENSHOT_DIR")

    def take(page: Page, name: str) -> None:
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(directory) / f"{name}.png"), full_page=True)

    return take
