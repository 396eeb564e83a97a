"""The portal's default notebook image (deploy/notebook/) on the real node, run as the portal runs
it: only its own arguments (the session's base URL), the token in JUPYTER_TOKEN, the image's
numeric non-root user under a restricted security context. JupyterLab answers at the base URL
behind the token, starts a Python kernel and offers terminals."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.integration.conftest import wait_for
from tests.integration.devcluster.restricted import restricted_pod, running

TOKEN = "secret"
BASE_URL = "/sessions/1/"


def call(url: str, method: str = "GET", token: str | None = TOKEN) -> tuple[int, object]:
    headers = {"Authorization": f"token {token}"} if token else {}
    data = b"{}" if method == "POST" else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, None


@pytest.fixture
def notebook(notebook_image, real_node, core, namespace) -> str:
    """A notebook server's URL (its base URL, from the host)."""
    core.create_namespaced_pod(
        namespace,
        restricted_pod(
            real_node,
            "notebook",
            notebook_image,
            args=[f"--ServerApp.base_url={BASE_URL}"],
            env={"JUPYTER_TOKEN": TOKEN},
        ),
    )
    pod = running(core, namespace, "notebook")
    url = f"http://{pod.status.pod_ip}:8888{BASE_URL}"

    def answers() -> bool:
        try:
            return call(f"{url}api/status")[0] == 200
        except OSError:
            return False

    wait_for(answers, timeout=90, interval=0.5, what="JupyterLab to answer")
    return url


def test_jupyterlab_answers_its_status_at_the_base_url_to_the_token_only(notebook):
    status, body = call(f"{notebook}api/status")

    assert status == 200
    assert {"last_activity", "kernels", "connections"} <= set(body)
    assert body["kernels"] == 0
    assert call(f"{notebook}api/status", token=None)[0] == 403
    assert call(f"{notebook}api/status", token="wrong")[0] == 403


def test_a_python_kernel_and_a_terminal_start(notebook):
    status, kernel = call(f"{notebook}api/kernels", method="POST")
    assert status == 201, kernel
    assert kernel["name"] == "python3"

    assert wait_for(
        lambda: call(f"{notebook}api/status")[1]["kernels"] == 1,
        timeout=30,
        what="the status to count the kernel",
    )
    status, terminal = call(f"{notebook}api/terminals", method="POST")
    assert status == 200, terminal
    status, terminals = call(f"{notebook}api/terminals")
    assert status == 200
    assert [t["name"] for t in terminals] == [terminal["name"]]
