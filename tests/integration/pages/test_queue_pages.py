"""The pages of Kueue mode: quota per GPU model in the request form and the review queue, a
team's queue policy on its page (set by admins), and a cluster's quota mode."""

import pytest
from django.utils import timezone

from clusters.models import Cluster
from tenants.models import AuditEvent, QuotaRequest, TeamCluster, TeamQueuePolicy
from tests import factories
from tests.integration.pages.helpers import (
    field_error_html,
    get_ok,
    messages_text,
    queueing_form,
)

pytestmark = pytest.mark.django_db

A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"
FORM = "/teams/vision/requests/new/"


@pytest.fixture
def models(cluster):
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=A100, allocatable=12)
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=H100, allocatable=4)


@pytest.fixture
def valid(cluster):
    return {
        "cluster": cluster.pk,
        "gpu_resource": "nvidia.com/gpu",
        "gpu_model": A100,
        "gpus": "4",
        "starts_on": timezone.localdate().isoformat(),
        "justification": "Fine-tuning the detector on the new dataset.",
    }


# --- the request form --------------------------------------------------------------------------


def test_the_form_offers_any_model_and_the_clusters_models(client_as, lead, models):
    form = get_ok(client_as(lead), FORM).context["form"]

    assert form.fields["gpu_model"].choices == [
        ("", "Any model"),
        (A100, f"{A100} (12 GPUs)"),
        (H100, f"{H100} (4 GPUs)"),
    ]


def test_changing_the_cluster_also_swaps_in_that_clusters_models(
    client_as, lead, models, second_cluster
):
    factories.GpuModelCapacityFactory(
        cluster=second_cluster, resource_name="nvidia.com/mig-1g.10gb", gpu_model="A100 MIG"
    )

    response = client_as(lead).get(
        FORM, {"cluster": second_cluster.pk}, headers={"HX-Request": "true"}
    )

    html = response.content.decode()
    assert 'id="field-gpu_model" hx-swap-oob="true"' in html
    assert "A100 MIG" in html
    assert H100 not in html


def test_a_lead_asks_for_a100s(client_as, lead, models, valid):
    response = client_as(lead).post(FORM, valid, follow=True)

    assert response.redirect_chain
    assert QuotaRequest.objects.get().gpu_model == A100
    assert f"Requested 4 × {A100}" in messages_text(response)[0]


def test_a_model_the_chosen_cluster_lacks_is_shown_beside_the_model_field(
    client_as, lead, models, second_cluster, valid
):
    factories.GpuModelCapacityFactory(cluster=second_cluster, gpu_model="NVIDIA-L4")
    valid["gpu_model"] = "NVIDIA-L4"

    response = client_as(lead).post(FORM, valid)

    assert response.status_code == 200
    assert "No node of cluster gpu-east has GPU model" in field_error_html(response, "id_gpu_model")
    assert not QuotaRequest.objects.exists()


# --- the review queue --------------------------------------------------------------------------


def test_the_review_queue_shows_each_models_capacity_granted_and_free(
    client_as, admin, lead, other_lead, team, other_team, cluster, models, make_grant, make_request
):
    make_grant(other_lead, other_team, gpus=8, gpu_model=A100)
    make_request(lead, team, gpus=6, gpu_model=A100)

    html = get_ok(client_as(admin), "/review/").content.decode()

    assert 'data-testid="model-capacity"' in html
    assert f'data-model="{A100}"' in html
    assert "-2 NVIDIA-A100-SXM4-80GB left if approved: grant fewer" in html
    assert f"asks for 6 × {A100}" in html


# --- a team's queue policy ---------------------------------------------------------------------


@pytest.fixture
def on_cluster(team, cluster):
    return factories.TeamClusterFactory(team=team, cluster=cluster, status="in_sync")


def policy_url(cluster):
    return f"/teams/vision/clusters/{cluster.name}/queue-policy/"


def test_members_see_the_policy_and_only_admins_get_the_form(
    client_as, member, admin, cluster, team, on_cluster
):
    factories.TeamQueuePolicyFactory(team=team, cluster=cluster, borrowing_limit=3)

    as_member = get_ok(client_as(member), "/teams/vision/").content.decode()
    as_admin = get_ok(client_as(admin), "/teams/vision/").content.decode()

    assert "3 GPUs per model" in as_member
    assert policy_url(cluster) not in as_member
    assert policy_url(cluster) in as_admin


def test_an_admin_sets_the_policy_from_the_team_page(client_as, admin, cluster, team, on_cluster):
    prefix = f"policy-{cluster.pk}"
    body = {
        f"{prefix}-borrowing_limit": "2",
        f"{prefix}-lending_limit": "",
        f"{prefix}-fair_sharing_weight": "1.5",
    }

    response = client_as(admin).post(policy_url(cluster), body, follow=True)

    assert response.redirect_chain
    policy = TeamQueuePolicy.objects.get(team=team, cluster=cluster)
    assert (policy.borrowing_limit, policy.lending_limit) == (2, None)
    assert str(policy.fair_sharing_weight) == "1.500"
    assert AuditEvent.objects.filter(action="team_queue_policy.set").count() == 1
    assert TeamCluster.objects.get(team=team, cluster=cluster).status == "pending"


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("borrowing_limit", "-1", "0 or more"),
        ("lending_limit", "99", "at most the 16 GPUs"),
        ("fair_sharing_weight", "0", "above 0"),
    ],
)
def test_a_bad_policy_is_shown_beside_its_field(
    client_as, admin, cluster, team, on_cluster, field, value, says
):
    prefix = f"policy-{cluster.pk}"
    body = {f"{prefix}-fair_sharing_weight": "1", f"{prefix}-{field}": value}

    response = client_as(admin).post(policy_url(cluster), body)

    assert response.status_code == 200
    assert says in field_error_html(response, f"id_{prefix}-{field}")
    assert not TeamQueuePolicy.objects.exists()


def test_a_lead_may_not_set_the_policy(client_as, lead, cluster, team, on_cluster):
    response = client_as(lead).post(
        policy_url(cluster), {f"policy-{cluster.pk}-fair_sharing_weight": "5"}
    )

    assert response.status_code == 403
    assert not TeamQueuePolicy.objects.exists()


# --- a cluster's quota mode --------------------------------------------------------------------


def test_an_admin_switches_the_cluster_to_kueue_and_back(client_as, admin, cluster, on_cluster):
    client = client_as(admin)
    url = f"/clusters/{cluster.name}/queueing/"
    page = get_ok(client, url).content.decode()
    assert "Quota only (ResourceQuota)" in page

    switched = client.post(url, queueing_form("kueue"), follow=True)

    assert Cluster.objects.get(pk=cluster.pk).quota_mode == "kueue"
    assert "every team on it is being moved" in messages_text(switched)[0]
    assert TeamCluster.objects.get(pk=on_cluster.pk).status == "pending"
    client.post(url, queueing_form("quota"))
    assert Cluster.objects.get(pk=cluster.pk).quota_mode == "quota"
    assert AuditEvent.objects.filter(action="cluster.quota_mode_changed").count() == 2


def test_an_unknown_mode_is_a_form_error(client_as, admin, cluster):
    response = client_as(admin).post(f"/clusters/{cluster.name}/queueing/", queueing_form("x"))

    assert response.status_code == 200
    assert field_error_html(response, "id_quota_mode")
    assert Cluster.objects.get(pk=cluster.pk).quota_mode == "quota"


@pytest.mark.parametrize("user_fixture", ["lead", "member"])
def test_only_admins_see_or_switch_the_mode(client_as, request, cluster, user_fixture):
    client = client_as(request.getfixturevalue(user_fixture))

    assert client.get(f"/clusters/{cluster.name}/queueing/").status_code == 403
    assert (
        client.post(f"/clusters/{cluster.name}/queueing/", queueing_form("kueue")).status_code
        == 403
    )
    assert Cluster.objects.get(pk=cluster.pk).quota_mode == "quota"


def test_the_django_admin_shows_the_mode_and_models_but_does_not_switch_it(client_as, cluster):
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=A100, allocatable=12)
    superuser = factories.AdminFactory(username="root-admin", is_superuser=True)
    client = client_as(superuser)
    url = f"/django-admin/clusters/cluster/{cluster.pk}/change/"

    page = get_ok(client, url).content.decode()

    assert A100 in page
    assert 'name="quota_mode"' not in page
