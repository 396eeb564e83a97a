"""The chart installed for real, as the deploying guide (docs/deploying/helm.md "Installed in
the devcluster") shows it: `helm install` of deploy/helm/gpu-portal into the devcluster, every
pod on the real node running the image built here (loaded into the node's containerd, never
pulled), under the chart's security context. PostgreSQL and Redis are the host's, of this test's
own: pods reach them at the host's address, with a password (the real node's pod subnet is the
only network let in).

Then, through the release's Service: the migration hook ran before the pods started, the web
pods pass /readyz and serve the login page and the API; a team and a grant made through that
in-cluster portal's API reach the cluster as quota within seconds (its worker acting with the
ServiceAccount's in-cluster credentials, confined by the chart's admission policy); its watcher
holds the Lease and reports a job's state; an inference service's canary takes its share of
real requests through the devcluster's gateway (Traefik); `helm upgrade` rolls the pods while a
polling client sees no failed request; `helm rollback` and `helm uninstall` leave the team's
namespace and quota alone.

The cluster is registered with the real node as its GPU nodes (it advertises 4 GPUs for the
module's length, as a device plugin would), so that the job and the service's revisions are
real containers: the job prints, the revisions answer HTTP with their pod's name.

The release has a portal name of its own (``chart-portal``), so that its cluster-wide objects
(ClusterRoles, the confinement policy, the admission policies it installs) stand beside the
devcluster's ``gpu-portal`` ones. The tests run in the file's order: install, use, upgrade,
roll back, uninstall.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest
import yaml
from kubernetes import client

from clusters.vocabulary import JOB_ID_LABEL
from devcluster import builder, images
from devcluster.real_node import LABEL, REAL_NODE_NAME
from tests.integration.conftest import wait_for
from tests.integration.deploy.conftest import CHART
from tests.integration.kube import delete_namespace, read_or_none
from tests.integration.private_services import PrivatePostgres, PrivateRedis

pytestmark = [pytest.mark.integration]

RELEASE = "portal"
FULLNAME = f"{RELEASE}-gpu-portal"
PORTAL_NAME = "chart-portal"
HOST = "portal.chart.test"
CLUSTER = "devcluster"
PASSWORD = "chart-user-" + secrets.token_hex(8)
GPU = "nvidia.com/gpu"
REAL_NODE_GPUS = 4
STABLE_IMAGE = images.PORTAL_IMAGE
CANARY_IMAGE = images.PORTAL_IMAGE.rsplit(":", 1)[0] + ":canary"
# A revision's server: answers every GET with its pod's name (which names its revision).
ECHO_SERVER = """
import http.server, socket
class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = socket.gethostname().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("", 8000), Echo).serve_forever()
"""
# Small enough for the real node's share of a CI machine (2 cores): every component runs, the
# web server twice (a rolling update needs a second pod to fail no request).
SMALL = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}
SMALL_WORKLOAD = {"cpu_cores": "0.1", "memory_gib": "0.5"}


def chart_values(real_node, gateway, postgres: PrivatePostgres, redis: PrivateRedis) -> dict:
    """The values the guide installs with: the image loaded into the node, the host's
    services at the node's address, every pod on the real node."""
    repository, tag = images.PORTAL_IMAGE.rsplit(":", 1)
    address = real_node.address
    return {
        "portalName": PORTAL_NAME,
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "nodeSelector": real_node.node_selector,
        "tolerations": [real_node.toleration],
        "secrets": {
            "secretKey": "chart-test-" + secrets.token_hex(24),
            "databaseUrl": postgres.url_at(address) + "?connect_timeout=3",
            "brokerUrl": redis.url_at(address, 0),
            "cacheUrl": redis.url_at(address, 1),
        },
        "config": {
            "allowedHosts": [HOST],
            "sslRedirect": False,
            # The inventory sync and the sweep squeezed to seconds, for a test's patience.
            "env": {
                "PORTAL_INVENTORY_SYNC_SECONDS": "5",
                "PORTAL_RECONCILE_SWEEP_SECONDS": "15",
                # Inference services' routes attach to the devcluster's gateway (Traefik).
                "SERVING_GATEWAY": gateway.reference,
            },
        },
        "web": {"replicas": 2, "workers": 1, "resources": SMALL},
        "worker": {"resources": SMALL},
        "webhookWorker": {"concurrency": 1, "resources": SMALL},
        "beat": {"resources": SMALL},
        "watcher": {"resources": SMALL},
        "migrations": {"resources": SMALL},
    }


class Release:
    """The installed release: Helm and kubectl on it, its Service, its API."""

    def __init__(self, helm, devcluster, gateway, namespace: str, values: Path, postgres):
        self.helm, self.devcluster, self.gateway = helm, devcluster, gateway
        self.namespace, self.values, self.postgres = namespace, values, postgres
        self.api_client = devcluster.api_client()
        self.core = client.CoreV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.tokens: dict[str, str] = {}
        self.team = ""
        self.team_namespaces: list[str] = []

    def helm_run(self, *args: str, timeout: float = 600) -> str:
        result = self.helm.run(
            *args,
            "-n",
            self.namespace,
            "--kubeconfig",
            str(self.devcluster.kubeconfig),
            timeout=timeout,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result.stdout

    def kubectl(self, *args: str, timeout: float = 180) -> str:
        result = subprocess.run(
            [
                str(builder.binary("kubectl")),
                f"--kubeconfig={self.devcluster.kubeconfig}",
                f"--namespace={self.namespace}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result.stdout

    def manage(self, *args: str) -> str:
        """`manage.py` in a web pod, as an admin runs it with kubectl exec."""
        return self.kubectl("exec", f"deploy/{FULLNAME}-web", "--", "python", "manage.py", *args)

    @functools.cached_property
    def base_url(self) -> str:
        """The Service's cluster IP, read once (the upgrade's poller asks for it each request)."""
        service = self.core.read_namespaced_service(FULLNAME, self.namespace)
        return f"http://{service.spec.cluster_ip}:{service.spec.ports[0].port}"

    def sign_in(self, username: str) -> str:
        """A new API token for ``username``, as the CLI gets one."""
        answer = self.call(
            "POST", "/api/v1/auth/token/", json={"username": username, "password": PASSWORD}
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["token"]

    def http(self, actor: str = "admin", **kwargs) -> httpx.Client:
        headers = {"Host": HOST, **kwargs.pop("headers", {})}
        if actor in self.tokens:
            headers["Authorization"] = f"Token {self.tokens[actor]}"
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30, **kwargs)

    def call(self, method: str, path: str, *, actor: str = "admin", **kwargs) -> httpx.Response:
        with self.http(actor) as http:
            return http.request(method, path, **kwargs)

    def pods(self, component: str) -> list[client.V1Pod]:
        selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
        return self.core.list_namespaced_pod(self.namespace, label_selector=selector).items

    def logs(self) -> str:
        """Every pod's last lines, for a failure's message."""
        tails = []
        for pod in self.core.list_namespaced_pod(self.namespace).items:
            for container in pod.spec.containers:
                try:
                    text = self.core.read_namespaced_pod_log(
                        pod.metadata.name, self.namespace, container=container.name, tail_lines=30
                    )
                except client.ApiException as error:
                    text = f"(no log: {error.reason})"
                tails.append(f"--- {pod.metadata.name}/{container.name}\n{text}")
        return "\n".join(tails)


@pytest.fixture(scope="module")
def gpus(devcluster, real_node):
    """The real node advertises GPUs, as a device plugin would (the kwok nodes do the same),
    so that the portal's GPU jobs and services land there and run; taken back after."""
    api = devcluster.api_client()
    core = client.CoreV1Api(api)
    core.patch_node_status(real_node.name, {"status": {"capacity": {GPU: str(REAL_NODE_GPUS)}}})
    yield REAL_NODE_GPUS
    core.patch_node_status(
        real_node.name,
        [{"op": "remove", "path": "/status/capacity/nvidia.com~1gpu"}],
    )
    api.close()


@pytest.fixture(scope="module")
def host_services(real_node):
    # Under /tmp, where the postgres account reaches (pytest's own directories are root's).
    root = Path(tempfile.mkdtemp(prefix="gpuportal-chart-"))
    root.chmod(0o755)
    password = secrets.token_urlsafe(16)
    postgres = PrivatePostgres(
        root,
        listen=(real_node.address,),
        trusted_subnet=real_node.pod_subnet,
        password=password,
    )
    redis = PrivateRedis(root, listen=(real_node.address,), password=password)
    yield postgres, redis
    redis.stop()
    postgres.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def release(
    helm, devcluster, real_node, gateway, portal_image, host_services, gpus, tmp_path_factory
):
    real_node.load_image(portal_image)
    # A second tag of the same image: a service's canary revision, told apart by its pods.
    images.run("podman", "tag", portal_image, CANARY_IMAGE)
    real_node.load_image(CANARY_IMAGE)
    postgres, redis = host_services
    namespace = f"chart-live-{uuid.uuid4().hex[:6]}"
    values = tmp_path_factory.mktemp("chart") / "values.yaml"
    values.write_text(yaml.safe_dump(chart_values(real_node, gateway, postgres, redis)))
    installed = Release(helm, devcluster, gateway, namespace, values, postgres)
    try:
        try:
            installed.helm_run(
                "install", RELEASE, str(CHART), "--create-namespace", "-f", str(values),
                "--wait", "--timeout", "8m",
            )  # fmt: skip
        except AssertionError as error:
            raise AssertionError(f"{error}\n{installed.logs()}") from error
        yield installed
    finally:
        installed.helm.run(
            "uninstall", RELEASE, "-n", namespace, "--kubeconfig", str(devcluster.kubeconfig),
            "--wait", timeout=300,
        )  # fmt: skip
        for name in [*installed.team_namespaces, namespace]:
            delete_namespace(installed.core, name)
        _remove_cluster_wide_leftovers(installed.api_client)
        installed.api_client.close()


def _remove_cluster_wide_leftovers(api_client) -> None:
    """The admission policies the in-cluster portal installed by reconciling (not the chart's:
    Helm removes those) outlive the release, as on any cluster; the test removes them."""
    admission = client.AdmissionregistrationV1Api(api_client)
    selector = f"app.kubernetes.io/managed-by={PORTAL_NAME}"
    for binding in admission.list_validating_admission_policy_binding(
        label_selector=selector
    ).items:
        admission.delete_validating_admission_policy_binding(binding.metadata.name)
    for policy in admission.list_validating_admission_policy(label_selector=selector).items:
        admission.delete_validating_admission_policy(policy.metadata.name)


def test_the_migration_hook_ran_before_the_pods_and_every_pod_runs_on_the_real_node(
    release, real_node
):
    events = release.core.list_namespaced_event(
        release.namespace, field_selector=f"involvedObject.name={FULLNAME}-migrate"
    ).items
    assert "Completed" in {event.reason for event in events}, [e.reason for e in events]
    with psycopg.connect(release.postgres.url) as database:
        (applied,) = database.execute("SELECT count(*) FROM django_migrations").fetchone()
    assert applied > 50
    pods = release.core.list_namespaced_pod(release.namespace).items
    components = {pod.metadata.labels["app.kubernetes.io/component"] for pod in pods}
    assert components == {"web", "worker", "webhook-worker", "beat", "watcher"}
    for pod in pods:
        assert pod.spec.node_name == real_node.name, pod.metadata.name
        assert pod.status.phase == "Running", (pod.metadata.name, pod.status.phase)
        (container,) = pod.status.container_statuses
        assert container.ready
        assert pod.spec.containers[0].image == images.PORTAL_IMAGE


def test_the_web_pods_serve_readyz_the_login_page_and_the_api_through_their_service(release):
    ready = release.call("GET", "/readyz")
    assert ready.status_code == 200, ready.text

    login = release.call("GET", "/login/")
    assert login.status_code == 200
    assert 'name="password"' in login.text

    anonymous = release.call("GET", "/api/v1/me/")
    assert anonymous.status_code in (401, 403)
    assert "credentials" in anonymous.json()["detail"].lower()


def test_a_team_and_a_grant_made_through_its_api_reach_the_cluster_as_quota(release):
    release.manage(
        "shell", "-c",
        "from django.contrib.auth.models import User; "
        f"User.objects.create_superuser('admin', 'admin@example.org', '{PASSWORD}'); "
        f"User.objects.create_user('lena', 'lena@example.org', '{PASSWORD}')",
    )  # fmt: skip
    # Its GPU nodes are the real node: what the portal launches there really runs.
    registered = release.manage(
        "register_cluster", CLUSTER, "--display-name", "Devcluster",
        "--gpu-node-selector", f"{LABEL}=true", "--gpu-taint-key", LABEL,
        "--allowed-registry", "localhost",
    )  # fmt: skip
    # Read through the ServiceAccount's in-cluster credentials.
    assert f"GPUs found: {REAL_NODE_GPUS} {GPU}" in registered, registered

    release.tokens = {user: release.sign_in(user) for user in ("admin", "lena")}

    slug = f"chart-{uuid.uuid4().hex[:6]}"
    release.team_namespaces.append(slug)
    answer = release.call("POST", "/api/v1/teams/", json={"slug": slug, "name": "Chart team"})
    assert answer.status_code == 201, answer.text
    answer = release.call(
        "POST", f"/api/v1/teams/{slug}/members/", json={"username": "lena", "role": "lead"}
    )
    assert answer.status_code == 200, answer.text
    answer = release.call(
        "POST",
        "/api/v1/quota-requests/",
        actor="lena",
        json={
            "team": slug,
            "cluster": CLUSTER,
            "gpus": REAL_NODE_GPUS,
            "justification": "Chart test.",
        },
    )
    assert answer.status_code == 201, answer.text
    approved_at = time.monotonic()
    answer = release.call("POST", f"/api/v1/quota-requests/{answer.json()['id']}/approve/", json={})
    assert answer.status_code == 201, answer.text

    def quota() -> str | None:
        found = read_or_none(
            release.core.read_namespaced_resource_quota, f"{PORTAL_NAME}-quota", slug
        )
        return None if found is None else (found.spec.hard or {}).get(f"requests.{GPU}")

    wait_for(
        lambda: quota() == str(REAL_NODE_GPUS), timeout=30, what="the grant as quota on the cluster"
    )
    print(f"grant approved -> quota on the cluster: {time.monotonic() - approved_at:.1f} s")
    release.team = slug


def test_its_worker_acts_confined_to_the_namespaces_it_manages(release):
    """The worker's in-cluster identity may write quotas (its ClusterRole), yet only in the
    namespaces it manages: the chart's confinement policy refuses one in kube-system."""
    attempt = release.kubectl(
        "exec", f"deploy/{FULLNAME}-worker", "--", "python", "-c",
        "from kubernetes import client, config\n"
        "config.load_incluster_config()\n"
        "quota = {'metadata': {'name': 'chart-escape'}, 'spec': {'hard': {'pods': '1'}}}\n"
        "try:\n"
        "    client.CoreV1Api().create_namespaced_resource_quota('kube-system', quota)\n"
        "    print('created')\n"
        "except client.ApiException as error:\n"
        "    print(error.status, error.body)\n",
    )  # fmt: skip
    assert attempt.startswith("403"), attempt
    assert PORTAL_NAME in attempt, attempt
    assert "ValidatingAdmissionPolicy" in attempt, attempt


def test_its_watcher_holds_the_lease_and_reports_a_jobs_state(release):
    """The watcher follows a cluster once it is registered: one of its pods takes the
    cluster's Lease in the release's namespace, through the in-cluster identity."""
    coordination = client.CoordinationV1Api(release.api_client)
    watchers = {pod.metadata.name for pod in release.pods("watcher")}

    def holder() -> str | None:
        for lease in coordination.list_namespaced_lease(release.namespace).items:
            held_by = lease.spec.holder_identity or ""
            if any(pod in held_by for pod in watchers):
                return held_by
        return None

    wait_for(lambda: holder() is not None, timeout=60, what="a watcher pod to hold the Lease")

    answer = release.call(
        "POST",
        "/api/v1/jobs/",
        actor="lena",
        json={
            "team": release.team,
            "cluster": CLUSTER,
            "name": "chart-job",
            "image": STABLE_IMAGE,
            "command": ["python", "-c", "import time; time.sleep(3); print('trained')"],
            "gpus": 1,
            **SMALL_WORKLOAD,
        },
    )
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["id"]
    states = []

    def succeeded() -> bool:
        state = release.call("GET", f"/api/v1/jobs/{job_id}/", actor="lena").json()["state"]
        if not states or states[-1] != state:
            states.append(state)
        return state == "succeeded"

    wait_for(succeeded, timeout=120, what="the watcher to report the job's end")
    assert "running" in states, states
    (pod,) = release.core.list_namespaced_pod(
        release.team, label_selector=f"{JOB_ID_LABEL}={job_id}"
    ).items
    assert pod.spec.node_name == REAL_NODE_NAME
    assert "trained" in release.core.read_namespaced_pod_log(pod.metadata.name, release.team)


def test_a_canary_takes_its_share_of_real_requests_through_the_gateway(release):
    """An inference service's revisions run on the real node and Traefik routes the requests
    sent to its hostname by the HTTPRoute's weights: a 20% canary answers a share of 1,000
    requests within the binomial bound, promote moves every request to it, and a rollback of
    the next canary moves every request back."""
    answer = release.call(
        "POST",
        "/api/v1/services/",
        actor="lena",
        json={
            "team": release.team,
            "cluster": CLUSTER,
            "name": "echo",
            "image": STABLE_IMAGE,
            "command": ["python", "-c", ECHO_SERVER],
            "gpus": 1,
            **SMALL_WORKLOAD,
            "replicas": 1,
            "port": 8000,
            "probe_path": "/",
        },
    )
    assert answer.status_code == 201, answer.text
    service_id = answer.json()["id"]
    custom = client.CustomObjectsApi(release.api_client)

    def hostname() -> str | None:
        route = read_or_none(
            custom.get_namespaced_custom_object,
            "gateway.networking.k8s.io", "v1", release.team, "httproutes", "echo",
        )  # fmt: skip
        return route["spec"]["hostnames"][0] if route else None

    wait_for(lambda: hostname() is not None, timeout=60, what="the service's HTTPRoute")
    gateway = httpx.Client(base_url=release.gateway.url, headers={"Host": hostname()}, timeout=10)

    def revision() -> str:
        """The revision (r1, r2, ...) whose pod answered a request through the gateway."""
        answer = gateway.get("/")
        assert answer.status_code == 200, (answer.status_code, answer.text)
        return answer.text.removeprefix("echo-").split("-")[0]

    def only(number: str) -> bool:
        with contextlib.suppress(AssertionError, httpx.HTTPError):
            return all(revision() == number for _ in range(50))
        return False

    def act(action: str, body: dict) -> None:
        path = f"/api/v1/services/{service_id}/{action}/"
        answer = release.call("POST", path, actor="lena", json=body)
        assert answer.status_code in (200, 201), answer.text

    def canary(image: str, number: str) -> None:
        """A 20% canary, once it answers through the gateway (every request before that went
        to a ready revision: ``revision`` fails on any other answer)."""
        act("canary", {"image": image, "weight": 20})
        wait_for(
            lambda: number in {revision() for _ in range(20)},
            timeout=180,
            what=f"the canary ({number}) to answer through the gateway",
        )

    try:
        wait_for(lambda: only("r1"), timeout=180, what="r1 to answer through the gateway")

        canary(CANARY_IMAGE, "r2")
        answered = Counter(revision() for _ in range(1000))
        assert set(answered) == {"r1", "r2"}, answered
        # 1,000 draws at p = 0.2: mean 200, standard deviation 12.6; 4 of them either way.
        assert abs(answered["r2"] - 200) <= 4 * math.sqrt(1000 * 0.2 * 0.8), answered
        print(f"canary at 20%: {answered['r2']} of 1,000 requests")

        act("promote", {})
        wait_for(lambda: only("r2"), timeout=120, what="every request to go to r2")

        canary(STABLE_IMAGE, "r3")
        act("rollback", {})
        wait_for(lambda: only("r2"), timeout=120, what="every request back to r2")
    finally:
        gateway.close()
        release.call("DELETE", f"/api/v1/services/{service_id}/", actor="lena")


def test_helm_upgrade_rolls_the_pods_while_a_polling_client_sees_no_failed_request(release):
    before = {pod.metadata.name for pod in release.pods("web")}
    outcomes: list[str] = []
    stop = threading.Event()

    def poll() -> None:
        # A connection per request, as a browser's next page load after a pod went: a kept-
        # alive connection to a stopping pod is closed by gunicorn, and a client retries it.
        while not stop.is_set():
            try:
                with release.http(headers={"Connection": "close"}) as http:
                    answer = http.get("/api/v1/me/")
                outcomes.append(str(answer.status_code))
            except httpx.HTTPError as error:
                outcomes.append(f"{type(error).__name__}: {error}")
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        release.helm_run(
            "upgrade", RELEASE, str(CHART), "-f", str(release.values),
            "--set", "config.logLevel=DEBUG", "--wait", "--timeout", "8m",
        )  # fmt: skip
        # The old pods' last seconds (preStop) lie after --wait: poll through them too.
        wait_for(
            lambda: not before & {pod.metadata.name for pod in release.pods("web")},
            timeout=90,
            what="the old web pods to go",
        )
    finally:
        stop.set()
        poller.join(timeout=30)

    failed = [outcome for outcome in outcomes if outcome != "200"]
    assert not failed, (len(outcomes), failed[:10])
    assert len(outcomes) > 50
    config = release.core.read_namespaced_config_map(FULLNAME, release.namespace)
    assert config.data["PORTAL_LOG_LEVEL"] == "DEBUG"
    print(f"helm upgrade: {len(outcomes)} requests, none failed")


def test_helm_rollback_and_uninstall_leave_team_namespaces_and_their_quota_alone(release):
    quota_before = release.core.read_namespaced_resource_quota(f"{PORTAL_NAME}-quota", release.team)

    release.helm_run("rollback", RELEASE, "1", "--wait", "--timeout", "8m")
    config = release.core.read_namespaced_config_map(FULLNAME, release.namespace)
    assert config.data["PORTAL_LOG_LEVEL"] == "INFO"
    history = json.loads(release.helm_run("history", RELEASE, "-o", "json"))
    assert [entry["status"] for entry in history][-1] == "deployed"
    assert len(history) == 3

    release.helm_run("uninstall", RELEASE, "--wait", "--timeout", "5m")
    assert not release.apps.list_namespaced_deployment(release.namespace).items
    team = release.core.read_namespace(release.team)
    assert team.status.phase == "Active"
    quota_after = release.core.read_namespaced_resource_quota(f"{PORTAL_NAME}-quota", release.team)
    assert quota_after.spec.hard == quota_before.spec.hard
    assert quota_after.metadata.uid == quota_before.metadata.uid
