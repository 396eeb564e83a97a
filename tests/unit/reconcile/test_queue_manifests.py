"""The pure builders of a Kueue-mode cluster's objects: the flavors of its GPU models, the
priority classes and the cohort tree of its departments, each team's two ClusterQueues and
LocalQueues from its grants and queue policy, and the ResourceQuota's ceiling."""

import datetime
from decimal import Decimal

import pytest

from clusters.vocabulary import (
    DESIRED_HASH_ANNOTATION,
    MANAGED_BY_LABEL,
    TEAM_LABEL,
    resource_flavor_name,
)
from reconcile import manifests, queue_manifests
from reconcile.manifests import Grant, Policy
from reconcile.queue_manifests import QueuePolicy

TODAY = datetime.date(2026, 3, 10)
RULES = Policy(portal_name="gpu-portal")
A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"
GPU = "nvidia.com/gpu"
DEFAULT = QueuePolicy()  # no limits, weight 1: a team without a policy row


def cluster(**kwargs):
    kwargs.setdefault("portal_name", "gpu-portal")
    kwargs.setdefault("gpu_resources", [GPU])
    kwargs.setdefault("gpu_models", [H100, A100])
    kwargs.setdefault("gpu_node_selector", {"hardware-type": "gpu"})
    kwargs.setdefault("gpu_taint_key", "nvidia.com/gpu")
    kwargs.setdefault("gpu_model_label", "nvidia.com/gpu.product")
    kwargs.setdefault("gpu_capacity", {GPU: 48})
    return queue_manifests.kueue_cluster(**kwargs)


def grant(gpus=4, model="", **kwargs):
    kwargs.setdefault("starts_on", TODAY - datetime.timedelta(days=1))
    kwargs.setdefault("ends_on", TODAY + datetime.timedelta(days=30))
    return Grant(gpu_resource=GPU, gpus=gpus, gpu_model=model, **kwargs)


def team(**kwargs):
    kwargs.setdefault("slug", "vision")
    kwargs.setdefault("today", TODAY)
    kwargs.setdefault("gpu_resources", [GPU])
    return manifests.team_on_cluster(**kwargs)


def queues(state, policy=DEFAULT, on=None):
    objects = queue_manifests.team_queue_objects(state, on or cluster(), policy, RULES)
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def guaranteed(state, policy=DEFAULT, on=None):
    return queues(state, policy, on)[("ClusterQueue", "gpu-portal-vision")]


def opportunistic(state, policy=DEFAULT, on=None):
    return queues(state, policy, on)[("ClusterQueue", "gpu-portal-vision-opportunistic")]


def gpu_quota(queue) -> dict[str, dict]:
    """Per flavor, the nvidia.com/gpu quota entry."""
    (group, _) = queue["spec"]["resourceGroups"]
    return {
        flavor["name"]: next(r for r in flavor["resources"] if r["name"] == GPU)
        for flavor in group["flavors"]
    }


# --- cluster-wide ------------------------------------------------------------------------------


def test_a_flavor_per_gpu_model_with_the_node_labels_and_the_gpu_toleration():
    flavors = {
        f["metadata"]["name"]: f
        for f in queue_manifests.cluster_objects(cluster())
        if f["kind"] == "ResourceFlavor"
    }

    a100 = flavors["gpu-portal-nvidia-a100-sxm4-80gb"]["spec"]
    assert a100["nodeLabels"] == {"hardware-type": "gpu", "nvidia.com/gpu.product": A100}
    assert a100["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert flavors["gpu-portal-any-gpu"]["spec"]["nodeLabels"] == {"hardware-type": "gpu"}
    assert flavors["gpu-portal-cpu-memory"]["spec"] == {}
    assert sorted(flavors) == [
        "gpu-portal-any-gpu",
        "gpu-portal-cpu-memory",
        "gpu-portal-nvidia-a100-sxm4-80gb",
        "gpu-portal-nvidia-h100-80gb-hbm3",
    ]


def test_flavor_names_are_dns_names_of_the_model():
    assert resource_flavor_name("gpu-portal", "NVIDIA A100 (80GB)") == "gpu-portal-nvidia-a100-80gb"
    assert resource_flavor_name("gpu-portal", "") == "gpu-portal-any-gpu"


def test_three_priority_classes_guaranteed_and_protected_above_opportunistic():
    classes = {
        o["metadata"]["name"]: o["value"]
        for o in queue_manifests.cluster_objects(cluster())
        if o["kind"] == "WorkloadPriorityClass"
    }

    assert classes == {
        "gpu-portal-guaranteed": 1000,
        "gpu-portal-opportunistic": 100,
        "gpu-portal-opportunistic-protected": 1000,
    }


@pytest.mark.parametrize(
    ("by_weight", "protects", "lenders", "borrowers"),
    [
        (False, False, "Any", "Never"),
        (True, False, "Any", "Any"),
        (False, True, "LowerPriority", "Never"),
        (True, True, "LowerPriority", "LowerPriority"),
    ],
)
def test_with_protected_borrowers_queues_preempt_only_lower_priorities(
    by_weight, protects, lenders, borrowers
):
    kueue = queue_manifests.kueue_cluster(
        portal_name="gpu-portal",
        gpu_resources=["nvidia.com/gpu"],
        borrowers_share_by_weight=by_weight,
        protects_borrowers=protects,
    )
    queues = {
        kind: queue_manifests.cluster_queue(team(), kueue, QueuePolicy(), RULES, kind)
        for kind in ("guaranteed", "opportunistic")
    }

    assert queues["guaranteed"]["spec"]["preemption"]["reclaimWithinCohort"] == lenders
    assert queues["opportunistic"]["spec"]["preemption"]["reclaimWithinCohort"] == borrowers


def test_cluster_wide_objects_carry_the_portal_label_and_no_team():
    for obj in queue_manifests.cluster_objects(cluster()):
        labels = obj["metadata"]["labels"]
        assert labels == {MANAGED_BY_LABEL: "gpu-portal"}
        assert DESIRED_HASH_ANNOTATION in obj["metadata"]["annotations"]
        assert queue_manifests.is_cluster_owned(obj, portal_name="gpu-portal")
    assert queue_manifests.cluster_ownership_selector("gpu-portal") == (
        f"{MANAGED_BY_LABEL}=gpu-portal,!{TEAM_LABEL}"
    )


def cohorts(departments=None):
    return {
        o["metadata"]["name"]: o["spec"]
        for o in queue_manifests.cluster_objects(cluster(), departments=departments)
        if o["kind"] == "Cohort"
    }


def test_without_departments_the_cluster_has_only_the_root_cohort():
    assert cohorts() == {"gpu-portal": {}}


def test_a_cohort_per_department_under_its_parents_and_the_top_ones_under_the_root():
    tree = {"research": "", "vision-lab": "research", "sales": ""}

    assert cohorts(tree) == {
        "gpu-portal": {},
        "gpu-portal-department-research": {"parentName": "gpu-portal"},
        "gpu-portal-department-sales": {"parentName": "gpu-portal"},
        "gpu-portal-department-vision-lab": {"parentName": "gpu-portal-department-research"},
    }


def test_a_teams_queues_are_in_its_departments_cohort_or_the_root_without_one():
    state = team(grants=[grant(4, A100)])
    objects = queue_manifests.team_queue_objects(
        state, cluster(), DEFAULT, RULES, department="vision-lab"
    )

    in_department = {o["spec"]["cohortName"] for o in objects if o["kind"] == "ClusterQueue"}
    assert in_department == {"gpu-portal-department-vision-lab"}
    assert guaranteed(state)["spec"]["cohortName"] == "gpu-portal"
    assert opportunistic(state)["spec"]["cohortName"] == "gpu-portal"


# --- a team's queues ---------------------------------------------------------------------------


def test_two_cluster_queues_and_two_local_queues_per_team():
    objects = queues(team(grants=[grant(4, A100)]))

    assert sorted(objects) == [
        ("ClusterQueue", "gpu-portal-vision"),
        ("ClusterQueue", "gpu-portal-vision-opportunistic"),
        ("LocalQueue", "guaranteed"),
        ("LocalQueue", "opportunistic"),
    ]
    local = objects[("LocalQueue", "opportunistic")]
    assert local["metadata"]["namespace"] == "vision"
    assert local["spec"] == {"clusterQueue": "gpu-portal-vision-opportunistic"}
    assert objects[("LocalQueue", "guaranteed")]["spec"] == {"clusterQueue": "gpu-portal-vision"}
    for obj in objects.values():
        assert obj["metadata"]["labels"] == {MANAGED_BY_LABEL: "gpu-portal", TEAM_LABEL: "vision"}


def test_an_a100_grant_is_nominal_quota_on_the_a100_flavor_only():
    quota = gpu_quota(guaranteed(team(grants=[grant(4, A100)])))

    assert {name: q["nominalQuota"] for name, q in quota.items()} == {
        "gpu-portal-nvidia-a100-sxm4-80gb": "4",
        "gpu-portal-nvidia-h100-80gb-hbm3": "0",
        "gpu-portal-any-gpu": "0",
    }


def test_grants_without_a_model_go_to_the_any_gpu_flavor_and_grants_of_a_model_add_up():
    quota = gpu_quota(guaranteed(team(grants=[grant(4, A100), grant(2, A100), grant(3)])))

    assert quota["gpu-portal-nvidia-a100-sxm4-80gb"]["nominalQuota"] == "6"
    assert quota["gpu-portal-any-gpu"]["nominalQuota"] == "3"


def test_flavors_are_tried_model_by_model_then_any():
    names = list(gpu_quota(guaranteed(team())))

    assert names == [
        "gpu-portal-nvidia-a100-sxm4-80gb",
        "gpu-portal-nvidia-h100-80gb-hbm3",
        "gpu-portal-any-gpu",
    ]


def test_a_grant_not_in_effect_today_gives_nothing():
    later = grant(4, A100, starts_on=TODAY + datetime.timedelta(days=1))
    ended = grant(4, A100, ends_on=TODAY - datetime.timedelta(days=1))

    quota = gpu_quota(guaranteed(team(grants=[later, ended])))

    assert quota["gpu-portal-nvidia-a100-sxm4-80gb"]["nominalQuota"] == "0"


def test_a_grant_of_a_model_no_node_has_any_more_is_on_no_flavor():
    quota = gpu_quota(guaranteed(team(grants=[grant(4, "NVIDIA-V100")])))

    assert {q["nominalQuota"] for q in quota.values()} == {"0"}


def test_the_guaranteed_queue_never_borrows_and_reclaims_its_quota():
    queue = guaranteed(team(grants=[grant(4, A100)]))

    for group in queue["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            assert {r["borrowingLimit"] for r in flavor["resources"]} == {"0"}
    assert queue["spec"]["preemption"] == {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
    }


def test_the_opportunistic_queue_owns_nothing_borrows_up_to_the_limit_and_preempts_nobody():
    queue = opportunistic(team(grants=[grant(4, A100)]), QueuePolicy(borrowing_limit=3))

    for flavor, quota in gpu_quota(queue).items():
        assert (quota["nominalQuota"], quota["borrowingLimit"]) == ("0", "3"), flavor
    assert queue["spec"]["preemption"] == {
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
    }


def test_borrowers_sharing_by_weight_may_preempt_in_the_cohort_but_never_their_own():
    shared = opportunistic(
        team(grants=[grant(4, A100)]), on=cluster(borrowers_share_by_weight=True)
    )
    lender = guaranteed(team(grants=[grant(4, A100)]), on=cluster(borrowers_share_by_weight=True))

    # Under fair sharing Kueue preempts only borrowed GPUs, from queues above their share.
    assert shared["spec"]["preemption"] == {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "Never",
    }
    assert shared["spec"]["fairSharing"] == {"weight": "1"}
    assert lender["spec"]["preemption"]["reclaimWithinCohort"] == "Any"


def test_without_a_borrowing_limit_the_opportunistic_queue_borrows_without_one():
    quota = gpu_quota(opportunistic(team(grants=[grant(4, A100)])))

    assert not [q for q in quota.values() if "borrowingLimit" in q]


def test_the_lending_limit_is_capped_at_the_flavors_own_quota():
    quota = gpu_quota(guaranteed(team(grants=[grant(4, A100)]), QueuePolicy(lending_limit=6)))

    assert quota["gpu-portal-nvidia-a100-sxm4-80gb"]["lendingLimit"] == "4"
    assert quota["gpu-portal-nvidia-h100-80gb-hbm3"]["lendingLimit"] == "0"


def test_without_a_lending_limit_everything_idle_is_lent():
    quota = gpu_quota(guaranteed(team(grants=[grant(4, A100)])))

    assert not [q for q in quota.values() if "lendingLimit" in q]


@pytest.mark.parametrize(("weight", "quantity"), [("1", "1"), ("2.5", "2500m"), ("0.001", "1m")])
def test_both_queues_carry_the_fair_sharing_weight(weight, quantity):
    policy = QueuePolicy(fair_sharing_weight=Decimal(weight))

    for queue in (guaranteed(team(), policy), opportunistic(team(), policy)):
        assert queue["spec"]["fairSharing"] == {"weight": quantity}


def test_both_queues_share_the_cohort_and_take_only_the_teams_namespace():
    for queue in (guaranteed(team()), opportunistic(team())):
        assert queue["spec"]["cohortName"] == "gpu-portal"
        assert queue["spec"]["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": "vision"}
        }


def test_cpu_and_memory_are_covered_from_the_grants_or_else_effectively_unbounded():
    bounded = team(grants=[grant(4, A100, cpu_cores=Decimal("8.5"), memory_gib=64)])
    (_, group) = guaranteed(bounded)["spec"]["resourceGroups"]
    (_, open_group) = guaranteed(team(grants=[grant(4, A100)]))["spec"]["resourceGroups"]

    assert group["coveredResources"] == ["cpu", "memory"]
    (flavor,) = group["flavors"]
    assert flavor["name"] == "gpu-portal-cpu-memory"
    assert [(r["name"], r["nominalQuota"]) for r in flavor["resources"]] == [
        ("cpu", "8500m"),
        ("memory", "64Gi"),
    ]
    (open_flavor,) = open_group["flavors"]
    assert [r["nominalQuota"] for r in open_flavor["resources"]] == ["100000", "1000000Gi"]


def test_every_flavor_lists_every_covered_gpu_kind_in_order():
    on = cluster(gpu_resources=[GPU, "nvidia.com/mig-1g.10gb"])
    state = team(gpu_resources=on.gpu_resources)

    (group, _) = guaranteed(state, on=on)["spec"]["resourceGroups"]

    assert group["coveredResources"] == [GPU, "nvidia.com/mig-1g.10gb"]
    for flavor in group["flavors"]:
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]


def test_an_archived_team_has_no_queues():
    assert queues(team(grants=[grant(4, A100)], archived=True)) == {}


def test_a_grant_shrink_lowers_the_nominal_quota():
    before = gpu_quota(guaranteed(team(grants=[grant(4, A100)])))
    after = gpu_quota(guaranteed(team(grants=[grant(2, A100)])))

    assert before["gpu-portal-nvidia-a100-sxm4-80gb"]["nominalQuota"] == "4"
    assert after["gpu-portal-nvidia-a100-sxm4-80gb"]["nominalQuota"] == "2"


def test_a_changed_policy_changes_the_hash_the_drift_check_reads():
    first = guaranteed(team(), QueuePolicy(lending_limit=1))
    second = guaranteed(team(), QueuePolicy())

    annotations = [q["metadata"]["annotations"][DESIRED_HASH_ANNOTATION] for q in (first, second)]
    assert annotations[0] != annotations[1]
    assert not manifests.matches(second, first)


# --- the ResourceQuota's ceiling ---------------------------------------------------------------


def ceiling(state, policy=DEFAULT, on=None):
    return queue_manifests.quota_ceiling(state, on or cluster(), policy)


def test_the_ceiling_is_own_quota_plus_the_borrowing_limit_on_each_flavor():
    # 3 GPU flavors (A100, H100, any): the opportunistic queue may borrow 2 on each.
    assert ceiling(team(grants=[grant(4, A100)]), QueuePolicy(borrowing_limit=2)) == {GPU: 10}


def test_without_a_borrowing_limit_the_ceiling_is_the_clusters_capacity():
    assert ceiling(team(grants=[grant(4, A100)])) == {GPU: 48}


def test_the_ceiling_never_exceeds_the_capacity_nor_falls_below_the_own_quota():
    assert ceiling(team(grants=[grant(40, A100)]), QueuePolicy(borrowing_limit=8)) == {GPU: 48}
    overcommitted = cluster(gpu_capacity={GPU: 4})
    assert ceiling(team(grants=[grant(6)]), QueuePolicy(borrowing_limit=0), overcommitted) == {
        GPU: 6
    }


def test_the_resource_quota_takes_the_ceiling_in_kueue_mode_and_an_archived_team_gets_zero():
    state = team(grants=[grant(4, A100)], gpu_ceiling={GPU: 10})
    archived = team(grants=[grant(4, A100)], gpu_ceiling={GPU: 10}, archived=True)

    assert manifests.resource_quota(state, RULES)["spec"]["hard"][f"requests.{GPU}"] == "10"
    assert manifests.resource_quota(archived, RULES)["spec"]["hard"][f"requests.{GPU}"] == "0"
