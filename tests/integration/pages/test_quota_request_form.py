"""The quota request form: a lead files a request; bad input is shown beside its field."""

import datetime

import pytest
from django.utils import timezone

from tenants.models import QuotaRequest
from tests.integration.pages.helpers import field_error_html, get_ok

pytestmark = pytest.mark.django_db

URL = "/teams/vision/requests/new/"


@pytest.fixture
def valid(cluster):
    today = timezone.localdate()
    return {
        "cluster": cluster.pk,
        "gpu_resource": "nvidia.com/gpu",
        "gpus": "4",
        "cpu_cores": "16",
        "memory_gib": "128",
        "starts_on": today.isoformat(),
        "ends_on": (today + datetime.timedelta(days=30)).isoformat(),
        "justification": "Fine-tuning the detector on the new dataset.",
    }


def test_form_starts_today_on_the_first_cluster_with_its_gpu_kinds(
    client_as, lead, cluster, second_cluster
):
    response = get_ok(client_as(lead), URL)
    form = response.context["form"]

    assert form["starts_on"].value() == timezone.localdate()
    assert form["cluster"].value() == cluster.pk
    assert [value for value, _ in form.fields["gpu_resource"].choices] == ["nvidia.com/gpu"]
    html = response.content.decode()
    assert f'value="{timezone.localdate().isoformat()}"' in html
    assert 'type="date"' in html


def test_changing_the_cluster_fetches_that_clusters_gpu_kinds(
    client_as, lead, cluster, second_cluster
):
    response = client_as(lead).get(
        URL, {"cluster": second_cluster.pk}, headers={"HX-Request": "true"}
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="field-gpu_resource"' in html
    assert "nvidia.com/mig-1g.10gb" in html
    assert "<html" not in html
    assert 'value="nvidia.com/gpu"' not in html


@pytest.mark.parametrize("cluster_id", ["abc", "999999", ""])
def test_kinds_fragment_for_an_unknown_cluster_is_not_an_error(
    client_as, lead, cluster, cluster_id
):
    response = client_as(lead).get(URL, {"cluster": cluster_id}, headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert 'id="field-gpu_resource"' in response.content.decode()


def test_cluster_select_asks_htmx_for_the_kinds(client_as, lead, cluster):
    html = get_ok(client_as(lead), URL).content.decode()

    assert f'hx-get="{URL}"' in html
    assert 'hx-target="#field-gpu_resource"' in html


def test_lead_submits_a_request_and_sees_it_pending(client_as, lead, team, valid):
    client = client_as(lead)

    response = client.post(URL, valid, follow=True)

    assert response.redirect_chain == [("/teams/vision/", 302)]
    quota_request = QuotaRequest.objects.get(team=team)
    assert (quota_request.gpus, quota_request.state, quota_request.memory_gib) == (
        4,
        "pending",
        128,
    )
    assert quota_request.requested_by == lead
    html = response.content.decode()
    assert "Requested 4 × nvidia.com/gpu on GPU East" in html
    assert f'id="request-{quota_request.pk}"' in html
    assert "Fine-tuning the detector" in html


def test_open_ended_request_without_cpu_or_memory(client_as, lead, team, valid):
    valid.update(ends_on="", cpu_cores="", memory_gib="")

    response = client_as(lead).post(URL, valid)

    assert response.status_code == 302
    quota_request = QuotaRequest.objects.get(team=team)
    assert quota_request.ends_on is None
    assert quota_request.cpu_cores is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gpus", "0", "Must be a whole number of GPUs, at least 1."),
        ("gpus", "-3", "Must be a whole number of GPUs, at least 1."),
        ("gpus", "5000", "At most 1024 GPUs can be requested at once"),
        ("gpus", "two", "Enter a whole number."),
        ("gpus", "", "This field is required."),
        ("cpu_cores", "-1", "Must be between 0 and 100,000 cores."),
        ("cpu_cores", "200000", "Must be between 0 and 100,000 cores."),
        ("cpu_cores", "1.234", "Ensure that there are no more than 2 decimal places."),
        ("memory_gib", "-8", "Must be between 0 and 1,000,000 GiB."),
        ("memory_gib", "99999999999", "Must be between 0 and 1,000,000 GiB."),
        ("gpu_resource", "amd.com/gpu", "Select a valid choice."),
        ("starts_on", "not-a-date", "Enter a valid date."),
        ("justification", "   ", "This field is required."),
    ],
)
def test_bad_input_is_shown_beside_its_field(client_as, lead, team, valid, field, value, message):
    valid[field] = value

    response = client_as(lead).post(URL, valid)

    assert response.status_code == 200
    assert message in field_error_html(response, f"id_{field}")
    assert 'aria-invalid="true"' in response.content.decode()
    assert not QuotaRequest.objects.exists()


def test_end_before_start_is_shown_beside_the_end_date(client_as, lead, valid):
    start = timezone.localdate() + datetime.timedelta(days=10)
    valid.update(
        starts_on=start.isoformat(), ends_on=(start - datetime.timedelta(days=1)).isoformat()
    )

    response = client_as(lead).post(URL, valid)

    assert f"Must not be before the start date ({start.isoformat()})." in field_error_html(
        response, "id_ends_on"
    )
    assert field_error_html(response, "id_starts_on") == ""


def test_start_in_the_past_is_shown_beside_the_start_date(client_as, lead, valid):
    valid["starts_on"] = (timezone.localdate() - datetime.timedelta(days=1)).isoformat()

    response = client_as(lead).post(URL, valid)

    assert "Must not be in the past" in field_error_html(response, "id_starts_on")


def test_kind_the_chosen_cluster_lacks_names_what_it_offers(
    client_as, lead, valid, cluster, second_cluster
):
    valid["gpu_resource"] = "nvidia.com/mig-1g.10gb"

    response = client_as(lead).post(URL, valid)

    errors = field_error_html(response, "id_gpu_resource")
    assert "Cluster gpu-east has no GPUs of kind &#x27;nvidia.com/mig-1g.10gb&#x27;" in errors
    assert "it offers: nvidia.com/gpu" in errors


def test_unknown_cluster_is_shown_beside_the_cluster(client_as, lead, valid):
    valid["cluster"] = "999999"

    response = client_as(lead).post(URL, valid)

    assert "Select a valid choice" in field_error_html(response, "id_cluster")


def test_archived_team_error_is_shown_at_the_top_of_the_form(client_as, lead, team, valid):
    team.archived_at = timezone.now()
    team.save()

    response = client_as(lead).post(URL, valid)

    assert response.status_code == 200
    assert "Team: Team vision is archived" in response.content.decode()
    assert not QuotaRequest.objects.exists()


def test_submitted_values_are_kept_after_an_error(client_as, lead, valid):
    valid["gpus"] = "0"

    html = client_as(lead).post(URL, valid).content.decode()

    assert "Fine-tuning the detector on the new dataset." in html
    assert 'name="memory_gib" value="128"' in html


def test_form_posts_with_csrf_and_labels_every_field(client_as, lead, cluster):
    html = get_ok(client_as(lead), URL).content.decode()

    assert 'name="csrfmiddlewaretoken"' in html
    for field in (
        "cluster",
        "gpu_resource",
        "gpus",
        "cpu_cores",
        "memory_gib",
        "starts_on",
        "ends_on",
        "justification",
    ):
        assert f'<label for="id_{field}">' in html, field


def test_admin_may_file_a_request_for_a_team(client_as, admin, team, valid):
    response = client_as(admin).post(URL, valid)

    assert response.status_code == 302
    assert QuotaRequest.objects.get(team=team).requested_by == admin


def test_form_says_so_when_no_cluster_offers_gpus(client_as, lead, team):
    html = get_ok(client_as(lead), URL).content.decode()

    assert "No cluster offers GPUs yet" in html


def test_form_does_not_warn_when_a_cluster_offers_gpus(client_as, lead, cluster):
    assert "No cluster offers GPUs yet" not in get_ok(client_as(lead), URL).content.decode()
