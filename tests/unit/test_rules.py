"""Pure rules: names, capacity arithmetic and state transitions. No database, no services."""

import datetime
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from core.validators import dns1123_label_validator, extended_resource_name_validator
from tenants.audit import snapshot
from tenants.errors import InvalidTransition
from tenants.models import QuotaGrant, QuotaRequest, Team
from tenants.quota_checks import check_transition
from tenants.selectors import CapacitySummary, plannable_gpus


@pytest.mark.parametrize("name", ["a", "vision", "team-42", "0abc", "a" * 63])
def test_dns1123_labels_are_accepted(name):
    dns1123_label_validator(name)
    Team._meta.get_field("slug").clean(name, None)


@pytest.mark.parametrize(
    "name", ["", "Vision", "team_42", "-team", "team-", "team.a", "tëam", "a b", "a" * 64]
)
def test_names_that_are_not_dns1123_labels_are_rejected(name):
    with pytest.raises(ValidationError):
        Team._meta.get_field("slug").clean(name, None)


@pytest.mark.parametrize("name", ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu"])
def test_extended_resource_names_are_accepted(name):
    extended_resource_name_validator(name)


@pytest.mark.parametrize(
    "name", ["gpu", "nvidia.com/", "/gpu", "Nvidia.com/gpu", "nvidia.com/ gpu"]
)
def test_malformed_resource_names_are_rejected(name):
    with pytest.raises(ValidationError):
        extended_resource_name_validator(name)


@pytest.mark.parametrize(
    ("capacity", "ratio", "expected"),
    [(32, Decimal("1.00"), 32), (32, Decimal("1.50"), 48), (5, Decimal("1.25"), 6), (0, 2, 0)],
)
def test_plannable_gpus_is_capacity_times_overcommit_rounded_down(capacity, ratio, expected):
    assert plannable_gpus(capacity, ratio) == expected


def test_capacity_summary_reports_what_approving_would_leave():
    summary = CapacitySummary(
        cluster_id=1, gpu_resource="nvidia.com/gpu", capacity=16, plannable=16, granted=10
    )
    assert summary.free == 6
    assert summary.free_after(gpus=4, granted_in_period=10) == 2
    assert summary.free_after(gpus=8, granted_in_period=10) == -2
    assert summary.free_after(gpus=8, granted_in_period=4) == 4


@pytest.mark.parametrize("state", ["approved", "rejected", "cancelled"])
@pytest.mark.parametrize("to_state", ["approved", "rejected", "cancelled"])
def test_a_decided_request_cannot_change_state_again(state, to_state):
    quota_request = QuotaRequest(pk=7, state=state)
    with pytest.raises(InvalidTransition, match=f"quota request #7: it is {state}"):
        check_transition(quota_request, to_state)


@pytest.mark.parametrize("to_state", ["approved", "rejected", "cancelled"])
def test_a_pending_request_can_be_decided_or_cancelled(to_state):
    check_transition(QuotaRequest(pk=1, state="pending"), to_state)


@pytest.mark.parametrize("state", ["expired", "revoked"])
@pytest.mark.parametrize("to_state", ["active", "expired", "revoked"])
def test_an_ended_grant_cannot_change(state, to_state):
    with pytest.raises(InvalidTransition, match=f"it is {state}"):
        check_transition(QuotaGrant(pk=3, state=state), to_state)


def test_audit_snapshots_are_json_values():
    grant = QuotaGrant(
        team_id=1,
        cluster_id=2,
        gpu_resource="nvidia.com/gpu",
        gpus=4,
        cpu_cores=Decimal("8.5"),
        memory_gib=64,
        starts_on=datetime.date(2026, 12, 1),
        ends_on=None,
        state="active",
    )
    assert snapshot(grant) == {
        "team_id": 1, "cluster_id": 2, "gpu_resource": "nvidia.com/gpu", "gpu_model": "", "gpus": 4,
        "cpu_cores": "8.5", "memory_gib": 64, "starts_on": "2026-12-01", "ends_on": None,
        "state": "active",
    }  # fmt: skip
