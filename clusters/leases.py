"""Leases (``coordination.k8s.io/v1``): read, create and update one, the update conditional on
the resourceVersion it was read at, so that two processes racing for it cannot both win (the
loser gets ``Conflict``, or ``AlreadyExists`` on a create). The watcher's leader election
(``workloads.leader_election``) decides what to write; this module only talks to the API server.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from clusters.kube import KINDS, KubeClient, describe

LEASES = KINDS["Lease"]


@dataclass(frozen=True)
class LeaseRecord:
    """What a Lease says: who holds it, for how long past its last renewal, and how many times
    it changed hands; ``resource_version`` for the next conditional update."""

    holder: str
    duration_seconds: int
    transitions: int
    resource_version: str
    acquired_at: str = ""


def micro_time(moment: datetime.datetime) -> str:
    """A MicroTime as the API server parses it (always six digits of microseconds, UTC)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(body: dict) -> LeaseRecord:
    spec = body.get("spec") or {}
    return LeaseRecord(
        holder=spec.get("holderIdentity") or "",
        duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str((body.get("metadata") or {}).get("resourceVersion") or ""),
        acquired_at=spec.get("acquireTime") or "",
    )


def lease_body(
    *,
    namespace: str,
    name: str,
    holder: str,
    duration_seconds: int,
    transitions: int,
    acquired_at: str,
    renewed_at: str,
    labels: dict[str, str],
    resource_version: str = "",
) -> dict:
    metadata = {"name": name, "namespace": namespace, "labels": labels}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": LEASES.api_version,
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration_seconds,
            "leaseTransitions": transitions,
            "acquireTime": acquired_at,
            "renewTime": renewed_at,
        },
    }


class LeaseClient(KubeClient):
    """One cluster's Leases."""

    def read_lease(self, namespace: str, name: str) -> LeaseRecord | None:
        body = self.get("Lease", name, namespace)
        return None if body is None else _record(body)

    def create_lease(self, body: dict) -> LeaseRecord:
        """Create the Lease; ``AlreadyExists`` when another process created it first (and
        ``NotFound`` when its namespace does not exist)."""
        metadata = body["metadata"]
        created = self._call(
            "POST",
            LEASES.path(namespace=metadata["namespace"]),
            what=describe("Lease", metadata["name"], metadata["namespace"]),
            query=[("fieldManager", self.field_manager)],
            body=body,
            content_type="application/json",
        )
        return _record(created)

    def update_lease(self, body: dict) -> LeaseRecord:
        """Replace the Lease, only if it is still at ``metadata.resourceVersion``: otherwise the
        API server answers 409 and this raises ``Conflict``."""
        metadata = body["metadata"]
        if not metadata.get("resourceVersion"):
            raise ValueError("a Lease is updated only at the resourceVersion it was read at")
        updated = self._call(
            "PUT",
            LEASES.path(namespace=metadata["namespace"], name=metadata["name"]),
            what=describe("Lease", metadata["name"], metadata["namespace"]),
            query=[("fieldManager", self.field_manager)],
            body=body,
            content_type="application/json",
        )
        return _record(updated)
