"""The traffic plan: over HTTPRoute weights every revision runs its own replicas and takes its
weight; behind one Service the weights become replica counts, and the share is what they give."""

from dataclasses import dataclass

from serving import traffic


@dataclass
class R:
    number: int
    role: str
    replicas: int
    weight: int
    gpus: int = 1


def test_gateway_weights_are_exact_and_replicas_are_the_revisions_own():
    plan = traffic.plan([R(1, "stable", 2, 90), R(2, "candidate", 1, 10)], routing="gateway-api")

    assert [(s.number, s.replicas, s.share) for s in plan] == [(1, 2, 90.0), (2, 1, 10.0)]


def test_behind_one_service_a_canary_gets_the_replicas_its_weight_asks_beside_the_stable():
    plan = traffic.plan([R(1, "stable", 9, 90), R(2, "candidate", 1, 10)], routing="replicas")

    assert [(s.number, s.replicas, s.share) for s in plan] == [(1, 9, 90.0), (2, 1, 10.0)]


def test_behind_one_service_a_small_canary_is_approximated_and_the_share_says_so():
    plan = traffic.plan([R(1, "stable", 2, 90), R(2, "candidate", 1, 10)], routing="replicas")

    assert [(s.number, s.replicas, s.share) for s in plan] == [(1, 2, 66.7), (2, 1, 33.3)]


def test_an_even_ab_test_behind_one_service_runs_as_many_of_each():
    plan = traffic.plan([R(1, "stable", 3, 50), R(2, "candidate", 1, 50)], routing="replicas")

    assert [s.replicas for s in plan] == [3, 3]


def test_a_rolling_revision_runs_its_own_replicas_at_weight_zero():
    plan = traffic.plan([R(1, "stable", 2, 100), R(2, "candidate", 2, 0)], routing="gateway-api")

    assert [(s.replicas, s.share) for s in plan] == [(2, 100.0), (2, 0.0)]


def test_a_stopped_service_runs_nothing_and_holds_no_gpus():
    revisions = [R(1, "stable", 2, 100, gpus=4)]

    assert traffic.gpus_held(revisions, routing="replicas", stopped=True) == 0
    assert traffic.gpus_held(revisions, routing="replicas") == 8
