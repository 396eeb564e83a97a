"""Metrics a tenant's pod publishes, scraped by the devcluster's Prometheus beside the DCGM
simulator: how tests forge DCGM series the way a real tenant could.

In a real cluster Prometheus often scrapes any pod that asks for it (``kubernetes_sd`` with the
``prometheus.io/scrape`` annotation, or a PodMonitor), and such a pod may publish any metric name
with any labels: ``DCGM_FI_DEV_GPU_UTIL{namespace="another-team", pod="their-job"}`` included.
The devcluster's Prometheus has a scrape job for that, ``tenant-pods``, whose targets come from
files (``file_sd``) in ``<state>/prometheus/tenant-targets/``: ``published`` serves a text from a
local HTTP server and adds a target file naming it, and Prometheus picks the file up within
seconds, with no restart or reload. Like the usual pod scrapes, the job does not honour the
pod's labels: a ``job`` label the pod publishes becomes ``exported_job``, the target's own
``job="tenant-pods"`` stays. Target labels (``namespace`` and ``pod`` of the scraped pod) are
not set, so the pod's own ``namespace`` and ``pod`` labels stand as published.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from devcluster.settings import Settings

TENANT_JOB = "tenant-pods"
EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SCRAPE_TIMEOUT_SECONDS = 60.0


def targets_dir(settings: Settings) -> Path:
    return settings.state_dir / "prometheus" / "tenant-targets"


def scrape_config(settings: Settings) -> str:
    """The ``tenant-pods`` job for prometheus.yml's ``scrape_configs`` (its target directory is
    made here, so that Prometheus can watch it from the start)."""
    directory = targets_dir(settings)
    directory.mkdir(parents=True, exist_ok=True)
    return (
        f"  - job_name: {TENANT_JOB}\n"
        "    file_sd_configs:\n"
        f"      - files: ['{directory}/*.json']\n"
        "        refresh_interval: 5s\n"
    )


class _Exposition(BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.server.text.encode()
        self.send_response(200)
        self.send_header("Content-Type", EXPOSITION_CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _query(settings: Settings, promql: str) -> list[dict]:
    url = f"{settings.prometheus_url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())["data"]["result"]


def _loaded_config(settings: Settings) -> str:
    with urllib.request.urlopen(f"{settings.prometheus_url}/api/v1/status/config", timeout=10) as r:
        return json.loads(r.read())["data"]["yaml"]


def ensure_scrape_job(settings: Settings) -> None:
    """Make sure the running Prometheus has the ``tenant-pods`` job: a cluster started by an
    older devcluster has not, so its configuration is written again and reloaded (the
    lifecycle API; no restart, no data lost)."""
    if f"job_name: {TENANT_JOB}" in _loaded_config(settings):
        return
    # bootstrap imports this module for the configuration
    from devcluster import bootstrap, cluster

    with cluster.state_lock(settings):
        bootstrap.write_prometheus_config(settings)
        request = urllib.request.Request(f"{settings.prometheus_url}/-/reload", method="POST")
        urllib.request.urlopen(request, timeout=30).close()
    if f"job_name: {TENANT_JOB}" not in _loaded_config(settings):
        raise RuntimeError(f"Prometheus did not load the {TENANT_JOB} scrape job")


@contextmanager
def published(settings: Settings, text: str) -> Iterator[str]:
    """Have Prometheus scrape ``text`` (the exposition format) under the ``tenant-pods`` job
    while the block runs; yields the target's address once Prometheus scraped it. Afterwards
    the target goes, and Prometheus marks its series stale."""
    ensure_scrape_job(settings)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exposition)
    server.text = text
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{server.server_address[1]}"
    name = uuid.uuid4().hex
    directory = targets_dir(settings)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    try:
        scratch = directory / f".{name}.tmp"  # not *.json: Prometheus never reads half a file
        scratch.write_text(json.dumps([{"targets": [target], "labels": {}}]))
        os.replace(scratch, path)
        up = f'up{{job="{TENANT_JOB}",instance="{target}"}} == 1'
        deadline = time.monotonic() + SCRAPE_TIMEOUT_SECONDS
        while not _query(settings, up):
            if time.monotonic() > deadline:
                raise TimeoutError(f"Prometheus did not scrape {target} within a minute")
            time.sleep(0.5)
        yield target
    finally:
        path.unlink(missing_ok=True)
        server.shutdown()
        server.server_close()
