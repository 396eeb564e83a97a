"""The devcluster's real node (devcluster/real_node.py) runs real containers: a kubelet of the
control plane's own version under containerd and runc, pods on a bridge of their own, Services
through kube-proxy, reachable from pods and from the host; logs come back through the apiserver,
which the kubelet authenticates. Only what tolerates its taint lands there."""

from __future__ import annotations

import secrets
import urllib.request

import pytest

from devcluster import images, versions
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def server_image(real_node) -> str:
    """The Debian base (Python 3.11) as the node's image: nothing is pulled."""
    name = images.base_image()
    real_node.load_image(name)
    return name


def on_real_node(real_node, name: str, image: str, command: list[str], **labels) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": real_node.node_selector,
            "tolerations": [real_node.toleration],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": image, "imagePullPolicy": "Never", "command": command}
            ],
        },
    }


def test_the_real_node_is_ready_at_the_control_planes_version_labelled_and_tainted(real_node, core):
    node = core.read_node(real_node.name)

    ready = {c.type: c.status for c in node.status.conditions}["Ready"]
    assert ready == "True"
    assert node.status.node_info.kubelet_version == versions.KUBERNETES_VERSION
    assert node.status.node_info.container_runtime_version.startswith("containerd://2.")
    assert node.metadata.labels[next(iter(real_node.node_selector))] == "true"
    assert [(t.key, t.effect) for t in node.spec.taints] == [
        (real_node.toleration["key"], "NoSchedule")
    ]


def test_a_pod_serves_through_its_service_to_the_host_and_to_another_pod(
    real_node, server_image, core, namespace
):
    token = secrets.token_hex(8)
    server = on_real_node(
        real_node,
        "server",
        server_image,
        [
            "sh",
            "-c",
            f"mkdir -p /srv && echo {token} > /srv/index.html && cd /srv && "
            "exec python3 -m http.server 8080",
        ],
        app="server",
    )
    core.create_namespaced_pod(namespace, server)
    core.create_namespaced_service(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "server"},
            "spec": {"selector": {"app": "server"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )

    pod = wait_for(
        lambda: (
            (p := core.read_namespaced_pod("server", namespace)).status.phase == "Running" and p
        ),
        timeout=90,
        what="the server pod to run",
    )
    assert pod.spec.node_name == real_node.name
    assert pod.status.pod_ip.startswith(real_node.pod_subnet.rsplit(".", 2)[0])
    cluster_ip = core.read_namespaced_service("server", namespace).spec.cluster_ip

    def answer() -> str | None:
        try:
            with urllib.request.urlopen(f"http://{cluster_ip}/", timeout=2) as response:
                return response.read().decode().strip()
        except OSError:
            return None

    assert wait_for(answer, timeout=60, what="the Service from the host") == token

    fetch = (
        "import urllib.request; "
        f"print('got', urllib.request.urlopen('http://{cluster_ip}/', timeout=5).read().decode())"
    )
    core.create_namespaced_pod(
        namespace, on_real_node(real_node, "client", server_image, ["python3", "-c", fetch])
    )
    wait_for(
        lambda: (
            core.read_namespaced_pod("client", namespace).status.phase in ("Succeeded", "Failed")
        ),
        timeout=90,
        what="the client pod to finish",
    )
    logs = core.read_namespaced_pod_log("client", namespace)
    assert core.read_namespaced_pod("client", namespace).status.phase == "Succeeded", logs
    assert logs.strip() == f"got {token}"


def test_a_pod_that_does_not_tolerate_the_taint_is_not_placed_there(
    real_node, server_image, core, namespace
):
    pod = on_real_node(real_node, "intolerant", server_image, ["true"])
    pod["spec"]["tolerations"] = []
    core.create_namespaced_pod(namespace, pod)

    def refused() -> str | None:
        events = core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=intolerant"
        ).items
        return next((e.message for e in events if e.reason == "FailedScheduling"), None)

    message = wait_for(refused, timeout=30, what="the scheduler to refuse the pod")
    assert "untolerated taint" in message
    assert core.read_namespaced_pod("intolerant", namespace).spec.node_name is None


def test_kwok_nodes_stay_simulated(real_node, core):
    runtimes = {
        node.metadata.name: node.status.node_info.container_runtime_version
        for node in core.list_node().items
    }

    simulated = {name for name, runtime in runtimes.items() if runtime.startswith("kwok")}
    assert simulated
    assert real_node.name not in simulated
    assert set(runtimes) - simulated == {real_node.name}
