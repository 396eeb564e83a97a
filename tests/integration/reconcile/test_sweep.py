"""The sweep over a cluster's teams (``reconcile.sweep``): one list per kind finds the
teams with nothing to do, which cost no request of their own and no write; the others get the
full pass, batched and side by side, with every check of a team's own pass."""

import pytest
from django.utils import timezone
from kubernetes import client

from clusters.kube import KubeClient
from reconcile import desired_state
from reconcile import sweep as reconcile_sweep
from reconcile.namespaces import NamespaceNotOwned
from tenants.models import TeamCluster
from tests import factories

from .conftest import quota_hard, read_or_none

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture
def teams(kube_cluster, make_team):
    """Three teams with a lead, a member and a grant each, on the cluster's books."""
    made = []
    for name, gpus in (("a", 1), ("b", 2), ("c", 3)):
        team = make_team(name)
        for role in ("lead", "member"):
            factories.MembershipFactory(
                team=team, role=role, user=factories.UserFactory(username=f"{role}-{team.slug}")
            )
        factories.QuotaGrantFactory(
            request__team=team,
            request__cluster=kube_cluster,
            request__gpus=gpus,
            request__starts_on=timezone.localdate(),
        )
        factories.TeamClusterFactory(team=team, cluster=kube_cluster)
        made.append(team)
    return made


def sweep(cluster, teams, **kwargs) -> reconcile_sweep.SweepOutcome:
    return reconcile_sweep.reconcile_cluster_teams(
        cluster_id=cluster.pk,
        team_ids=[team.pk for team in teams],
        kube=KubeClient.for_cluster(cluster),
        **kwargs,
    )


def test_a_cold_sweep_passes_over_every_team_and_counts_each_pass_apart(teams, kube_cluster, core):
    outcome = sweep(kube_cluster, teams, concurrency=3)

    assert sorted(outcome.passed) == sorted(team.pk for team in teams)
    assert outcome.in_sync == []
    assert outcome.failed == {}
    for team, gpus in zip(teams, ("1", "2", "3"), strict=True):
        assert quota_hard(core, team.slug)["requests.nvidia.com/gpu"] == gpus
        state = TeamCluster.objects.get(team=team, cluster=kube_cluster)
        desired = desired_state.desired_state(
            team=team, cluster=kube_cluster, rules=desired_state.policy()
        )
        # One write an object: each pass's writes are its own, although the passes ran side by
        # side over one client.
        assert state.status == TeamCluster.Status.IN_SYNC
        assert state.last_write_count == len(desired.objects) == 7


def test_a_sweep_over_unchanged_teams_lists_each_kind_once_and_writes_nothing(teams, kube_cluster):
    sweep(kube_cluster, teams)
    runs = {
        t.pk: TeamCluster.objects.get(team=t, cluster=kube_cluster).reconcile_runs for t in teams
    }

    outcome = sweep(kube_cluster, teams)

    quota_hard_of = {team.pk: gpus for team, gpus in zip(teams, ("1", "2", "3"), strict=True)}
    assert sorted(outcome.in_sync) == sorted(team.pk for team in teams)
    assert outcome.passed == []
    assert outcome.failed == {}
    # One list per kind for the whole cluster, whatever the number of teams; no write.
    assert outcome.reads == len(reconcile_sweep.TEAM_KINDS)
    assert outcome.writes == 0
    for team in teams:
        state = TeamCluster.objects.get(team=team, cluster=kube_cluster)
        assert state.status == TeamCluster.Status.IN_SYNC
        assert state.last_write_count == 0
        assert state.reconcile_runs == runs[team.pk] + 1
        assert state.applied_quota["requests.nvidia.com/gpu"] == quota_hard_of[team.pk]


def test_a_sweep_passes_over_the_team_that_drifted_and_only_that_one(teams, kube_cluster, core):
    a, b, c = teams
    sweep(kube_cluster, teams)
    core.delete_namespaced_resource_quota("gpu-portal-quota", b.slug)

    outcome = sweep(kube_cluster, teams)

    assert outcome.passed == [b.pk]
    assert sorted(outcome.in_sync) == sorted([a.pk, c.pk])
    assert quota_hard(core, b.slug)["requests.nvidia.com/gpu"] == "2"


def test_a_sweep_leaves_what_the_portal_did_not_make_alone(teams, kube_cluster, core):
    a, b, c = teams
    # Someone else's namespace with team a's name, before the portal made one.
    core.create_namespace({"metadata": {"name": a.slug, "labels": {"owner": "someone-else"}}})
    sweep(kube_cluster, [b, c])
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    theirs = {
        "metadata": {"name": "their-binding"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "x"}],
    }
    rbac.create_namespaced_role_binding(b.slug, theirs)

    outcome = sweep(kube_cluster, teams)

    assert list(outcome.failed) == [a.pk]
    assert isinstance(outcome.failed[a.pk], NamespaceNotOwned)
    assert core.read_namespace(a.slug).metadata.labels.get("app.kubernetes.io/managed-by") is None
    assert quota_hard(core, a.slug) is None
    state = TeamCluster.objects.get(team=a, cluster=kube_cluster)
    assert (state.status, state.namespace_owned) == (TeamCluster.Status.ERROR, False)
    # Another's binding in a portal namespace is not the portal's to prune: b stays in sync.
    assert sorted(outcome.in_sync) == sorted([b.pk, c.pk])
    assert read_or_none(rbac.read_namespaced_role_binding, "their-binding", b.slug)
