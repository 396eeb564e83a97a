"""The admission policies' builders: what they match, where they are bound, and which rules a
cluster's settings put in them. (What the API server makes of the CEL is proved on the
devcluster, tests/integration/isolation/test_admission_policies.py.)"""

from tenants import admission_policies
from tenants.admission_policies import cel_string

RULES = admission_policies.cluster_rules(
    portal_name="gpu-portal",
    gpu_node_selector={"hardware-type": "gpu"},
    gpu_taint_key="nvidia.com/gpu",
    allowed_registries=["registry.example.com"],
)


def objects(rules=RULES):
    return {o["metadata"]["name"]: o for o in admission_policies.admission_objects(rules)}


def test_two_policies_each_bound_to_the_namespaces_the_portal_manages():
    made = objects()

    assert sorted(made) == ["gpu-portal-team-pods", "gpu-portal-team-secrets"]
    by_kind = {}
    for obj in admission_policies.admission_objects(RULES):
        by_kind.setdefault(obj["kind"], []).append(obj)
    for binding in by_kind["ValidatingAdmissionPolicyBinding"]:
        assert binding["spec"]["policyName"] == binding["metadata"]["name"]
        assert binding["spec"]["validationActions"] == ["Deny"]
        assert binding["spec"]["matchResources"] == {
            "namespaceSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "gpu-portal"}}
        }
    for obj in admission_policies.admission_objects(RULES):
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-portal"}


def pods_policy(rules=RULES):
    (policy,) = [
        o
        for o in admission_policies.admission_objects(rules)
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
    everything = admission_policies.cluster_rules(
        portal_name="gpu-portal", allow_all_registries=True
    )
    open_ = pods_policy(everything)["spec"]

    assert any("refusedImages" in v["expression"] for v in strict["validations"])
    assert not any("refusedImages" in v["expression"] for v in open_["validations"])


def test_an_empty_allow_list_allows_no_registry():
    rules = admission_policies.cluster_rules(portal_name="gpu-portal")

    (refused,) = [
        v for v in pods_policy(rules)["spec"]["variables"] if v["name"] == "refusedImages"
    ]
    assert "&& (false)" in refused["expression"]


def test_the_registries_are_matched_by_whole_components():
    (refused,) = [v for v in pods_policy()["spec"]["variables"] if v["name"] == "refusedImages"]

    assert "== 'registry.example.com'" in refused["expression"]
    assert ".startsWith('registry.example.com/')" in refused["expression"]


def test_a_cluster_without_gpu_labels_or_taint_has_no_placement_rules():
    rules = admission_policies.cluster_rules(portal_name="gpu-portal", allow_all_registries=True)

    messages = [v.get("message", "") for v in pods_policy(rules)["spec"]["validations"]]
    assert not any("GPU nodes" in m or "GPU taint" in m for m in messages)


def test_cel_strings_hold_quotes_and_backslashes_exactly():
    assert cel_string("it's") == "'it\\'s'"
    assert cel_string("a\\b") == "'a\\\\b'"


def test_the_secrets_policy_refuses_service_account_tokens():
    (policy,) = [
        o
        for o in admission_policies.admission_objects(RULES)
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("secrets")
    ]

    (validation,) = policy["spec"]["validations"]
    assert "kubernetes.io/service-account-token" in validation["expression"]
