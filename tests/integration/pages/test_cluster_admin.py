"""The Django admin's cluster form: a DCGM exporter pin that is not a PromQL label matcher list
is a form error beside the field, and nothing is saved."""

import pytest

from tests import factories
from tests.integration.pages.helpers import cluster_change_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db):
    return factories.AdminFactory(username="root-admin", is_superuser=True)


def test_a_pin_that_is_not_a_label_matcher_list_is_a_form_error(client_as, superuser, cluster):
    url = f"/django-admin/clusters/cluster/{cluster.pk}/change/"

    response = client_as(superuser).post(
        url, cluster_change_form(cluster, dcgm_exporter_selector="job=dcgm-exporter")
    )

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "Not a PromQL label matcher near" in errors["dcgm_exporter_selector"][0]
    cluster.refresh_from_db()
    assert cluster.dcgm_exporter_selector == 'job="dcgm-exporter"'


def test_a_label_matcher_list_is_saved(client_as, superuser, cluster):
    url = f"/django-admin/clusters/cluster/{cluster.pk}/change/"
    pin = 'job="nvidia-dcgm-exporter", namespace="gpu-operator"'

    response = client_as(superuser).post(
        url, cluster_change_form(cluster, dcgm_exporter_selector=pin)
    )

    assert response.status_code == 302, response.context["adminform"].form.errors
    cluster.refresh_from_db()
    assert cluster.dcgm_exporter_selector == pin
