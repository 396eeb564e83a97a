"""The Django admin's cluster form: a DCGM exporter pin that is not a PromQL label matcher list
is a form error beside the field, and nothing is saved."""

import pytest
from django.forms.models import model_to_dict

from tests import factories

pytestmark = pytest.mark.django_db


def change_form_data(cluster, **changes) -> dict:
    data = {
        key: value
        for key, value in model_to_dict(cluster).items()
        if key not in ("id", "gpu_node_selector", "allowed_registries") and value is not None
    }
    data["gpu_node_selector"] = '{"hardware-type": "gpu"}'
    data["allowed_registries"] = "[]"
    for inline in ("gpu_capacities", "gpu_model_capacities"):
        data.update(
            {
                f"{inline}-TOTAL_FORMS": "0",
                f"{inline}-INITIAL_FORMS": "0",
                f"{inline}-MIN_NUM_FORMS": "0",
                f"{inline}-MAX_NUM_FORMS": "1000",
            }
        )
    data.update(changes)
    return data


@pytest.fixture
def superuser(db):
    return factories.AdminFactory(username="root-admin", is_superuser=True)


def test_a_pin_that_is_not_a_label_matcher_list_is_a_form_error(client_as, superuser, cluster):
    url = f"/django-admin/clusters/cluster/{cluster.pk}/change/"

    response = client_as(superuser).post(
        url, change_form_data(cluster, dcgm_exporter_selector="job=dcgm-exporter")
    )

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "Not a PromQL label matcher near" in errors["dcgm_exporter_selector"][0]
    cluster.refresh_from_db()
    assert cluster.dcgm_exporter_selector == 'job="dcgm-exporter"'


def test_a_label_matcher_list_is_saved(client_as, superuser, cluster):
    url = f"/django-admin/clusters/cluster/{cluster.pk}/change/"
    pin = 'job="nvidia-dcgm-exporter", namespace="gpu-operator"'

    response = client_as(superuser).post(url, change_form_data(cluster, dcgm_exporter_selector=pin))

    assert response.status_code == 302, response.context["adminform"].form.errors
    cluster.refresh_from_db()
    assert cluster.dcgm_exporter_selector == pin
