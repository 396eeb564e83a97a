"""Concurrent approvals against real PostgreSQL must never grant more than the cluster has, nor
(a department admin's) more than the department's ceiling."""

import threading

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connections
from django.db.models import Sum

from tenants import quota
from tenants.models import DepartmentCeiling, QuotaGrant, QuotaRequest
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def approve_all_at_once(requests: list[QuotaRequest], reviewer) -> list[object]:
    """Approve every request from its own thread (own DB connection), released together."""
    barrier = threading.Barrier(len(requests))
    outcomes: list[object] = [None] * len(requests)

    def approve(index: int, quota_request: QuotaRequest) -> None:
        try:
            barrier.wait(timeout=30)
            outcomes[index] = quota.quota_request_approve(
                reviewer=reviewer, quota_request=quota_request
            )
        except Exception as error:
            outcomes[index] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=approve, args=(i, r)) for i, r in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def test_concurrent_approvals_never_exceed_capacity(postgres_database, admin):
    # Given a cluster with 8 GPUs and eight teams each asking for 3
    cluster = factories.ClusterFactory(name="race")
    factories.GpuCapacityFactory(cluster=cluster, allocatable=8)
    requests = [
        factories.QuotaRequestFactory(
            cluster=cluster, gpus=3, team=factories.TeamFactory(slug=f"racer-{i}")
        )
        for i in range(8)
    ]

    # When an admin approves all eight at the same moment
    outcomes = approve_all_at_once(requests, admin)

    # Then exactly two fit, the rest are refused for capacity, and nothing is over-allocated
    grants = [o for o in outcomes if isinstance(o, QuotaGrant)]
    refusals = [o for o in outcomes if isinstance(o, ValidationError)]
    assert len(grants) == 2, outcomes
    assert len(refusals) == 6, outcomes
    assert all("Not enough capacity" in str(r.message_dict["gpus"]) for r in refusals)
    active = QuotaGrant.objects.filter(cluster=cluster, state=QuotaGrant.State.ACTIVE)
    assert active.aggregate(total=Sum("gpus"))["total"] == 6
    assert QuotaRequest.objects.filter(state=QuotaRequest.State.PENDING).count() == 6


def test_concurrent_approvals_of_the_same_request_grant_it_once(postgres_database, admin):
    # Given one pending request
    cluster = factories.ClusterFactory(name="twice")
    factories.GpuCapacityFactory(cluster=cluster, allocatable=64)
    quota_request = factories.QuotaRequestFactory(cluster=cluster, gpus=4)

    # When four admins' clicks approve it at the same moment
    outcomes = approve_all_at_once([quota_request] * 4, admin)

    # Then one grant exists and the other three were told it is no longer pending
    assert sum(isinstance(o, QuotaGrant) for o in outcomes) == 1, outcomes
    assert QuotaGrant.objects.filter(request=quota_request).count() == 1
    assert all("it is approved" in str(o) for o in outcomes if not isinstance(o, QuotaGrant))


def test_concurrent_delegated_approvals_never_exceed_the_department_ceiling(postgres_database):
    # Given department research with a ceiling of 8 A100 on a 64-GPU cluster, its admin, and
    # eight of its teams each asking for 3 A100
    a100 = "NVIDIA-A100-SXM4-80GB"
    cluster = factories.ClusterFactory(name="ceiling-race")
    factories.GpuCapacityFactory(cluster=cluster, allocatable=64)
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=a100, allocatable=64)
    research = factories.DepartmentFactory(slug="research")
    DepartmentCeiling.objects.create(department=research, cluster=cluster, gpu_model=a100, gpus=8)
    dept_admin = factories.UserFactory(username="dana-dept-admin")
    research.admins.add(dept_admin)
    requests = [
        factories.QuotaRequestFactory(
            cluster=cluster,
            gpus=3,
            gpu_model=a100,
            team=factories.TeamFactory(slug=f"research-{i}", department=research),
        )
        for i in range(8)
    ]

    # When the department admin approves all eight at the same moment
    outcomes = approve_all_at_once(requests, dept_admin)

    # Then two fit under the ceiling and six are refused with its arithmetic: the cluster
    # would have had room for all of them
    grants = [o for o in outcomes if isinstance(o, QuotaGrant)]
    refusals = [o for o in outcomes if isinstance(o, PermissionDenied)]
    assert len(grants) == 2, outcomes
    assert len(refusals) == 6, outcomes
    assert all("of its ceiling of 8" in str(r) for r in refusals)
    active = QuotaGrant.objects.filter(cluster=cluster, state=QuotaGrant.State.ACTIVE)
    assert active.aggregate(total=Sum("gpus"))["total"] == 6
