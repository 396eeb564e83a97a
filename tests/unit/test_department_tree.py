"""The department tree's arithmetic and a ceiling's, without a database: chains up, subtrees
down, cycles refused, and what a request adds to what a department's teams hold."""

from tenants import department_tree
from tenants.ceilings import CeilingCheck
from tenants.models import Department

# research (1) > vision (2) > vision-3d (3); sales (4) on its own.
PARENTS = {1: None, 2: 1, 3: 2, 4: None}


def test_a_chain_runs_from_the_department_up_to_the_top():
    assert department_tree.chain(3, PARENTS) == [3, 2, 1]


def test_a_top_department_is_its_own_chain():
    assert department_tree.chain(4, PARENTS) == [4]


def test_a_chain_stops_at_a_cycle_already_stored():
    assert department_tree.chain(1, {1: 2, 2: 1}) == [1, 2]


def test_a_subtree_holds_every_nested_department():
    assert department_tree.subtree(1, PARENTS) == {1, 2, 3}


def test_a_leaf_is_its_own_subtree():
    assert department_tree.subtree(3, PARENTS) == {3}


def test_nesting_a_department_in_its_grandchild_makes_a_cycle():
    assert department_tree.would_cycle(1, 3, PARENTS)


def test_nesting_a_department_in_itself_makes_a_cycle():
    assert department_tree.would_cycle(2, 2, PARENTS)


def test_moving_a_department_under_another_branch_makes_no_cycle():
    assert not department_tree.would_cycle(2, 4, PARENTS)


def test_moving_a_department_to_the_top_makes_no_cycle():
    assert not department_tree.would_cycle(3, None, PARENTS)


def check(*, ceiling, granted, gpus):
    return CeilingCheck(
        department=Department(slug="research"), ceiling=ceiling, granted=granted, gpus=gpus
    )


def test_a_request_that_fills_the_ceiling_exactly_holds():
    fits = check(ceiling=8, granted=6, gpus=2)

    assert (fits.after, fits.holds) == (8, True)
    assert fits.arithmetic == "research: 6 granted + 2 requested = 8 of its ceiling of 8"


def test_one_gpu_over_the_ceiling_does_not_hold_and_says_by_how_much():
    over = check(ceiling=8, granted=6, gpus=3)

    assert not over.holds
    assert over.arithmetic.endswith("= 9 of its ceiling of 8, over by 1")


def test_a_ceiling_of_zero_holds_nothing():
    assert not check(ceiling=0, granted=0, gpus=1).holds
