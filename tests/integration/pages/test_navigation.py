"""The main nav (templates/base.html): an admin's admin-only pages sit in an Admin menu and
everyone's reports in a Reports menu, so that the nav fits one line (tests/e2e/test_navigation.py
measures it), and no link is lost on the way; a member's nav has no Admin menu."""

from html.parser import HTMLParser

import pytest
from django.urls import reverse

from tests.integration.pages.helpers import get_ok

pytestmark = pytest.mark.django_db

EVERYONES = ["home", "gpujob-list", "service-list", "session-list"]
REPORTS = ["audit-list", "booking-calendar", "usage-report", "billing-statement"]
ADMIN_WORK = [
    "review-queue",
    "sharing-review",
    "department-list",
    "billing-prices",
    "monitoring-clusters",
]
ACCOUNT = ["api-tokens", "notification-list"]


class MainNav(HTMLParser):
    """The links of the main nav's list, each with the menu (its summary's text) it is in,
    "" for a link in line; and the menus in order."""

    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (menu, href)
        self.menus: list[str] = []
        self._in_nav = self._in_list = self._in_summary = False
        self._menu = ""

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "nav" and attributes.get("aria-label") == "Main":
            self._in_nav = True
        elif self._in_nav and tag == "ul" and "nav-links" in (attributes.get("class") or ""):
            self._in_list = True
        elif self._in_list and tag == "summary":
            self._in_summary = True
            self.menus.append("")
        elif self._in_list and tag == "a":
            self.links.append((self._menu, attributes["href"]))

    def handle_endtag(self, tag):
        if tag == "nav":
            self._in_nav = self._in_list = False
        elif tag == "summary" and self._in_summary:
            self._in_summary = False
            self._menu = self.menus[-1]
        elif tag == "details":
            self._menu = ""

    def handle_data(self, data):
        if self._in_summary:
            self.menus[-1] += data.strip()


def main_nav(client) -> MainNav:
    nav = MainNav()
    nav.feed(get_ok(client, reverse("home")).content.decode())
    return nav


def urls(names: list[str]) -> list[str]:
    return [reverse(name) for name in names]


def test_an_admins_nav_groups_admin_work_and_reports_in_two_menus_and_keeps_every_link(
    client_as, admin
):
    nav = main_nav(client_as(admin))

    assert nav.menus == ["Admin", "Reports"]
    assert nav.links == [
        *[("", url) for url in urls(EVERYONES)],
        *[("Admin", url) for url in urls(ADMIN_WORK)],
        *[("Reports", url) for url in urls(REPORTS)],
        *[("", url) for url in urls(ACCOUNT)],
    ]
    in_line = [href for menu, href in nav.links if not menu]
    assert len(in_line) + len(nav.menus) == 8  # entries on the bar, down from 13


def test_a_members_nav_has_the_reports_menu_but_no_admin_menu_nor_admin_link(client_as, member):
    html = get_ok(client_as(member), reverse("home")).content.decode()
    nav = main_nav(client_as(member))

    assert nav.menus == ["Reports"]
    assert 'data-testid="nav-menu-admin"' not in html
    assert nav.links == [
        *[("", url) for url in urls(EVERYONES)],
        *[("Reports", url) for url in urls(REPORTS)],
        *[("", url) for url in urls(ACCOUNT)],
    ]
    assert not set(urls(ADMIN_WORK)) & {href for _, href in nav.links}


def test_the_menu_of_the_page_shown_is_marked_and_its_link_is_the_current_page(client_as, admin):
    html = get_ok(client_as(admin), reverse("billing-prices")).content.decode()

    admin_menu = html.split('data-testid="nav-menu-admin"')[1].split("</details>")[0]
    reports_menu = html.split('data-testid="nav-menu-reports"')[1].split("</details>")[0]
    assert '<summary class="current">Admin</summary>' in admin_menu
    assert f'<a href="{reverse("billing-prices")}" aria-current="page">Prices</a>' in admin_menu
    assert "<summary>Reports</summary>" in reports_menu
