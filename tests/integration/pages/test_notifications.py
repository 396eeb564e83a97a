"""Notifications: each user reads their own, newest first, through the API and the page, with
the unread count in the navigation; marking them read (all, or some by id) through the page or
the API reaches only the user's own unread ones."""

import datetime

import pytest
from django.utils import timezone

from monitoring.models import Notification
from tests import factories

pytestmark = pytest.mark.django_db

API = "/api/v1/notifications/"
PAGE = "/monitoring/notifications/"


def notify(user, team, subject, *, minutes_ago=0, read=False):
    note = factories.NotificationFactory(
        user=user, team=team, subject=subject, read_at=timezone.now() if read else None
    )
    created = timezone.now() - datetime.timedelta(minutes=minutes_ago)
    Notification.objects.filter(pk=note.pk).update(created_at=created)
    return note


@pytest.fixture
def inbox(lead, other_lead, team, other_team):
    """Three notifications of the lead (the oldest read), one of another team's lead."""
    return {
        "old": notify(lead, team, "GPUs idle in pod-old", minutes_ago=30, read=True),
        "middle": notify(lead, team, "GPUs idle in pod-middle", minutes_ago=20),
        "new": notify(lead, team, "GPUs idle in pod-new", minutes_ago=10),
        "theirs": notify(other_lead, other_team, "GPUs idle in pod-theirs", minutes_ago=5),
    }


def unread(user) -> set[str]:
    return set(
        Notification.objects.filter(user=user, read_at__isnull=True).values_list(
            "subject", flat=True
        )
    )


# --- reading -----------------------------------------------------------------------------------


def test_the_api_lists_the_users_own_notifications_newest_first(api, lead, inbox):
    response = api.as_user(lead).get(API)

    assert response.status_code == 200
    rows = response.data["results"]
    assert [row["id"] for row in rows] == [inbox[k].pk for k in ("new", "middle", "old")]
    assert rows[0]["team"] == "vision"
    assert rows[0]["kind"] == Notification.Kind.IDLE
    assert rows[0]["read_at"] is None
    assert rows[2]["read_at"] is not None


def test_the_api_asks_for_credentials(api, inbox):
    assert api.get(API).status_code in (401, 403)


def test_the_page_lists_them_and_the_navigation_counts_the_unread(client_as, lead, inbox):
    response = client_as(lead).get(PAGE)

    assert response.status_code == 200
    html = response.content.decode()
    assert [n.pk for n in response.context["notifications"]] == [
        inbox[k].pk for k in ("new", "middle", "old")
    ]
    assert "pod-theirs" not in html
    assert 'aria-label="2 unread"' in html
    assert html.count('class="event unread"') == 2
    assert "Mark all read" in html


def test_a_user_without_notifications_is_told_so(client_as, member, inbox):
    html = client_as(member).get(PAGE).content.decode()

    assert "Nothing yet." in html
    assert "unread" not in html


# --- marking read on the page ------------------------------------------------------------------


def test_mark_all_read_on_the_page_reads_only_the_users_own(client_as, lead, other_lead, inbox):
    page = client_as(lead)

    response = page.post(f"{PAGE}read/")

    assert response.status_code == 302
    assert response["Location"] == PAGE
    assert unread(lead) == set()
    assert unread(other_lead) == {"GPUs idle in pod-theirs"}
    html = page.get(PAGE).content.decode()
    assert "unread" not in html
    assert "Mark all read" not in html


def test_marking_some_by_id_on_the_page_leaves_the_others_and_other_users_alone(
    client_as, lead, other_lead, inbox
):
    client_as(lead).post(f"{PAGE}read/", {"id": [inbox["middle"].pk, inbox["theirs"].pk]})

    assert unread(lead) == {"GPUs idle in pod-new"}
    assert unread(other_lead) == {"GPUs idle in pod-theirs"}


def test_an_id_that_is_not_a_number_marks_nothing_read(client_as, lead, inbox):
    response = client_as(lead).post(f"{PAGE}read/", {"id": ["all", "1; DROP", "²", "9" * 30]})

    assert response.status_code == 302
    assert unread(lead) == {"GPUs idle in pod-middle", "GPUs idle in pod-new"}


def test_reading_keeps_the_time_a_notification_was_first_read(client_as, lead, inbox):
    first_read = Notification.objects.get(pk=inbox["old"].pk).read_at

    client_as(lead).post(f"{PAGE}read/")

    assert Notification.objects.get(pk=inbox["old"].pk).read_at == first_read


def test_marking_read_is_a_post(client_as, lead, inbox):
    assert client_as(lead).get(f"{PAGE}read/").status_code == 405
    assert unread(lead) == {"GPUs idle in pod-middle", "GPUs idle in pod-new"}


# --- marking read through the API --------------------------------------------------------------


def test_the_api_marks_all_read_and_says_how_many(api, lead, other_lead, inbox):
    response = api.as_user(lead).post(f"{API}read/", {})

    assert response.status_code == 200
    assert response.data == {"marked": 2}
    assert unread(lead) == set()
    assert unread(other_lead) == {"GPUs idle in pod-theirs"}
    assert all(row["read_at"] for row in api.get(API).data["results"])


def test_the_api_marks_some_by_id_and_never_another_users(api, lead, other_lead, inbox):
    response = api.as_user(lead).post(
        f"{API}read/", {"ids": [inbox["new"].pk, inbox["theirs"].pk, inbox["old"].pk]}
    )

    assert response.data == {"marked": 1}
    assert unread(lead) == {"GPUs idle in pod-middle"}
    assert unread(other_lead) == {"GPUs idle in pod-theirs"}


@pytest.mark.parametrize(
    "ids", [[], "all", ["one"], [0], [-3], [1.5], [None], [10**30]], ids=lambda v: repr(v)
)
def test_bad_ids_are_a_400_naming_ids_and_mark_nothing(api, lead, inbox, ids):
    response = api.as_user(lead).post(f"{API}read/", {"ids": ids})

    assert response.status_code == 400
    assert list(response.data) == ["ids"]
    assert unread(lead) == {"GPUs idle in pod-middle", "GPUs idle in pod-new"}
