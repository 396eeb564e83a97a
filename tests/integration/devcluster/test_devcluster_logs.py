"""Simulated containers have logs: kwok answers the API server's ``pods/log`` for every node,
from the devcluster's default log or from the file a test wrote for the pod."""

import pytest

from devcluster import podlogs
from tests.integration.conftest import wait_for
from tests.integration.kube import gpu_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


def running(core, namespace, name):
    core.create_namespaced_pod(namespace, gpu_pod(name, 1))
    return wait_for(
        lambda: (p := core.read_namespaced_pod(name, namespace)).status.phase == "Running" and p,
        what=f"pod {name} to run",
    )


def test_a_pod_without_a_log_of_its_own_serves_the_default_one(devcluster, core, namespace):
    running(core, namespace, "quiet")

    log = core.read_namespaced_pod_log("quiet", namespace, container="main")

    assert log.splitlines() == list(podlogs.DEFAULT_LINES)


def test_a_written_log_is_served_with_tail_and_appends(devcluster, core, namespace):
    running(core, namespace, "talker")
    devcluster.write_pod_log(namespace, "talker", [f"step {i}" for i in range(1, 11)])

    def tail(lines):
        return core.read_namespaced_pod_log("talker", namespace, tail_lines=lines).splitlines()

    assert wait_for(lambda: tail(3) == ["step 8", "step 9", "step 10"], what="kwok to serve it")
    devcluster.write_pod_log(namespace, "talker", ["step 11"])
    assert tail(2) == ["step 10", "step 11"]
    assert len(tail(100)) == 11
