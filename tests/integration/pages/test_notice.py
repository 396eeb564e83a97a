"""The notice of ``PORTAL_NOTICE_FILE`` (portal/notice.py, templates/_notice.html): its text is
shown at the top of every page, signed in or not, as plain text; it comes and goes with the
file, without a restart; no setting, no file or an empty file show none."""

import re
from html import unescape

import pytest
from django.urls import reverse

from portal.notice import NOTICE_MAX_CHARS
from tests.integration.pages.helpers import get_ok

pytestmark = pytest.mark.django_db

BUILDING = (
    "The local GPU cluster is being built: compiling Kubernetes (part 3 of 5), 6 minutes so "
    "far. Until it is up, reconciles, jobs and charts wait; they catch up on their own."
)


def notices(response) -> list[str]:
    """The text of each notice the page shows (as the browser reads it: entities undone)."""
    html = response.content.decode()
    found = re.findall(r'<p [^>]*data-testid="portal-notice"[^>]*>(.*?)</p>', html, re.S)
    return [unescape(text) for text in found]


@pytest.fixture
def notice_file(tmp_path, settings):
    path = tmp_path / "notice.txt"
    settings.PORTAL_NOTICE_FILE = str(path)
    return path


def test_the_notice_shows_on_every_page_signed_in_or_not(notice_file, client, client_as, member):
    notice_file.write_text(BUILDING + "\n")
    signed_in = client_as(member)

    for url in (reverse("home"), reverse("gpujob-list"), reverse("notification-list")):
        assert notices(get_ok(signed_in, url)) == [BUILDING], url
    assert notices(get_ok(client, reverse("login"))) == [BUILDING]


def test_the_notice_is_plain_text(notice_file, client_as, member):
    notice_file.write_text('Built <script>alert("x")</script> & <b>done</b>')

    response = get_ok(client_as(member), reverse("home"))

    html = response.content.decode()
    assert "<script>alert" not in html
    assert "<b>done</b>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;done&lt;/b&gt;" in html
    assert notices(response) == ['Built <script>alert("x")</script> & <b>done</b>']


def test_the_notice_follows_the_file_without_a_restart(notice_file, client_as, member):
    client = client_as(member)
    assert notices(get_ok(client, reverse("home"))) == []

    notice_file.write_text("First step.")
    assert notices(get_ok(client, reverse("home"))) == ["First step."]
    notice_file.write_text("Second step.")
    assert notices(get_ok(client, reverse("home"))) == ["Second step."]
    notice_file.unlink()
    assert notices(get_ok(client, reverse("home"))) == []


@pytest.mark.parametrize("content", ["", "  \n\t\n"])
def test_an_empty_notice_file_shows_no_notice(notice_file, client_as, member, content):
    notice_file.write_text(content)

    assert notices(get_ok(client_as(member), reverse("home"))) == []


def test_no_setting_no_notice(settings, tmp_path, client_as, member):
    (tmp_path / "notice.txt").write_text(BUILDING)
    settings.PORTAL_NOTICE_FILE = ""

    response = get_ok(client_as(member), reverse("home"))

    assert notices(response) == []
    assert 'data-testid="portal-notice"' not in response.content.decode()


def test_a_notice_file_that_cannot_be_read_shows_no_notice(settings, tmp_path, client_as, member):
    settings.PORTAL_NOTICE_FILE = str(tmp_path)  # a directory

    assert notices(get_ok(client_as(member), reverse("home"))) == []


def test_a_long_notice_is_cut_and_its_lines_run_together(notice_file, client_as, member):
    notice_file.write_text("line one\nline two\n" + "x" * (NOTICE_MAX_CHARS * 10))

    (shown,) = notices(get_ok(client_as(member), reverse("home")))

    assert shown.startswith("line one line two xxx")
    assert len(shown) == NOTICE_MAX_CHARS
    assert shown.endswith("…")
