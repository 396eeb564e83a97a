"""The pure builders of a team's objects on a cluster, and the comparison with what it holds."""

import datetime
import json
from decimal import Decimal

import pytest

from clusters.vocabulary import DESIRED_HASH_ANNOTATION
from reconcile import manifests
from reconcile.manifests import Grant, Member, Policy

TODAY = datetime.date(2026, 3, 10)
POLICY = Policy(portal_name="gpu-portal", max_pods=50)


def grant(gpus=4, **kwargs):
    kwargs.setdefault("gpu_resource", "nvidia.com/gpu")
    kwargs.setdefault("starts_on", TODAY - datetime.timedelta(days=1))
    kwargs.setdefault("ends_on", TODAY + datetime.timedelta(days=30))
    return Grant(gpus=gpus, **kwargs)


def team(**kwargs):
    kwargs.setdefault("slug", "vision")
    kwargs.setdefault("today", TODAY)
    kwargs.setdefault("gpu_resources", ["nvidia.com/gpu"])
    kwargs.setdefault("user_prefix", "portal:")
    return manifests.team_on_cluster(**kwargs)


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def hard(state):
    return manifests.resource_quota(state, POLICY)["spec"]["hard"]


# --- the quota ---------------------------------------------------------------------------------


def test_quota_sums_the_active_grants_in_effect_today_under_the_requests_prefix():
    state = team(grants=[grant(4), grant(2)])

    assert hard(state)["requests.nvidia.com/gpu"] == "6"


def test_quota_never_writes_the_limits_form_the_api_server_does_not_enforce():
    keys = hard(team(grants=[grant(4)]))

    assert not [key for key in keys if key.startswith("limits.")]


def test_every_gpu_kind_the_cluster_offers_is_zero_without_a_grant():
    # A kind missing from a quota would be unlimited, so "no grant" must read 0.
    state = team(gpu_resources=["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"])

    assert hard(state)["requests.nvidia.com/gpu"] == "0"
    assert hard(state)["requests.nvidia.com/mig-1g.10gb"] == "0"


@pytest.mark.parametrize(
    "excluded",
    [
        grant(4, state="revoked"),
        grant(4, state="expired"),
        grant(4, starts_on=TODAY + datetime.timedelta(days=1)),
        # Its last day has passed; the expiry task has not marked it yet.
        grant(4, ends_on=TODAY - datetime.timedelta(days=1)),
    ],
    ids=["revoked", "expired", "not-started", "period-over"],
)
def test_grants_not_in_effect_today_add_nothing(excluded):
    assert hard(team(grants=[grant(1), excluded]))["requests.nvidia.com/gpu"] == "1"


def test_a_grant_is_in_effect_on_its_first_and_last_day():
    state = team(grants=[grant(3, starts_on=TODAY, ends_on=TODAY)])

    assert hard(state)["requests.nvidia.com/gpu"] == "3"


def test_open_ended_grants_count():
    assert hard(team(grants=[grant(2, ends_on=None)]))["requests.nvidia.com/gpu"] == "2"


def test_cpu_and_memory_are_the_sums_when_every_grant_gives_them():
    state = team(
        grants=[
            grant(2, cpu_cores=Decimal("16.00"), memory_gib=64),
            grant(2, cpu_cores=Decimal("0.50"), memory_gib=2),
        ]
    )

    assert hard(state)["requests.cpu"] == "16500m"
    assert hard(state)["requests.memory"] == "66Gi"


def test_cpu_is_unbounded_when_a_grant_leaves_it_open():
    state = team(grants=[grant(2, cpu_cores=Decimal(8)), grant(2)])

    assert "requests.cpu" not in hard(state)
    assert "requests.memory" not in hard(state)


def test_pods_are_bounded_by_the_portal_wide_maximum():
    assert hard(team())["pods"] == "50"


def test_the_quota_caps_the_objects_a_team_holds():
    limits = {"count/jobs.batch": "200", "services": "50", "requests.storage": "1Ti", "pods": "80"}

    capped = hard(team(object_limits=limits))

    assert {k: capped[k] for k in limits} == limits


def test_an_archived_team_holds_no_pods_whatever_its_caps():
    assert hard(team(object_limits={"pods": "80"}, archived=True))["pods"] == "0"


def test_an_archived_team_gets_a_quota_of_nothing():
    state = team(grants=[grant(4, cpu_cores=Decimal(8), memory_gib=32)], archived=True)

    assert hard(state) == {
        "requests.nvidia.com/gpu": "0",
        "pods": "0",
        "requests.cpu": "0",
        "requests.memory": "0",
    }


# --- the LimitRange ----------------------------------------------------------------------------


def test_limit_range_gives_containers_defaults():
    (item,) = manifests.limit_range(team(), POLICY)["spec"]["limits"]

    assert item == {
        "type": "Container",
        "default": {"cpu": "1", "memory": "1Gi"},
        "defaultRequest": {"cpu": "100m", "memory": "256Mi"},
    }


def test_limit_range_maxima_follow_the_quota_and_defaults_never_exceed_them():
    state = team(grants=[grant(1, cpu_cores=Decimal("0.5"), memory_gib=8)])

    (item,) = manifests.limit_range(state, POLICY)["spec"]["limits"]

    assert item["max"] == {"cpu": "500m", "memory": "8Gi"}
    assert item["default"] == {"cpu": "500m", "memory": "1Gi"}
    assert item["defaultRequest"] == {"cpu": "100m", "memory": "256Mi"}


# --- RBAC --------------------------------------------------------------------------------------


def members():
    return [
        Member("lena", "lead"),
        Member("mo", "member"),
        Member("ana", "member"),
        Member("vic", "viewer"),
    ]


def test_roles_map_to_the_portals_team_roles_for_prefixed_users():
    bindings = {
        b["roleRef"]["name"]: [s["name"] for s in b["subjects"]]
        for b in manifests.role_bindings(team(members=members()), POLICY)
    }

    assert bindings == {
        "gpu-portal-lead": ["portal:lena"],
        "gpu-portal-member": ["portal:ana", "portal:lena", "portal:mo"],
        "gpu-portal-viewer": [
            "portal:ana", "portal:lena", "portal:mo", "portal:vic", "portal:team:vision",
        ],
    }  # fmt: skip


def test_no_member_is_bound_to_kubernetes_own_roles_that_write_rbac():
    role_refs = {
        b["roleRef"]["name"] for b in manifests.role_bindings(team(members=members()), POLICY)
    }

    assert not role_refs & {"admin", "edit", "cluster-admin"}


def test_the_team_group_is_a_group_subject_of_the_viewer_binding():
    (view,) = [
        b
        for b in manifests.role_bindings(team(members=members()), POLICY)
        if b["roleRef"]["name"] == "gpu-portal-viewer"
    ]

    assert view["subjects"][-1] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Group",
        "name": "portal:team:vision",
    }
    assert view["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "gpu-portal-viewer",
    }


def test_a_role_nobody_has_gets_no_binding():
    names = [
        b["metadata"]["name"]
        for b in manifests.role_bindings(team(members=[Member("vic", "viewer")]), POLICY)
    ]

    assert names == ["gpu-portal-viewer"]


@pytest.mark.parametrize("username", ["system:admin", "team:vision", "a b", "", "x\ny"])
def test_a_username_that_cannot_be_a_cluster_identity_is_never_bound(username):
    bindings = manifests.role_bindings(
        team(members=[Member(username, "lead"), Member("lena", "lead")]), POLICY
    )

    subjects = {s["name"] for b in bindings for s in b["subjects"]}
    assert subjects == {"portal:lena", "portal:team:vision"}


def test_an_archived_team_has_no_bindings():
    assert manifests.role_bindings(team(members=members(), archived=True), POLICY) == []


def test_the_user_prefix_can_be_empty():
    (lead,) = manifests.role_bindings(
        team(members=[Member("lena", "lead")], user_prefix=""), POLICY
    )[:1]

    assert lead["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "lena"}
    ]


# --- all objects -------------------------------------------------------------------------------


def test_desired_objects_are_namespace_first_and_all_labelled_for_the_portal_and_team():
    objects = manifests.desired_objects(team(members=members()), POLICY)

    assert [o["kind"] for o in objects] == [
        "Namespace", "ResourceQuota", "LimitRange", "NetworkPolicy",
        "RoleBinding", "RoleBinding", "RoleBinding",
    ]  # fmt: skip
    for obj in objects:
        labels = obj["metadata"]["labels"]
        if obj["kind"] == "Namespace":  # its Pod Security labels too
            labels = {k: v for k, v in labels.items() if "pod-security" not in k}
        assert labels == {
            "app.kubernetes.io/managed-by": "gpu-portal",
            "gpuportal.io/team": "vision",
        }
        assert DESIRED_HASH_ANNOTATION in obj["metadata"]["annotations"]
    assert all(o["metadata"]["namespace"] == "vision" for o in objects[1:])
    assert "namespace" not in objects[0]["metadata"]


def test_the_portal_name_labels_and_names_the_objects():
    objects = manifests.desired_objects(team(), Policy(portal_name="acme-gpus"))

    assert {o["metadata"]["labels"]["app.kubernetes.io/managed-by"] for o in objects} == {
        "acme-gpus"
    }
    assert by_kind(objects, "ResourceQuota")[0]["metadata"]["name"] == "acme-gpus-quota"


def test_equal_states_build_equal_objects_whatever_the_input_order():
    one = team(members=members(), grants=[grant(1), grant(2)])
    two = team(members=list(reversed(members())), grants=[grant(1), grant(2)])

    assert manifests.desired_objects(one, POLICY) == manifests.desired_objects(two, POLICY)


def test_the_hash_changes_with_what_the_portal_sets():
    before = by_kind(manifests.desired_objects(team(grants=[grant(4)]), POLICY), "ResourceQuota")
    after = by_kind(manifests.desired_objects(team(grants=[grant(2)]), POLICY), "ResourceQuota")

    annotation = DESIRED_HASH_ANNOTATION
    assert (
        before[0]["metadata"]["annotations"][annotation]
        != (after[0]["metadata"]["annotations"][annotation])
    )


def test_ownership_selector_names_portal_and_team():
    assert manifests.ownership_selector("vision", POLICY) == (
        "app.kubernetes.io/managed-by=gpu-portal,gpuportal.io/team=vision"
    )


# --- comparing with the cluster ----------------------------------------------------------------


def quota():
    return by_kind(manifests.desired_objects(team(grants=[grant(4)]), POLICY), "ResourceQuota")[0]


def live(obj, **extra_metadata):
    """What the API server returns for an applied object: the same plus its own fields."""
    copy = {**obj, "metadata": {**obj["metadata"], "uid": "u-1", "resourceVersion": "7"}}
    copy["metadata"]["labels"] = {**obj["metadata"]["labels"], **extra_metadata}
    copy["status"] = {"hard": obj["spec"]["hard"], "used": {}}
    return copy


def test_an_object_the_cluster_holds_as_applied_matches():
    assert manifests.matches(quota(), live(quota()))


def test_labels_added_by_others_do_not_count_as_a_difference():
    assert manifests.matches(quota(), live(quota(), **{"owner": "finance"}))


def test_a_hand_edit_of_a_field_the_portal_owns_is_a_difference():
    edited = live(quota())
    edited["spec"] = {"hard": {**edited["spec"]["hard"], "requests.nvidia.com/gpu": "40"}}

    assert not manifests.matches(quota(), edited)


def test_a_missing_label_the_portal_sets_is_a_difference():
    edited = live(quota())
    del edited["metadata"]["labels"]["gpuportal.io/team"]

    assert not manifests.matches(quota(), edited)


def test_quantities_compare_by_value():
    assert manifests.matches({"cpu": "1"}, {"cpu": "1000m"})
    assert manifests.matches({"memory": "1Gi"}, {"memory": "1024Mi"})
    assert not manifests.matches({"cpu": "1"}, {"cpu": "2"})
    assert not manifests.matches({"name": "vision"}, {"name": "speech"})


def test_labels_and_annotations_compare_as_text_not_as_quantities():
    # A desired-state hash of hex digits with one "e" reads as a quantity: "4711e90230583318"
    # is 4711 x 10^90230583318, past what a Decimal holds, and was a reconcile's crash.
    desired = {"metadata": {"annotations": {"hash": "4711e90230583318"}}, "spec": {"cpu": "1"}}
    changed = {"metadata": {"annotations": {"hash": "0123456789abcdef"}}, "spec": {"cpu": "1"}}
    assert not manifests.matches(desired, changed)
    assert manifests.matches(desired, json.loads(json.dumps(desired)))
    # Equal as numbers, different as text: a label that changed.
    assert not manifests.matches(
        {"metadata": {"labels": {"v": "1e3"}}}, {"metadata": {"labels": {"v": "1000"}}}
    )
    # Under a pod template's metadata too; its resources still compare by value.
    template = {"template": {"metadata": {"labels": {"v": "1e3"}}, "spec": {"cpu": "1"}}}
    live_template = {"template": {"metadata": {"labels": {"v": "1000"}}, "spec": {"cpu": "1000m"}}}
    assert not manifests.matches(template, live_template)
    live_template["template"]["metadata"]["labels"]["v"] = "1e3"
    assert manifests.matches(template, live_template)


def test_lists_must_match_item_by_item():
    assert not manifests.matches({"s": [{"name": "a"}]}, {"s": [{"name": "a"}, {"name": "b"}]})
    assert manifests.matches({"s": [{"name": "a"}]}, {"s": [{"name": "a", "extra": 1}]})


@pytest.mark.parametrize(
    ("text", "value"),
    [("4", 4), ("1500m", Decimal("1.5")), ("64Gi", 64 * 2**30), ("1k", 1000), ("1e3", 1000)],
)
def test_parse_quantity(text, value):
    assert manifests.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["gpu-portal", "Gi", "", "vision", "1.2.3", "4711e90230583318"])
def test_parse_quantity_refuses_what_is_not_one(text):
    assert manifests.parse_quantity(text) is None


def test_is_owned_needs_the_portal_and_the_team_label():
    namespace = manifests.namespace(team(), POLICY)

    assert manifests.is_owned(namespace, slug="vision", policy=POLICY)
    assert not manifests.is_owned(namespace, slug="speech", policy=POLICY)
    assert not manifests.is_owned({"metadata": {"name": "vision"}}, slug="vision", policy=POLICY)


# --- Pod Security and the network ----------------------------------------------------------------


def test_the_namespace_enforces_baseline_and_warns_and_audits_at_restricted():
    labels = manifests.namespace(team(), POLICY)["metadata"]["labels"]

    assert {k: v for k, v in labels.items() if k.startswith("pod-security")} == {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "latest",
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/audit-version": "latest",
    }


def test_a_restricted_cluster_enforces_restricted():
    labels = manifests.namespace(team(pod_security_level="restricted"), POLICY)["metadata"]

    assert labels["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_namespace_says_when_an_admin_let_the_team_expose_services():
    closed = manifests.namespace(team(), POLICY)["metadata"]["labels"]
    opened = manifests.namespace(team(external_services=True), POLICY)["metadata"]["labels"]

    assert "gpuportal.io/external-services" not in closed
    assert opened["gpuportal.io/external-services"] == "allowed"


def test_the_network_policy_admits_the_namespace_and_namespaces_of_no_team():
    policy = manifests.network_policy(team(), POLICY)

    assert policy["metadata"]["name"] == "gpu-portal-team-ingress"
    assert policy["spec"]["podSelector"] == {}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [
        {"podSelector": {}},
        {
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "app.kubernetes.io/managed-by",
                        "operator": "NotIn",
                        "values": ["gpu-portal"],
                    }
                ]
            }
        },
    ]
