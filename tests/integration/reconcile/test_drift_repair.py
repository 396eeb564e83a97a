"""The periodic sweep puts back what hands changed on the cluster, and leaves others' additions;
a pass over an unchanged cluster writes nothing."""

import pytest
from kubernetes import client

from clusters.kube import KubeClient
from reconcile import team_pass
from tenants.models import TeamCluster

from .conftest import in_sync, quota_hard, read_or_none, wait_for_gpu_quota

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture
def reconciled_team(celery_worker_process, core, kube_cluster, make_team, approve):
    team = make_team("a")
    approve(team, kube_cluster, gpus=4)
    wait_for_gpu_quota(core, team.slug, "4")
    in_sync(team, kube_cluster)
    return team


def test_a_quota_deleted_by_hand_is_put_back_by_the_next_sweep(reconciled_team, core, beat):
    team = reconciled_team
    core.delete_namespaced_resource_quota("gpu-portal-quota", team.slug)
    assert quota_hard(core, team.slug) is None

    beat(every=2)

    wait_for_gpu_quota(core, team.slug, "4", timeout=90)


def test_a_hand_edit_of_a_portal_field_is_reverted_and_labels_added_by_others_survive(
    reconciled_team, core, beat
):
    team = reconciled_team
    core.patch_namespaced_resource_quota(
        "gpu-portal-quota",
        team.slug,
        {
            "metadata": {"labels": {"finance.example.com/cost-centre": "cc-42"}},
            "spec": {"hard": {"requests.nvidia.com/gpu": "40"}},
        },
    )
    core.patch_namespace(team.slug, {"metadata": {"labels": {"owner": "someone-else"}}})
    assert quota_hard(core, team.slug)["requests.nvidia.com/gpu"] == "40"

    beat(every=2)

    wait_for_gpu_quota(core, team.slug, "4", timeout=90)
    quota = core.read_namespaced_resource_quota("gpu-portal-quota", team.slug)
    assert quota.metadata.labels["finance.example.com/cost-centre"] == "cc-42"
    assert quota.metadata.labels["gpuportal.io/team"] == team.slug
    assert core.read_namespace(team.slug).metadata.labels["owner"] == "someone-else"


def test_a_pass_over_an_unchanged_cluster_makes_no_write_calls(
    reconciled_team, kube_cluster, portal_kubeconfig
):
    kube = KubeClient.for_cluster(kube_cluster)

    outcome = team_pass.reconcile_team_on_cluster(
        team_id=reconciled_team.pk, cluster_id=kube_cluster.pk, kube=kube
    )

    assert outcome.writes == 0
    assert outcome.applied == outcome.deleted == []
    # The namespace, the quota, the limit range and the network policy by name, the bindings by
    # the portal's labels.
    assert outcome.reads == 5
    state = TeamCluster.objects.get(team=reconciled_team, cluster=kube_cluster)
    assert (state.status, state.last_write_count) == (TeamCluster.Status.IN_SYNC, 0)


def test_objects_without_the_portal_label_are_never_touched(reconciled_team, core, kube_cluster):
    team = reconciled_team
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    theirs = {
        "metadata": {"name": "their-binding"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "x"}],
    }
    rbac.create_namespaced_role_binding(team.slug, theirs)
    core.create_namespaced_config_map(team.slug, {"metadata": {"name": "their-config"}})

    team_pass.reconcile_team_on_cluster(team_id=team.pk, cluster_id=kube_cluster.pk)

    assert read_or_none(rbac.read_namespaced_role_binding, "their-binding", team.slug)
    assert read_or_none(core.read_namespaced_config_map, "their-config", team.slug)
