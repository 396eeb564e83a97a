"""Each team namespace gets a default NetworkPolicy: ingress from its own namespace and from
namespaces the portal does not manage, never from another team's. The devcluster runs no
network plugin, so nothing enforces NetworkPolicies there: these tests check the objects the
portal keeps on the cluster, not packets."""

import pytest
from django.db import transaction
from kubernetes import client

from tenants.reconcile_triggers import request_reconcile_after_commit
from tests.integration.conftest import wait_for
from tests.integration.kube import read_or_none
from tests.integration.reconcile.conftest import in_sync

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture
def two_teams(iso_cluster, make_team, onboard):
    a, b = make_team("na"), make_team("nb")
    for team in (a, b):
        onboard(team, iso_cluster, lead=f"lead-{team.slug}")
    return a, b


def policy_of(api, portal, namespace):
    return read_or_none(
        client.NetworkingV1Api(api).read_namespaced_network_policy,
        f"{portal.name}-team-ingress",
        namespace,
    )


def test_each_team_namespace_refuses_ingress_from_other_teams(two_teams, k8s, core, portal):
    for team in two_teams:
        policy = policy_of(k8s, portal, team.slug)

        assert policy.spec.pod_selector.match_labels is None  # every pod of the namespace
        assert policy.spec.policy_types == ["Ingress"]
        (rule,) = policy.spec.ingress
        same_namespace, not_a_team = rule._from
        assert same_namespace.pod_selector.match_labels is None
        assert same_namespace.namespace_selector is None
        (expression,) = not_a_team.namespace_selector.match_expressions
        assert (expression.key, expression.operator, expression.values) == (
            "app.kubernetes.io/managed-by",
            "NotIn",
            [portal.name],
        )
        # Which the other team's namespace carries, and an infrastructure namespace does not.
        other = next(t for t in two_teams if t != team)
        labels = core.read_namespace(other.slug).metadata.labels
        assert labels["app.kubernetes.io/managed-by"] == portal.name
        assert "app.kubernetes.io/managed-by" not in (
            core.read_namespace("kube-system").metadata.labels or {}
        )


def test_a_deleted_network_policy_comes_back(two_teams, k8s, portal, iso_cluster):
    team, _ = two_teams
    client.NetworkingV1Api(k8s).delete_namespaced_network_policy(
        f"{portal.name}-team-ingress", team.slug
    )

    with transaction.atomic():
        request_reconcile_after_commit(team_id=team.pk, cluster_id=iso_cluster.pk)

    in_sync(team, iso_cluster)
    wait_for(lambda: policy_of(k8s, portal, team.slug), what="the NetworkPolicy back")
