"""Sign-in throttling (django-axes, accounts/lockout.py) with real requests through the sign-in
page and the API's token endpoint: repeated failures for a username from an address, or from an
address for any usernames, answer 429 with ``Retry-After`` until the cool-off has passed."""

import datetime
import time

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db

HERE = "192.0.2.10"
ELSEWHERE = "198.51.100.20"


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.PORTAL_LOGIN_ADDRESS_FAILURE_LIMIT = 5
    settings.AXES_COOLOFF_TIME = datetime.timedelta(minutes=15)


def page_sign_in(username, password, address=HERE):
    return Client(REMOTE_ADDR=address).post("/login/", {"username": username, "password": password})


def api_sign_in(username, password, address=HERE):
    return APIClient().post(
        "/api/v1/auth/token/",
        {"username": username, "password": password},
        format="json",
        REMOTE_ADDR=address,
    )


def assert_locked_out(response, seconds=900):
    assert response.status_code == 429
    assert response["Retry-After"] == str(seconds)


def test_sign_in_page_locks_out_at_the_failure_limit(lead):
    answers = [page_sign_in("lena-lead", "wrong") for _ in range(3)]

    assert [a.status_code for a in answers[:2]] == [200, 200]
    assert "Please enter a correct username and password" in answers[0].content.decode()
    assert_locked_out(answers[2])
    assert "Too many failed sign-ins" in answers[2].content.decode()
    assert_locked_out(page_sign_in("lena-lead", "wrong"))


def test_token_endpoint_locks_out_at_the_failure_limit(lead):
    answers = [api_sign_in("lena-lead", "wrong") for _ in range(3)]

    assert [a.status_code for a in answers[:2]] == [400, 400]
    assert_locked_out(answers[2])
    assert "Too many failed sign-ins" in answers[2].json()["detail"]


def test_the_right_password_is_refused_while_locked_out(lead):
    for _ in range(3):
        page_sign_in("lena-lead", "wrong")

    assert_locked_out(page_sign_in("lena-lead", PASSWORD))
    assert_locked_out(api_sign_in("lena-lead", PASSWORD))


def test_page_and_api_failures_count_together(lead):
    page_sign_in("lena-lead", "wrong")
    api_sign_in("lena-lead", "wrong")

    assert_locked_out(page_sign_in("lena-lead", "wrong"))


def test_the_same_user_still_signs_in_from_another_address(lead):
    for _ in range(4):
        page_sign_in("lena-lead", "wrong", address=HERE)

    page = page_sign_in("lena-lead", PASSWORD, address=ELSEWHERE)
    api = api_sign_in("lena-lead", PASSWORD, address=ELSEWHERE)

    assert page.status_code == 302  # signed in, sent on to the home page
    assert api.status_code == 200
    assert api.json()["token"]


def test_one_address_trying_many_usernames_is_locked_out(lead, other_lead):
    for username in ["alice", "bob", "carol", "dave"]:
        assert page_sign_in(username, "wrong").status_code == 200

    assert_locked_out(page_sign_in("erin", "wrong"))
    assert_locked_out(page_sign_in("otto-other-lead", PASSWORD))
    assert page_sign_in("otto-other-lead", PASSWORD, address=ELSEWHERE).status_code == 302


def test_lockout_ends_after_the_cool_off(lead, settings):
    settings.AXES_COOLOFF_TIME = datetime.timedelta(seconds=2)
    for _ in range(3):
        page_sign_in("lena-lead", "wrong")
    assert_locked_out(page_sign_in("lena-lead", PASSWORD), seconds=2)

    time.sleep(2.2)

    assert page_sign_in("lena-lead", PASSWORD).status_code == 302
    assert api_sign_in("lena-lead", PASSWORD).status_code == 200


def test_behind_a_proxy_the_forwarded_address_is_the_clients(lead, settings):
    settings.PORTAL_PROXY_COUNT = 1
    proxy = "10.0.0.1"

    for _ in range(3):
        Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=f"203.0.113.9, {HERE}").post(
            "/login/", {"username": "lena-lead", "password": "wrong"}
        )
    # A client writing its own X-Forwarded-For entry cannot pick the address it is counted as.
    elsewhere = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=f"{HERE}, {ELSEWHERE}").post(
        "/login/", {"username": "lena-lead", "password": PASSWORD}
    )
    here = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=HERE).post(
        "/login/", {"username": "lena-lead", "password": PASSWORD}
    )

    assert elsewhere.status_code == 302
    assert_locked_out(here)
