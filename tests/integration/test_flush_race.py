"""The race behind a GPU job test that once met a duplicate ``GpuCapacity`` row in its fixture:
the previous test's flush deadlocked with a process still writing, PostgreSQL gave up the flush,
and its rows (the cluster ``devcluster`` and its capacity) stayed for the next test, whose
``gpu_cluster`` found the cluster by name and added its capacity row again.

Here a thread plays the worker: it holds the table the flush will reach last, and once the flush
waits for it, reads the table the flush took first. tests/conftest.py's flush outlasts that."""

import threading

import pytest
from django.db import connection, connections, transaction
from django.test import TransactionTestCase

from clusters.models import Cluster, GpuCapacity
from tests import factories
from tests.integration.conftest import backend_pid, wait_for, waiting_for_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


class _Case(TransactionTestCase):
    """What pytest-django runs after a committing test: ``_fixture_teardown`` flushes."""

    databases = {"default"}


def test_a_flush_that_deadlocks_with_a_writer_still_empties_the_tables():
    cluster = factories.ClusterFactory(name="devcluster")
    factories.GpuCapacityFactory(cluster=cluster)
    # The flush truncates the tables in this order (a set's, the same in this process).
    order = connection.introspection.django_table_names(only_existing=True, include_views=False)
    first, last = connection.ops.quote_name(order[0]), connection.ops.quote_name(order[-1])
    holding, flush_waits = threading.Event(), threading.Event()
    outcome: dict = {}

    def worker():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {last} IN ROW EXCLUSIVE MODE")  # as a row write does
                holding.set()
                flush_waits.wait(timeout=30)
                cursor.execute(f"SELECT count(*) FROM {first}")
            outcome["worker"] = "committed"
        except Exception as error:
            outcome["worker"] = error
        finally:
            connections.close_all()

    def flush():
        try:
            outcome["flush_pid"] = backend_pid()
            _Case()._fixture_teardown()
            outcome["flush"] = "flushed"
        except Exception as error:
            outcome["flush"] = error
        finally:
            connections.close_all()

    writer = threading.Thread(target=worker)
    writer.start()
    assert holding.wait(timeout=30)
    flusher = threading.Thread(target=flush)
    flusher.start()
    wait_for(
        lambda: "flush_pid" in outcome and waiting_for_a_lock(outcome["flush_pid"]),
        interval=0.02,
        what="the flush to wait for the worker's table",
    )
    flush_waits.set()  # the worker now asks for a table the flush holds: a deadlock
    writer.join(timeout=60)
    flusher.join(timeout=60)

    assert outcome["flush"] == "flushed", outcome
    assert not Cluster.objects.exists()
    assert not GpuCapacity.objects.exists()
    # What the next test's gpu_cluster fixture does now works:
    again = factories.ClusterFactory(name="devcluster")
    factories.GpuCapacityFactory(cluster=again)
