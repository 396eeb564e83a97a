"""The main nav in a real browser at a common laptop size (1366 x 768): an admin's nav (its
admin-only pages in an Admin menu, the reports in a Reports menu) and a member's fit one line;
each menu opens from the keyboard (Enter on its summary) and every page in it is reached from
there."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LAPTOP = {"width": 1366, "height": 768}

# Per menu: each link's name and the heading of the page it opens.
MENUS = {
    "nav-menu-admin": [
        ("Review queue", "Review queue"),
        ("Departments", "Departments"),
        ("Prices", "Prices"),
        ("Clusters", "Clusters"),
    ],
    "nav-menu-reports": [
        ("Audit trail", "Audit trail"),
        ("Booking calendar", "Booking calendar"),
        ("GPU usage", "GPU usage report"),
        ("Statements", "GPU statement"),
    ],
}

# The nav's items (the brand, each entry of the list, the signed-in user and sign-out button),
# each with its box; they share one line when every box overlaps every other vertically.
NAV_ITEMS = """() => {
  const nav = document.querySelector('nav[aria-label="Main"]');
  const items = [
    nav.querySelector(".brand"),
    ...nav.querySelectorAll(":scope > ul.nav-links > li"),
    nav.querySelector(".nav-user"),
  ];
  return items.map((item) => {
    const box = item.getBoundingClientRect();
    return {text: item.innerText.split("\\n")[0], top: box.top, bottom: box.bottom};
  });
}"""


def assert_one_line(page) -> None:
    items = page.evaluate(NAV_ITEMS)
    lowest_top = max(item["top"] for item in items)
    highest_bottom = min(item["bottom"] for item in items)
    assert lowest_top < highest_bottom, f"the nav wraps: {items}"


def test_an_admins_nav_fits_one_line_at_1366_px(sign_in, admin, screenshot):
    page = sign_in(admin)
    page.set_viewport_size(LAPTOP)

    assert_one_line(page)
    screenshot(page, "nav-admin")
    # An open menu drops over the page: the nav keeps its line and its height.
    height = page.locator("header.topbar").bounding_box()["height"]
    page.get_by_test_id("nav-menu-admin").locator("summary").click()
    expect(page.get_by_role("link", name="Review queue", exact=True)).to_be_visible()
    assert_one_line(page)
    assert page.locator("header.topbar").bounding_box()["height"] == height
    screenshot(page, "nav-admin-menu-open")


def test_every_page_in_the_admins_menus_opens_from_the_keyboard(sign_in, admin):
    page = sign_in(admin)
    page.set_viewport_size(LAPTOP)

    for menu_id, entries in MENUS.items():
        for name, heading in entries:
            menu = page.get_by_test_id(menu_id)
            link = menu.get_by_role("link", name=name, exact=True)
            expect(link).to_be_hidden()

            menu.locator("summary").focus()
            page.keyboard.press("Enter")
            expect(menu).to_have_attribute("open", "")
            expect(link).to_be_visible()
            link.focus()
            page.keyboard.press("Enter")

            expect(page.get_by_role("heading", level=1)).to_have_text(heading)
            current = page.get_by_test_id(menu_id).get_by_role(
                "link", name=name, exact=True, include_hidden=True
            )
            expect(current).to_have_attribute("aria-current", "page")


def test_the_first_link_of_an_open_menu_is_the_next_tab_stop(sign_in, admin):
    page = sign_in(admin)
    page.set_viewport_size(LAPTOP)
    reports = page.get_by_test_id("nav-menu-reports")

    reports.locator("summary").focus()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")

    expect(reports.get_by_role("link", name="Audit trail")).to_be_focused()
    # Opening the other menu closes this one (one named group of disclosures).
    admin_menu = page.get_by_test_id("nav-menu-admin")
    admin_menu.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(admin_menu).to_have_attribute("open", "")
    expect(reports).not_to_have_attribute("open", "")


def test_a_members_nav_fits_one_line_at_1366_px_and_opens_the_reports(sign_in, member):
    page = sign_in(member)
    page.set_viewport_size(LAPTOP)

    assert_one_line(page)
    expect(page.get_by_test_id("nav-menu-admin")).to_have_count(0)
    reports = page.get_by_test_id("nav-menu-reports")
    reports.locator("summary").focus()
    page.keyboard.press("Enter")
    reports.get_by_role("link", name="GPU usage").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("GPU usage report")
