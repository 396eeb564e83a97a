"""Requests a pass or a sweep makes at once (``reconcile.passes.each`` and ``each_started``):
plain callables stand in for the cluster's API."""

import threading

import pytest

from reconcile import passes


def test_requests_started_run_while_the_caller_works_and_come_back_in_order():
    caller_worked = threading.Event()

    def read(kind):
        # Each request waits for the caller's own work: had they not started before the caller
        # asked for their results, this would time out.
        assert caller_worked.wait(timeout=5)
        return kind.lower()

    results = passes.each_started(read, ["Namespace", "ResourceQuota", "RoleBinding"])
    caller_worked.set()

    assert results() == ["namespace", "resourcequota", "rolebinding"]


def test_the_first_error_of_requests_started_is_raised_once_all_have_finished():
    finished = []

    def read(kind):
        if kind == "LocalQueue":
            raise LookupError("not served")
        threading.Event().wait(0.2)
        finished.append(kind)
        return kind

    results = passes.each_started(read, ["LocalQueue", "Namespace", "ResourceQuota"])

    with pytest.raises(LookupError, match="not served"):
        results()
    assert sorted(finished) == ["Namespace", "ResourceQuota"]
