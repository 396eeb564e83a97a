"""The admission policies' builders: what they match, where they are bound, and which rules a
cluster's settings put in them. (What the API server makes of the CEL is proved on the
devcluster, tests/integration/isolation/test_admission_policies.py.)"""

from pathlib import Path

from reconcile.admission_policies import admission_objects
from reconcile.admission_policies.cel import cel_string
from reconcile.admission_policies.rules import cluster_rules

RULES = cluster_rules(
    portal_name="gpu-portal",
    gpu_node_selector={"hardware-type": "gpu"},
    gpu_taint_key="nvidia.com/gpu",
    allowed_registries=["registry.example.com"],
)


def objects(rules=RULES):
    return {o["metadata"]["name"]: o for o in admission_objects(rules)}


def test_five_policies_each_bound_to_the_namespaces_the_portal_manages():
    made = objects()

    assert sorted(made) == [
        "gpu-portal-team-jobs",
        "gpu-portal-team-pods",
        "gpu-portal-team-routes",
        "gpu-portal-team-secrets",
        "gpu-portal-team-services",
    ]
    by_kind = {}
    for obj in admission_objects(RULES):
        by_kind.setdefault(obj["kind"], []).append(obj)
    for binding in by_kind["ValidatingAdmissionPolicyBinding"]:
        assert binding["spec"]["policyName"] == binding["metadata"]["name"]
        assert binding["spec"]["validationActions"] == ["Deny"]
        assert binding["spec"]["matchResources"] == {
            "namespaceSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "gpu-portal"}}
        }
    for obj in admission_objects(RULES):
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-portal"}


def pods_policy(rules=RULES):
    (policy,) = [
        o
        for o in admission_objects(rules)
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("pods")
    ]
    return policy


def test_the_pods_policy_checks_every_pod_and_ephemeral_container_and_fails_closed():
    spec = pods_policy()["spec"]

    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["pods", "pods/ephemeralcontainers"]
    assert rule["operations"] == ["CREATE", "UPDATE"]


def test_allowing_every_registry_drops_the_registry_rule():
    strict = pods_policy()["spec"]
    everything = cluster_rules(portal_name="gpu-portal", allow_all_registries=True)
    open_ = pods_policy(everything)["spec"]

    assert any("refusedImages" in v["expression"] for v in strict["validations"])
    assert not any("refusedImages" in v["expression"] for v in open_["validations"])


def test_an_empty_allow_list_allows_no_registry():
    rules = cluster_rules(portal_name="gpu-portal")

    (refused,) = [
        v for v in pods_policy(rules)["spec"]["variables"] if v["name"] == "refusedImages"
    ]
    assert "&& (false)" in refused["expression"]


def test_the_registries_are_matched_by_whole_components():
    (refused,) = [v for v in pods_policy()["spec"]["variables"] if v["name"] == "refusedImages"]

    assert "== 'registry.example.com'" in refused["expression"]
    assert ".startsWith('registry.example.com/')" in refused["expression"]


def test_a_cluster_without_gpu_labels_or_taint_has_no_placement_rules():
    rules = cluster_rules(portal_name="gpu-portal", allow_all_registries=True)

    messages = [v.get("message", "") for v in pods_policy(rules)["spec"]["validations"]]
    assert not any("GPU nodes" in m or "GPU taint" in m for m in messages)


def test_cel_strings_hold_quotes_and_backslashes_exactly():
    assert cel_string("it's") == "'it\\'s'"
    assert cel_string("a\\b") == "'a\\\\b'"


def test_the_secrets_policy_refuses_service_account_tokens():
    (policy,) = [
        o
        for o in admission_objects(RULES)
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("secrets")
    ]

    (validation,) = policy["spec"]["validations"]
    assert "kubernetes.io/service-account-token" in validation["expression"]


def policies(rules=RULES):
    return {
        o["metadata"]["name"]: o
        for o in admission_objects(rules)
        if o["kind"] == "ValidatingAdmissionPolicy"
    }


KUEUE_RULES = cluster_rules(
    portal_name="gpu-portal",
    gpu_node_selector={"hardware-type": "gpu"},
    gpu_taint_key="nvidia.com/gpu",
    allowed_registries=["registry.example.com"],
    kueue=True,
    portal_url="https://gpus.example.com",
)


def test_kueue_mode_adds_the_templates_policy_and_quota_mode_has_none():
    assert sorted(objects(KUEUE_RULES)) == [
        "gpu-portal-team-jobs",
        "gpu-portal-team-pods",
        "gpu-portal-team-queued-templates",
        "gpu-portal-team-routes",
        "gpu-portal-team-secrets",
        "gpu-portal-team-services",
    ]
    assert not any("queued" in name for name in objects(RULES))
    assert not any(
        "queue-name" in v["expression"]
        for v in policies(RULES)["gpu-portal-team-jobs"]["spec"]["validations"]
    )


def test_the_jobs_policy_checks_gpu_batch_jobs_only():
    spec = policies(KUEUE_RULES)["gpu-portal-team-jobs"]["spec"]

    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"]) == (["batch"], ["jobs"])
    conditions = {c["name"]: c["expression"] for c in spec["matchConditions"]}
    assert "nvidia.com/gpu" in conditions["asks-for-gpus"]
    assert "object.spec != oldObject.spec" in conditions["spec-or-queue-written"]


def test_only_kueue_may_unsuspend_a_queued_job():
    spec = policies(KUEUE_RULES)["gpu-portal-team-jobs"]["spec"]

    (unsuspend,) = [v for v in spec["validations"] if "un-suspends a queued" in v["message"]]
    assert (
        "request.userInfo.username == 'system:serviceaccount:kueue-system:kueue-controller-manager'"
    ) in unsuspend["expression"]


def test_a_refusal_names_the_queues_and_the_portal():
    spec = policies(KUEUE_RULES)["gpu-portal-team-jobs"]["spec"]

    (queue,) = [
        v
        for v in spec["validations"]
        if "queue-name" in v["expression"] and v["message"].startswith("On this cluster")
    ]
    message = queue["message"]
    assert "kueue.x-k8s.io/queue-name=guaranteed" in message
    assert "kueue.x-k8s.io/queue-name=opportunistic" in message
    assert "https://gpus.example.com" in message


def test_the_priority_label_must_be_its_queues():
    spec = policies(KUEUE_RULES)["gpu-portal-team-jobs"]["spec"]

    (priority,) = [v for v in spec["validations"] if "priority of queued work" in v["message"]]
    assert "in ['gpu-portal-guaranteed']" in priority["expression"]
    assert (
        "in ['gpu-portal-opportunistic', 'gpu-portal-opportunistic-protected']"
        in priority["expression"]
    )
    assert "gpu-portal-guaranteed in the guaranteed queue" in priority["message"]


def test_a_job_is_protected_from_its_creation_or_never():
    spec = policies(KUEUE_RULES)["gpu-portal-team-jobs"]["spec"]

    (rule,) = [v for v in spec["validations"] if "protected from preemption" in v["message"]]
    assert rule["expression"].startswith("request.operation != 'UPDATE' || ")
    assert "'gpu-portal-opportunistic-protected'" in rule["expression"]


def test_the_templates_policy_covers_every_pod_controller_but_jobs_and_ignores_scaling():
    spec = policies(KUEUE_RULES)["gpu-portal-team-queued-templates"]["spec"]

    resources = {
        (tuple(r["apiGroups"]), resource)
        for r in spec["matchConstraints"]["resourceRules"]
        for resource in r["resources"]
    }
    assert resources == {
        (("apps",), "deployments"),
        (("apps",), "statefulsets"),
        (("apps",), "replicasets"),
        (("",), "replicationcontrollers"),
    }
    conditions = {c["name"]: c["expression"] for c in spec["matchConditions"]}
    assert conditions["template-written"].endswith(
        "object.spec.template != oldObject.spec.template"
    )


def test_in_kueue_mode_a_gpu_pod_is_a_jobs_or_gated_by_kueue():
    validations = pods_policy(KUEUE_RULES)["spec"]["validations"]
    variables = {v["name"]: v["expression"] for v in pods_policy(KUEUE_RULES)["spec"]["variables"]}

    assert "system:serviceaccount:kube-system:job-controller" in variables["jobControllersPod"]
    assert "o.kind == 'Job'" in variables["jobControllersPod"]
    assert "kueue.x-k8s.io/admission" in variables["kueueGated"]
    (queued,) = [v for v in validations if "variables.jobControllersPod" in v["expression"]]
    validations = [v for v in validations if "message" in v]
    assert queued["message"].startswith(
        "On this cluster Kueue admits every GPU workload through the team's queues: run it as a Job"
    )
    (gate,) = [v for v in validations if "lifts a queued pod's" in v["message"]]
    assert "oldObject.spec.schedulingGates" in gate["expression"]


def test_quota_mode_pods_have_no_queue_rules():
    variables = [v["name"] for v in pods_policy()["spec"]["variables"]]

    assert "jobControllersPod" not in variables
    assert not any(
        "Kueue" in v["message"] for v in pods_policy()["spec"]["validations"] if "message" in v
    )


def test_no_priority_class_is_allowed_unless_the_cluster_lists_it():
    (none,) = [
        v for v in pods_policy()["spec"]["validations"] if "priorityClassName" in v["expression"]
    ]
    listed = cluster_rules(
        portal_name="gpu-portal", allowed_priority_classes=["batch-low", "batch-low", "a"]
    )
    (some,) = [
        v
        for v in pods_policy(listed)["spec"]["validations"]
        if "priorityClassName" in v["expression"]
    ]

    assert "object.spec.priorityClassName in []" in none["expression"]
    assert "object.spec.priorityClassName in ['a', 'batch-low']" in some["expression"]
    assert "other than a, batch-low" in some["message"]


def test_gpu_jobs_and_bare_gpu_pods_have_a_maximum_run_time_in_both_modes():
    (job_deadline,) = policies()["gpu-portal-team-jobs"]["spec"]["validations"]
    (pod_deadline,) = [
        v
        for v in pods_policy()["spec"]["validations"]
        if "activeDeadlineSeconds" in v["expression"]
    ]

    assert job_deadline["expression"] == (
        "(request.operation == 'UPDATE' && !has(oldObject.spec.activeDeadlineSeconds)) || "
        "(has(object.spec.activeDeadlineSeconds) && object.spec.activeDeadlineSeconds <= 2592000)"
    )
    assert (
        "set spec.activeDeadlineSeconds (at most 2592000 seconds, 30 days)"
        in (job_deadline["message"])
    )
    # A controller's pods are exempt: their Job (or Deployment) says how long they run.
    assert "o.controller" in pod_deadline["expression"]


def test_only_restricted_volume_kinds_and_no_runtime_annotations():
    validations = pods_policy()["spec"]["validations"]
    (volumes,) = [v for v in validations if "object.spec.volumes" in v["expression"]]
    (annotations,) = [v for v in validations if "annotations" in v["expression"]]

    assert "has(v.persistentVolumeClaim)" in volumes["expression"]
    assert "nfs" not in volumes["expression"]
    assert "hostPath" not in volumes["expression"]
    assert "!k.startsWith('io.kubernetes.cri-o.')" in annotations["expression"]
    assert "!k.startsWith('cdi.k8s.io/')" in annotations["expression"]


def test_services_stay_inside_the_cluster_unless_the_namespace_says_the_team_may():
    (validation,) = policies()["gpu-portal-team-services"]["spec"]["validations"]

    assert (
        "namespaceObject.metadata.labels['gpuportal.io/external-services'] == 'allowed'"
        in (validation["expression"])
    )
    assert "object.spec.type == 'ClusterIP'" in validation["expression"]
    assert "size(object.spec.externalIPs) == 0" in validation["expression"]


def test_the_portals_role_may_write_every_policy_it_installs_and_no_other():
    """deploy/rbac.yaml names its admission policies one by one: a policy missing there would
    be refused to the portal on every real cluster."""
    import yaml

    from clusters.vocabulary import ADMISSION_POLICIES

    deploy = Path(__file__).resolve().parents[3] / "deploy"
    role = next(
        d
        for d in yaml.safe_load_all((deploy / "rbac.yaml").read_text())
        if d["kind"] == "ClusterRole"
    )
    (named,) = [
        r["resourceNames"]
        for r in role["rules"]
        if "validatingadmissionpolicies" in r["resources"] and "resourceNames" in r
    ]
    made = {
        o["metadata"]["name"]
        for o in admission_objects(KUEUE_RULES)
        if o["kind"] == "ValidatingAdmissionPolicy"
    }

    assert sorted(named) == sorted(f"gpu-portal-{name}" for name in ADMISSION_POLICIES)
    assert made == set(named)


def test_routes_stay_in_the_teams_domain_with_no_snippets():
    rules = cluster_rules(portal_name="gpu-portal", apps_domain="apps.acme.io")
    validations = policies(rules)["gpu-portal-team-routes"]["spec"]["validations"]
    ingress, route, snippets = validations

    assert "(namespaceObject.metadata.name + '.' + 'apps.acme.io')" in ingress["expression"]
    assert "!has(object.spec.defaultBackend)" in ingress["expression"]
    assert "<namespace>.apps.acme.io" in ingress["message"]
    assert "object.spec.hostnames.all(h" in route["expression"]
    assert "contains('snippet')" in snippets["expression"]
