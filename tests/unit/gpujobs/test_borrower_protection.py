"""Which protected borrowers lose their protection, from a listing of Jobs: those that have
run the minimum run time since Kueue last admitted them (their ``startTime``), all running ones
when a lender waited too long or the cluster has no minimum, never one waiting in its queue.
No cluster, no database."""

import datetime

from gpujobs.borrower_protection import ProtectedJob, protected_jobs, to_lower

NOW = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=datetime.UTC)
MINUTE = datetime.timedelta(minutes=1)


def job(name, *, suspend=False, started="2026-12-06T11:50:00Z"):
    status = {"startTime": started} if started else {}
    return {
        "metadata": {"namespace": "vision", "name": name},
        "spec": {"suspend": suspend},
        "status": status,
    }


def test_a_listing_says_since_when_each_protected_job_runs():
    found = protected_jobs(
        [job("running"), job("waiting", suspend=True), job("never-started", started=None)]
    )

    assert found == [
        ProtectedJob("vision", "running", NOW - 10 * MINUTE),
        ProtectedJob("vision", "waiting", None),
        ProtectedJob("vision", "never-started", None),
    ]


def test_only_jobs_past_the_minimum_run_time_are_lowered():
    jobs = [
        ProtectedJob("vision", "old", NOW - 20 * MINUTE),
        ProtectedJob("vision", "young", NOW - 5 * MINUTE),
        ProtectedJob("vision", "waiting", None),
    ]

    lowered = to_lower(jobs, min_runtime=10 * MINUTE, lender_waited_too_long=False, now=NOW)

    assert [j.name for j in lowered] == ["old"]


def test_a_lender_past_its_bound_or_no_minimum_lowers_every_running_one():
    jobs = [ProtectedJob("vision", "young", NOW - MINUTE), ProtectedJob("nlp", "waiting", None)]

    assert [
        j.name
        for j in to_lower(jobs, min_runtime=10 * MINUTE, lender_waited_too_long=True, now=NOW)
    ] == ["young"]
    assert [
        j.name
        for j in to_lower(
            jobs, min_runtime=datetime.timedelta(0), lender_waited_too_long=False, now=NOW
        )
    ] == ["young"]
