"""Workloads on the devcluster for monitoring tests (and the browser test): GPU pods and Jobs
the way the portal builds them, throwaway namespaces, and bounded polls of Prometheus."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import httpx
from urllib3.exceptions import HTTPError

from monitoring import promql
from reconcile.manifests import TEAM_LABEL
from tests.integration import kube
from tests.integration.conftest import free_port, wait_for

UTILISATION = "devcluster.gpuportal.io/gpu-util"
MANAGED_BY = "app.kubernetes.io/managed-by"


def eventually(predicate, *, timeout=60.0, interval=1.0, what="condition"):
    """``wait_for`` at the pace of Prometheus' scrapes: a minute, polling each second."""
    return wait_for(predicate, timeout=timeout, interval=interval, what=what)


# Other sessions share the devcluster, and some restart its API server on purpose (the
# reconcile tests); a call that cannot connect is tried again for this long.
API_SERVER_GRACE_SECONDS = 90


def patiently(call, *args, **kwargs):
    """``call(*args, **kwargs)``, tried again while the API server cannot be reached."""
    deadline = time.monotonic() + API_SERVER_GRACE_SECONDS
    while True:
        try:
            return call(*args, **kwargs)
        except (HTTPError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def create_namespace(core_api, prefix="mon") -> str:
    return kube.create_namespace(core_api, prefix, call=patiently)


def create_team_namespace(core_api, prefix="mon") -> str:
    """A namespace labelled as the portal labels a team's (its name is the team's slug)."""
    name = create_namespace(core_api, prefix)
    labels = {MANAGED_BY: "gpu-portal", TEAM_LABEL: name}
    patiently(core_api.patch_namespace, name, {"metadata": {"labels": labels}})
    return name


def delete_namespace(core_api, name: str) -> None:
    kube.delete_namespace(core_api, name, call=patiently)


def gpu_pod(name, *, gpus=1, utilisation=None, labels=None, gpu_model=None):
    """A GPU pod the way the portal builds them; the devcluster annotation sets its simulated
    utilisation (a number, or one per GPU: "90,10"); ``gpu_model`` pins its nodes' model."""
    annotations = {UTILISATION: str(utilisation)} if utilisation is not None else {}
    return kube.gpu_pod(name, gpus, annotations=annotations, labels=labels, gpu_model=gpu_model)


def run_pod(core_api, namespace, manifest) -> dict:
    patiently(core_api.create_namespaced_pod, namespace, manifest)
    name = manifest["metadata"]["name"]
    pod = eventually(
        lambda: (
            (p := patiently(core_api.read_namespaced_pod, name, namespace)).status.phase
            == "Running"
            and p
        ),
        timeout=60,
        interval=0.25,
        what=f"pod {namespace}/{name} to run",
    )
    return pod


def running_job_pod(core_api, namespace: str, job: str) -> str:
    """The name of the Job's pod, once it runs."""
    return eventually(
        lambda: [
            p.metadata.name
            for p in patiently(
                core_api.list_namespaced_pod, namespace, label_selector=f"job-name={job}"
            ).items
            if p.status.phase == "Running"
        ],
        what=f"the pod of Job {namespace}/{job} to run",
    )[0]


def portal_job(name, *, utilisation, gpus=1) -> dict:
    """A Job carrying the portal's label, as the jobs app will create them."""
    template = gpu_pod(name, gpus=gpus, utilisation=utilisation, labels={MANAGED_BY: "gpu-portal"})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {MANAGED_BY: "gpu-portal"}},
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


def prometheus_has(devcluster, promql: str, *, count: int = 1, timeout: float = 60):
    """Wait until an instant query returns at least ``count`` series; return them."""

    def ready():
        try:
            result = devcluster.prometheus_query(promql)
        except OSError:
            return None  # another session may be restarting Prometheus
        return len(result) >= count and result

    return eventually(ready, timeout=timeout, interval=1, what=f"{count} series for {promql}")


def delete_series(devcluster, selector: str) -> None:
    """Tidy the shared Prometheus: drop series a test backfilled (admin API, no restart)."""
    httpx.post(
        f"{devcluster.prometheus_url}/api/v1/admin/tsdb/delete_series",
        params={"match[]": selector},
        timeout=30,
    ).raise_for_status()


def forget_the_rules_ran(devcluster, start: float, end: float) -> None:
    """Delete the series that says the portal's recording rules were running, between
    ``start`` and ``end``: as if Prometheus had not loaded them then, so that the portal reads
    that time from every GPU's series. For a window of a test's own (another session's starting
    then is read from the raw series meanwhile, with the same figures), and for history a test
    backfilled, which the rules never evaluated: an operator backfills them after it
    (``promtool tsdb create-blocks-from rules``), as the monitoring benchmark does."""
    httpx.post(
        f"{devcluster.prometheus_url}/api/v1/admin/tsdb/delete_series",
        params={"match[]": promql.RECORDING_RULES_SERIES, "start": start, "end": end},
        timeout=30,
    ).raise_for_status()


class OwnPrometheus:
    """Debian's Prometheus on a free port with data of its own: for a test that stops it, or
    that scrapes the DCGM simulator the way another setup would. ``scrape_configs`` is YAML
    for that section (default: Prometheus scraping itself)."""

    def __init__(self, directory, scrape_configs: str | None = None, flags: tuple[str, ...] = ()):
        self.port = free_port()
        self.flags = flags
        self.url = f"http://127.0.0.1:{self.port}"
        self.directory = directory
        self.config = directory / "prometheus.yml"
        scrape_configs = scrape_configs or (
            f"  - job_name: self\n    static_configs:\n      - targets: ['127.0.0.1:{self.port}']\n"
        )
        self.config.write_text(f"global:\n  scrape_interval: 5s\nscrape_configs:\n{scrape_configs}")
        self.process = None

    def start(self):
        with open(self.directory / "prometheus.log", "a") as log:
            self.process = subprocess.Popen(
                [
                    shutil.which("prometheus"),
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    *self.flags,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for(self._ready, timeout=60, what=f"Prometheus on port {self.port}")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)

    def pause(self) -> None:
        """Stop the process without ending it: connections are still accepted (by the kernel),
        and never answered, as by a Prometheus too busy to answer."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def requests_served(self, handler: str, code: int) -> float:
        """How many requests for ``handler`` it answered with ``code``, from its own metrics."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        wanted = f'prometheus_http_requests_total{{code="{code}",handler="{handler}"}} '
        for line in text.splitlines():
            if line.startswith(wanted):
                return float(line.removeprefix(wanted))
        return 0.0

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False


def backfill_history(devcluster, spec, selector: str, *, forget_from: float, forget_to: float):
    """Write ``spec``'s history into the shared Prometheus (no restart: others' tests use it)
    and wait until it serves it (``selector``: the backfilled GPUs' utilisation series, a
    count of ``spec.gpus``). The rules never evaluated that history: the marker that they ran
    is deleted from ``forget_from`` to ``forget_to``, so that the portal reads every GPU's
    series for the periods it falls in (``forget_the_rules_ran``). Delete the series again
    afterwards with ``delete_series(devcluster, selector)``."""
    devcluster.backfill(spec, restart_prometheus=False)
    count = f"count(count_over_time({selector}[2d]))"

    def loaded():
        try:
            result = devcluster.prometheus_query(count, at=spec.end_timestamp)
        except OSError:
            return None
        return result and float(result[0]["value"][1]) == spec.gpus

    eventually(loaded, timeout=150, interval=2, what="Prometheus to load the backfilled blocks")
    forget_the_rules_ran(devcluster, forget_from, forget_to)
