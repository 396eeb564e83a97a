"""Kueue mode with departments on the devcluster, through the real worker with deploy/rbac.yaml's
role: the portal's cohort tree mirrors the departments of the cluster's teams, each team's queues
are in its department's cohort, moving a team or a department moves them, and a team still
borrows the idle GPUs of a team in another department through the root cohort."""

import uuid

import pytest

from clusters.vocabulary import cohort_name, department_cohort_name
from tenants import departments
from tests.integration.conftest import wait_for

from .conftest import A100, H100, in_sync
from .test_kueue_queues import (
    cluster_in_sync,
    guaranteed_queue,
    opportunistic_queue,
    queued_job,
    wait_for_nominal,
    workload_condition,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture(autouse=True)
def _clean_cohort(kueue_clean):
    """Set up first, so torn down last: after the test's namespaces are deleted."""


@pytest.fixture
def make_department(admin_user):
    def make(name: str, parent=None):
        slug = f"d-{uuid.uuid4().hex[:6]}-{name}"
        return departments.department_create(actor=admin_user, slug=slug, name=name, parent=parent)

    return make


def cohort_tree(portal) -> dict[str, str]:
    """The portal's cohorts on the cluster, name -> parentName ("" for a root)."""
    return {
        name: (portal.objects.get("cohorts", name) or {}).get("spec", {}).get("parentName", "")
        for name in portal.objects.names("cohorts")
    }


def queue_cohorts(portal, team) -> set[str]:
    return {
        (portal.objects.get("clusterqueues", queue) or {}).get("spec", {}).get("cohortName")
        for queue in (guaranteed_queue(portal, team), opportunistic_queue(portal, team))
    }


def wait_for_tree(portal, expected: dict[str, str], *, timeout: float = 60):
    return wait_for(
        lambda: cohort_tree(portal) == expected,
        timeout=timeout,
        what=f"the cohort tree {expected} (has {cohort_tree(portal)})",
    )


def wait_for_queue_cohort(portal, team, cohort: str, *, timeout: float = 60):
    return wait_for(
        lambda: queue_cohorts(portal, team) == {cohort},
        timeout=timeout,
        what=f"{team.slug}'s queues in cohort {cohort}",
    )


def test_the_cohort_tree_mirrors_the_departments_and_follows_moves(
    kueue_portal, queue_cluster, make_team, make_department, approve, admin_user
):
    portal = kueue_portal
    research = make_department("research")
    vision = make_department("vision", parent=research)
    sales = make_department("sales")
    unused = make_department("unused")
    a = make_team("a", department=vision)
    b = make_team("b", department=sales)
    c = make_team("c")
    for team in (a, b, c):
        approve(team, queue_cluster, gpus=1, gpu_model=A100)

    root = cohort_name(portal.name)

    def cohort(department):
        return department_cohort_name(portal.name, department.slug)

    wait_for_queue_cohort(portal, a, cohort(vision))
    wait_for_queue_cohort(portal, b, cohort(sales))
    wait_for_queue_cohort(portal, c, root)
    departments.team_set_department(actor=admin_user, team=c, department=sales)
    wait_for_queue_cohort(portal, c, cohort(sales))
    # A department without a team on the cluster has no cohort there; research has one, for
    # vision's sake.
    wait_for_tree(
        portal,
        {
            root: "",
            cohort(research): root,
            cohort(vision): cohort(research),
            cohort(sales): root,
        },
    )
    assert cohort(unused) not in cohort_tree(portal)

    # b and c leave sales: its cohort goes.
    departments.team_set_department(actor=admin_user, team=b, department=vision)
    departments.team_set_department(actor=admin_user, team=c, department=None)
    wait_for_queue_cohort(portal, b, cohort(vision))
    wait_for_queue_cohort(portal, c, root)
    wait_for_tree(portal, {root: "", cohort(research): root, cohort(vision): cohort(research)})

    # vision moves to the top: research is left without teams.
    departments.department_update(actor=admin_user, department=vision, parent=None)
    wait_for_tree(portal, {root: "", cohort(vision): root})
    assert queue_cohorts(portal, a) == {cohort(vision)}

    # Renamed: its cohort is renamed, and its teams' queues follow.
    renamed = departments.department_update(
        actor=admin_user, department=vision, slug=f"{vision.slug}-2"
    )
    wait_for_queue_cohort(portal, a, cohort(renamed))
    wait_for_queue_cohort(portal, b, cohort(renamed))
    wait_for_tree(portal, {root: "", cohort(renamed): root})
    cluster_in_sync(queue_cluster)
    in_sync(a, queue_cluster)


def test_a_team_borrows_idle_gpus_of_a_team_in_another_department(
    kueue_portal, batch, queue_cluster, make_team, make_department, approve
):
    portal = kueue_portal
    lenders, borrowers = make_department("lenders"), make_department("borrowers")
    lender = make_team("lender", department=lenders)
    borrower = make_team("borrower", department=borrowers)
    approve(lender, queue_cluster, gpus=8, gpu_model=A100)
    approve(borrower, queue_cluster, gpus=1, gpu_model=H100)
    wait_for_nominal(portal, guaranteed_queue(portal, lender), A100, "8")
    wait_for_queue_cohort(portal, borrower, department_cohort_name(portal.name, borrowers.slug))
    wait_for_queue_cohort(portal, lender, department_cohort_name(portal.name, lenders.slug))
    cluster_in_sync(queue_cluster)
    in_sync(borrower, queue_cluster)

    # The borrower has no A100 of its own: only the lender's idle ones, in another department.
    batch.create_namespaced_job(
        borrower.slug, queued_job("borrow", portal, 4, kind="opportunistic", gpu_model=A100)
    )

    admitted = wait_for(
        lambda: (
            (c := workload_condition(portal, borrower.slug, "borrow", "Admitted"))
            and c["status"] == "True"
            and c
        ),
        what="the borrower's A100 job admitted on the lender's idle GPUs",
    )
    assert admitted
    assert batch.read_namespaced_job("borrow", borrower.slug).spec.suspend is False
