"""The pages' own parameters out of range: a page number or a log tail that no form shows is a
400 (a page past the end a 404), never quietly another page; parameters that a form shows are
errors on that form (tests in each page's file)."""

import pytest

from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/jobs/", "/audit/"])
@pytest.mark.parametrize("page", ["0", "-1", "abc", "1.5", "99999999999999999999"])
def test_a_list_page_refuses_a_page_number_out_of_range(client_as, lead, url, page):
    response = client_as(lead).get(url, {"page": page})

    assert response.status_code == 400


@pytest.mark.parametrize("url", ["/jobs/", "/audit/"])
def test_a_list_page_past_the_end_is_not_found(client_as, lead, url):
    assert client_as(lead).get(url, {"page": "2"}).status_code == 404
    assert client_as(lead).get(url, {"page": "1"}).status_code == 200


@pytest.mark.parametrize("tail", ["-1", "0", "99", "5001", "abc", "99999999999999999999"])
@pytest.mark.parametrize("panel", ["", "logs/"])
def test_the_job_page_refuses_a_log_tail_it_does_not_offer(
    client_as, lead, team, cluster, tail, panel
):
    job = factories.GpuJobFactory(team=team, cluster=cluster, submitted_by=lead)

    response = client_as(lead).get(f"/jobs/{job.pk}/{panel}", {"tail": tail})

    assert response.status_code == 400


def test_the_job_page_takes_a_tail_it_offers(client_as, lead, team, cluster):
    job = factories.GpuJobFactory(team=team, cluster=cluster, submitted_by=lead)

    response = client_as(lead).get(f"/jobs/{job.pk}/", {"tail": "500"})

    assert response.status_code == 200
    assert response.context["tail"] == 500


def test_marking_notifications_read_ignores_ids_beyond_any_row(client_as, lead, team):
    note = factories.NotificationFactory(user=lead, team=team)

    response = client_as(lead).post(
        "/monitoring/notifications/read/", {"id": ["99999999999999999999", str(note.pk)]}
    )

    assert response.status_code == 302
    note.refresh_from_db()
    assert note.read_at is not None


@pytest.mark.parametrize("url", ["/jobs/new/", "/services/new/"])
@pytest.mark.parametrize("raw", ["²", "٣", "99999999999999999999", "abc", ""])
def test_the_model_select_of_a_cluster_that_is_no_id_is_the_empty_select(
    client_as, lead, team, cluster, url, raw
):
    response = client_as(lead).get(url, {"cluster": raw}, headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert cluster.name not in response.content.decode()
