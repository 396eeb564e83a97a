"""Container logs for simulated pods, served by kwok as a kubelet would serve them.

No process runs in a kwok pod, so its log is a file: kwok's server answers the API server's
``pods/log`` (tail, limit, follow, timestamps) from a file in the CRI log format, chosen per pod
and container by a ``Logs`` object (namespaced, named after the pod) or, for every other pod,
by the devcluster's ``ClusterLogs`` rule that points at one shared file. Appending to a pod's
file while someone follows its log streams the new lines to them.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from pathlib import Path

GROUP = "kwok.x-k8s.io"
VERSION = "v1alpha1"
LOGS_PLURAL = "logs"

# Every pod without a Logs object of its own reads this (see cluster_logs_rule).
DEFAULT_LINES = (
    "devcluster: a simulated container; no process runs here.",
    "devcluster: give the pod a log with DevCluster.write_pod_log() (devcluster/README.md).",
)


def cri_line(text: str, at: datetime.datetime | None = None, stream: str = "stdout") -> str:
    """One line as container runtimes write them: ``<RFC 3339 time> <stream> F <text>``."""
    at = at or datetime.datetime.now(datetime.UTC)
    stamp = at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{stamp} {stream} F {text}\n"


def log_path(logs_dir: Path, namespace: str, pod: str, container: str) -> Path:
    return logs_dir / namespace / pod / f"{container}.log"


def append_lines(path: Path, lines: Iterable[str]) -> None:
    """Append lines to a log file in the CRI format (creating it), flushed at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.writelines(cri_line(text) for text in lines)


def logs_object(namespace: str, pod: str, files: dict[str, Path]) -> dict:
    """The kwok ``Logs`` object that sends each container's log requests to its file."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Logs",
        "metadata": {"name": pod, "namespace": namespace},
        "spec": {
            "logs": [
                {"containers": [container], "logsFile": str(path)}
                for container, path in sorted(files.items())
            ]
        },
    }


def cluster_logs_rule(default_file: Path) -> dict:
    """kwok configuration: every pod's containers read ``default_file`` unless a Logs object
    names the pod."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterLogs",
        "metadata": {"name": "devcluster-default-logs"},
        "spec": {"logs": [{"logsFile": str(default_file)}]},
    }


def logs_crd() -> dict:
    """The ``Logs`` resource kwok reads with ``--enable-crds=Logs``. Its schema is left open:
    kwok validates what it uses, and nothing else writes these objects."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{LOGS_PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": "Logs",
                "listKind": "LogsList",
                "plural": LOGS_PLURAL,
                "singular": "logs",
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
