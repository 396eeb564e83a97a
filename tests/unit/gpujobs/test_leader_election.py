"""The watcher's leader election, decided with explicit clock values: who creates, renews or
takes over a cluster's Lease, when a holder must stop acting, and that it always stops before
another replica may take the Lease (workloads/leader_election.py). The election against a real
API server, with two watcher processes and one killed, is
tests/integration/gpujobs/test_watcher_replicas.py."""

import datetime

import pytest

from clusters.leases import LeaseRecord, lease_body, micro_time
from workloads.leader_election import Action, Seen, decide, leading, observe, renew_deadline

LEASE = 15
RENEW = 5
DEADLINE = renew_deadline(lease_seconds=LEASE, renew_seconds=RENEW)


def held_by(holder: str, version: str = "7", duration: int = LEASE) -> LeaseRecord:
    return LeaseRecord(
        holder=holder, duration_seconds=duration, transitions=0, resource_version=version
    )


def test_no_lease_is_created():
    assert decide(me="a-1", record=None, seen=None, now=100.0) is Action.CREATE


def test_the_holder_renews_its_own_lease():
    record = held_by("a-1")
    seen = observe(None, record, now=100.0)
    assert decide(me="a-1", record=record, seen=seen, now=100.0) is Action.RENEW


def test_a_released_lease_is_taken_at_once():
    record = held_by("")
    seen = observe(None, record, now=100.0)
    assert decide(me="b-2", record=record, seen=seen, now=100.0) is Action.TAKE_OVER


def test_another_holders_lease_is_left_alone_until_it_stood_unchanged_for_its_duration():
    record = held_by("a-1")
    seen = observe(None, record, now=100.0)
    assert decide(me="b-2", record=record, seen=seen, now=100.0) is Action.WAIT
    assert decide(me="b-2", record=record, seen=seen, now=114.9) is Action.WAIT
    assert decide(me="b-2", record=record, seen=seen, now=115.0) is Action.TAKE_OVER


def test_the_lease_duration_is_the_one_the_lease_states():
    record = held_by("a-1", duration=3)
    seen = observe(None, record, now=100.0)
    assert decide(me="b-2", record=record, seen=seen, now=102.9) is Action.WAIT
    assert decide(me="b-2", record=record, seen=seen, now=103.0) is Action.TAKE_OVER


def test_a_renewal_seen_restarts_the_wait():
    seen = observe(None, held_by("a-1", version="7"), now=100.0)
    renewed = held_by("a-1", version="8")
    seen = observe(seen, renewed, now=110.0)
    assert seen == Seen("8", 110.0)
    assert decide(me="b-2", record=renewed, seen=seen, now=120.0) is Action.WAIT
    assert decide(me="b-2", record=renewed, seen=seen, now=125.0) is Action.TAKE_OVER


def test_the_same_version_keeps_the_time_it_was_first_seen():
    seen = observe(None, held_by("a-1"), now=100.0)
    assert observe(seen, held_by("a-1"), now=112.0) == Seen("7", 100.0)


def test_a_candidate_that_never_saw_the_version_waits():
    """No time is compared with another machine's clock: a version this process did not see
    yet has stood unchanged for no time at all as far as it knows."""
    record = held_by("a-1", version="9")
    stale = Seen("8", 0.0)
    assert decide(me="b-2", record=record, seen=stale, now=1000.0) is Action.WAIT


def test_a_lease_gone_is_forgotten():
    assert observe(Seen("7", 100.0), None, now=105.0) is None


def test_a_holder_leads_until_its_renew_deadline():
    assert DEADLINE == 10
    assert leading(renewed_at=100.0, now=100.0, renew_deadline=DEADLINE)
    assert leading(renewed_at=100.0, now=109.9, renew_deadline=DEADLINE)
    assert not leading(renewed_at=100.0, now=110.0, renew_deadline=DEADLINE)


def test_a_process_that_never_renewed_does_not_lead():
    assert not leading(renewed_at=None, now=100.0, renew_deadline=DEADLINE)


@pytest.mark.parametrize("renew", [0, -1, 15, 20])
def test_the_renewal_interval_must_be_shorter_than_the_lease(renew):
    with pytest.raises(ValueError, match="renewal interval"):
        renew_deadline(lease_seconds=15, renew_seconds=renew)


def test_the_old_leader_stops_before_another_replica_may_take_over():
    """Leader a renews at t=100 (the renewal starts then, and lands a little later, when b
    reads it); then a's renewals fail. a stops acting at 110; b may take over at 115 at the
    earliest, by its own clock: a whole renewal interval later."""
    renewal_started = 100.0
    b_reads_it = 100.2
    record = held_by("a-1", version="8")
    seen = observe(Seen("7", 95.0), record, now=b_reads_it)
    a_stops = next(
        t / 10
        for t in range(1000, 1200)
        if not leading(renewed_at=renewal_started, now=t / 10, renew_deadline=DEADLINE)
    )
    b_takes_over = next(
        t / 10
        for t in range(1000, 1200)
        if decide(me="b-2", record=record, seen=seen, now=t / 10) is Action.TAKE_OVER
    )
    assert a_stops == 110.0
    assert b_takes_over >= 115.0
    assert b_takes_over - a_stops >= RENEW


def test_a_lease_body_names_its_holder_and_version():
    body = lease_body(
        namespace="gpu-portal",
        name="gpu-portal-watcher-east",
        holder="web-1-42",
        duration_seconds=15,
        transitions=2,
        acquired_at="2026-12-02T01:00:00.000000Z",
        renewed_at="2026-12-02T01:00:05.000000Z",
        labels={"app.kubernetes.io/managed-by": "gpu-portal"},
        resource_version="81",
    )
    assert body["metadata"]["resourceVersion"] == "81"
    assert body["spec"] == {
        "holderIdentity": "web-1-42",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 2,
        "acquireTime": "2026-12-02T01:00:00.000000Z",
        "renewTime": "2026-12-02T01:00:05.000000Z",
    }


def test_micro_time_always_has_six_digits_of_microseconds():
    moment = datetime.datetime(2026, 12, 2, 1, 0, 5, tzinfo=datetime.UTC)
    assert micro_time(moment) == "2026-12-02T01:00:05.000000Z"
