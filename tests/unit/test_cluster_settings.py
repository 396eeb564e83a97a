"""A cluster's settings lists: allowed priority classes (names only, never system-*) and the
namespaces it reserves for its own components."""

import pytest
from django.core.exceptions import ValidationError

from clusters.models import validate_allowed_priority_classes


def test_names_are_accepted():
    validate_allowed_priority_classes(["batch-low", "inference.high", "a"])
    validate_allowed_priority_classes([])


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("batch-low", "Give a list of PriorityClass names"),
        ([1], "Give a list of PriorityClass names"),
        (["Batch"], "Not a PriorityClass name: 'Batch'"),
        (["-low"], "Not a PriorityClass name"),
        (["batch-low\n"], "Not a PriorityClass name"),
        (["x" * 254], "Not a PriorityClass name"),
        (["system-cluster-critical"], "system-cluster-critical: Kubernetes' system-* classes"),
        (["ok", "system-node-critical"], "never allowed in team namespaces"),
    ],
)
def test_bad_lists_are_refused_saying_why(value, says):
    with pytest.raises(ValidationError) as refused:
        validate_allowed_priority_classes(value)

    assert says in refused.value.messages[0]
    assert refused.value.code == "allowed_priority_classes"


def test_reserved_namespaces_are_namespace_names():
    from clusters.models import default_reserved_namespaces, validate_reserved_namespaces

    validate_reserved_namespaces(default_reserved_namespaces())
    for bad in ("monitoring", ["Monitoring"], ["a_b"], ["x" * 64], ["monitoring\n"]):
        with pytest.raises(ValidationError) as refused:
            validate_reserved_namespaces(bad)
        assert refused.value.code == "reserved_namespaces"


@pytest.mark.parametrize(
    "limits",
    [{}, {"services": "40"}, {"pods": 10, "requests.storage": "500Gi"}, {"count/jobs.batch": "0"}],
)
def test_object_limits_name_known_resources_with_whole_numbers(limits):
    from clusters.models import validate_object_limits

    validate_object_limits(limits)


@pytest.mark.parametrize(
    ("limits", "says"),
    [
        (["services"], "Give a mapping"),
        ({"nvidia.com/gpu": "4"}, "Unknown resource 'nvidia.com/gpu'"),
        ({"services": "-1"}, "services: '-1' is not a whole number"),
        ({"services": "100001"}, "is not a whole number from 0 to 100000"),
        ({"services": True}, "services: True is not a whole number"),
        ({"requests.storage": "lots"}, "is not a quantity such as 500Gi"),
        ({"requests.storage": "1.5Ti"}, "is not a quantity"),
        ({"requests.storage": "1Ti\n"}, "is not a quantity"),
    ],
)
def test_bad_object_limits_are_refused_saying_why(limits, says):
    from clusters.models import validate_object_limits

    with pytest.raises(ValidationError) as refused:
        validate_object_limits(limits)

    assert says in refused.value.messages[0]


@pytest.mark.parametrize("domain", ["apps", "Apps.example.com", "apps.example.com\n", "a..b"])
def test_an_apps_domain_is_a_lower_case_dns_domain(domain):
    from clusters.models import validate_apps_domain

    with pytest.raises(ValidationError):
        validate_apps_domain(domain)
