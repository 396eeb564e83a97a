"""What a user asks of an inference service, as frozen request objects, and the one place the
shape of their fields is checked. The API's serializers and the pages' forms build them with
``parse`` (one ``ValidationError`` naming every bad field); ``serving.services`` takes them.

A revision's spec (``RevisionRequest``) is built from the pieces every workload shares
(``gpujobs.specs``): the model server is a ``ContainerRequest`` and asks for GPUs as a job does
(kind, model, how many per replica); a service adds the port it serves on, a readiness probe
(an HTTP GET of a path, or a TCP connect, on that port) and an optional CPU-only sidecar (the
seed's preprocessor: another ``ContainerRequest``, which may never ask for GPUs). A new service
(``DeployRequest``) is a name, its first revision and its replicas.

Traffic is given as whole percentages: a canary's ``weight`` (1-99), a ``split`` over the live
revisions, or two A/B ``variants``; the weights of a split or of variants add up to 100.

The rules that depend on the team and the cluster (registries, GPU kinds and models, quota) are
the shared ``gpujobs.admission``'s, applied by ``serving.admission``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError

from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from workloads.specs import (
    ContainerRequest,
    EnvPairs,
    Errors,
    joined,
    read_annotations,
    read_gpu_model,
    read_gpu_resource,
    read_gpus,
    read_nested,
    read_whole,
)

MAX_REPLICAS = 100
MAX_PORT = 65535
MAX_PROBE_PATH_LENGTH = 1024
# The service's Kubernetes Service is named after it, and a revision's objects after it plus
# ``-r<number>``: a DNS-1035 label with room for the suffix.
MAX_SERVICE_NAME_LENGTH = 50
SERVICE_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
VARIANT_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?\Z")
PROBE_PATH_RE = re.compile(r"^/[\x21-\x7e]*\Z")  # printable, no spaces


class ProbeKind:
    HTTP = "http"  # an HTTP GET of ``path`` on the port answers 2xx or 3xx
    TCP = "tcp"  # the port accepts a connection


PROBE_KINDS = (ProbeKind.HTTP, ProbeKind.TCP)
SIDECAR_KEYS = {"image", "command", "args", "env", "cpu_cores", "memory_gib", "gpus"}
# The fields of a revision's spec, as the API takes them (an update may give any of them).
REVISION_KEYS = (
    "image",
    "command",
    "args",
    "env",
    "cpu_cores",
    "memory_gib",
    "gpus",
    "gpu_resource",
    "gpu_model",
    "port",
    "probe",
    "probe_path",
    "sidecar",
    "annotations",
)


def read_service_name(value: Any, *, errors: Errors) -> str:
    name = value.strip() if isinstance(value, str) else ""
    if len(name) > MAX_SERVICE_NAME_LENGTH or not SERVICE_NAME_RE.match(name):
        errors["name"] = (
            f"Give a name of 1-{MAX_SERVICE_NAME_LENGTH} lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit: the service's "
            "Kubernetes Service is named after it."
        )
        return ""
    return name


def read_port(value: Any, *, errors: Errors) -> int:
    return read_whole(value, errors=errors, key="port", low=1, high=MAX_PORT, what="Port")


def read_replicas(value: Any, *, errors: Errors, key: str = "replicas") -> int:
    """At least one replica: a service with none is stopped, which is its own action."""
    return read_whole(value, errors=errors, key=key, low=1, high=MAX_REPLICAS, what="Replicas")


def read_weight(value: Any, *, errors: Errors, key: str = "weight") -> int:
    """A canary's share of the traffic in percent: some, never all (that is promoting it)."""
    return read_whole(value, errors=errors, key=key, low=1, high=99, what="Weight (%)")


@dataclass(frozen=True)
class Probe:
    """When a replica is ready for traffic: an HTTP GET of ``path`` answers, or the port
    accepts a TCP connection."""

    kind: str = ProbeKind.HTTP
    path: str = "/"

    @classmethod
    def read(cls, kind: Any, path: Any, *, errors: Errors) -> Probe:
        kind = kind or ProbeKind.HTTP
        if kind not in PROBE_KINDS:
            errors["probe"] = "The readiness probe is 'http' (a GET of probe_path) or 'tcp'."
            return cls()
        if kind == ProbeKind.TCP:
            return cls(kind=kind, path="")
        path = "/" if path in (None, "") else path
        if (
            not isinstance(path, str)
            or len(path) > MAX_PROBE_PATH_LENGTH
            or not PROBE_PATH_RE.match(path)
        ):
            errors["probe_path"] = (
                "The readiness probe's path starts with '/' (e.g. /healthz), without spaces, "
                f"at most {MAX_PROBE_PATH_LENGTH} characters."
            )
            return cls()
        return cls(kind=kind, path=path)


def read_sidecar(value: Any, *, errors: Errors) -> ContainerRequest | None:
    """The CPU-only container beside the model server; its bad fields named under
    ``sidecar``. It never asks for GPUs: on a GPU node the portal hides them from it."""
    data = read_nested(value, errors=errors, key="sidecar", keys=SIDECAR_KEYS, what="sidecar")
    if data is None:
        return None
    local: Errors = {}
    if data.get("gpus") not in (None, 0, "0", ""):
        local["gpus"] = (
            "A sidecar runs on CPU only and asks for no GPUs (leave gpus out); the GPUs are "
            "the model server's (gpus)."
        )
    container = ContainerRequest.read(data, errors=local)
    if local:
        errors["sidecar"] = joined(local)
        return None
    return container


def _container_json(container: ContainerRequest) -> dict:
    return {
        "image": container.image,
        "command": list(container.command),
        "args": list(container.args),
        "env": [{"name": name, "value": value} for name, value in container.env],
        "cpu_cores": str(container.cpu_cores) if container.cpu_cores is not None else None,
        "memory_gib": str(container.memory_gib) if container.memory_gib is not None else None,
    }


def _container_from_json(value: Mapping[str, Any]) -> ContainerRequest:
    def amount(raw) -> Decimal | None:
        return Decimal(str(raw)) if raw not in (None, "") else None

    return ContainerRequest(
        image=value["image"],
        command=tuple(value.get("command") or ()),
        args=tuple(value.get("args") or ()),
        env=tuple((e["name"], e.get("value", "")) for e in value.get("env") or ()),
        cpu_cores=amount(value.get("cpu_cores")),
        memory_gib=amount(value.get("memory_gib")),
    )


@dataclass(frozen=True)
class RevisionRequest:
    """One revision of a service as a user asks for it: the model server (``main``), the GPUs
    of each replica, the port it serves on and its readiness probe, an optional CPU-only
    sidecar, and pod annotations. Built by ``parse``, whose checks it passed.

    Adding a field: here (the field, ``read``, ``model_fields``, ``from_model`` and
    ``as_data``), ``REVISION_KEYS``, the ``Revision`` model, the serializer and the form, and
    the manifest builder."""

    main: ContainerRequest
    gpus: int
    port: int
    probe: Probe = Probe()
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    gpu_model: str = ""
    sidecar: ContainerRequest | None = None
    annotations: EnvPairs = ()

    @classmethod
    def read(cls, data: Mapping[str, Any], *, errors: Errors) -> RevisionRequest:
        """The revision in ``data`` (the API's JSON body, or a form's fields in that shape),
        each bad field named in ``errors`` and read as a neutral value."""
        return cls(
            main=ContainerRequest.read(data, errors=errors),
            gpus=read_gpus(data.get("gpus"), errors=errors, what="GPUs per replica"),
            port=read_port(data.get("port"), errors=errors),
            probe=Probe.read(data.get("probe"), data.get("probe_path"), errors=errors),
            gpu_resource=read_gpu_resource(data.get("gpu_resource"), errors=errors),
            gpu_model=read_gpu_model(data.get("gpu_model"), errors=errors),
            sidecar=read_sidecar(data.get("sidecar"), errors=errors),
            annotations=read_annotations(data.get("annotations"), errors=errors),
        )

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> RevisionRequest:
        errors: Errors = {}
        request = cls.read(data, errors=errors)
        if errors:
            raise ValidationError(errors)
        return request

    def model_fields(self) -> dict[str, Any]:
        """The ``Revision`` fields that hold the request."""
        return {
            "image": self.main.image,
            "command": list(self.main.command),
            "args": list(self.main.args),
            "env": [{"name": name, "value": value} for name, value in self.main.env],
            "cpu_cores": self.main.cpu_cores,
            "memory_gib": self.main.memory_gib,
            "gpus": self.gpus,
            "gpu_resource": self.gpu_resource,
            "gpu_model": self.gpu_model,
            "port": self.port,
            "probe": self.probe.kind,
            "probe_path": self.probe.path,
            "sidecar": _container_json(self.sidecar) if self.sidecar else None,
            "annotations": dict(self.annotations),
        }

    @classmethod
    def from_model(cls, revision: Any) -> RevisionRequest:
        """The request a stored ``Revision`` holds (it passed ``parse``); annotations sorted,
        so a revision always gives the same manifests."""
        main = _container_from_json(
            {
                "image": revision.image,
                "command": revision.command,
                "args": revision.args,
                "env": revision.env,
                "cpu_cores": revision.cpu_cores,
                "memory_gib": revision.memory_gib,
            }
        )
        return cls(
            main=main,
            gpus=revision.gpus,
            port=revision.port,
            probe=Probe(kind=revision.probe, path=revision.probe_path),
            gpu_resource=revision.gpu_resource,
            gpu_model=revision.gpu_model,
            sidecar=_container_from_json(revision.sidecar) if revision.sidecar else None,
            annotations=tuple(sorted((revision.annotations or {}).items())),
        )

    def as_data(self) -> dict[str, Any]:
        """The request in the API's shape: what an update's changes are laid over."""
        data = _container_json(self.main)
        data.update(
            gpus=self.gpus,
            gpu_resource=self.gpu_resource,
            gpu_model=self.gpu_model,
            port=self.port,
            probe=self.probe.kind,
            probe_path=self.probe.path if self.probe.kind == ProbeKind.HTTP else "",
            sidecar=_container_json(self.sidecar) if self.sidecar else None,
            annotations=dict(self.annotations),
        )
        return data


def revision_changes(base: RevisionRequest, data: Mapping[str, Any]) -> dict[str, Any]:
    """``base``'s spec with the revision fields ``data`` gives laid over it: a new revision
    changes what it names and keeps the rest (``"sidecar": null`` removes the sidecar)."""
    merged = base.as_data()
    merged.update({key: data[key] for key in REVISION_KEYS if key in data})
    return merged


@dataclass(frozen=True)
class DeployRequest:
    """A new service: its name, its first revision and how many replicas run it."""

    name: str
    revision: RevisionRequest
    replicas: int

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> tuple[DeployRequest, Errors]:
        errors: Errors = {}
        request = cls(
            name=read_service_name(data.get("name"), errors=errors),
            revision=RevisionRequest.read(data, errors=errors),
            replicas=read_replicas(
                1 if data.get("replicas") is None else data.get("replicas"), errors=errors
            ),
        )
        return request, errors

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> DeployRequest:
        request, errors = cls.read(data)
        if errors:
            raise ValidationError(errors)
        return request


def read_split(value: Any, *, errors: Errors, live: set[int]) -> dict[int, int]:
    """Weights per live revision (``[{"revision": 3, "weight": 90}, ...]`` or ``{"3": 90}``):
    every live revision once, whole percentages adding up to 100; named under ``split``."""
    pairs: list[tuple[Any, Any]] = []
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)):
        for item in value:
            if not isinstance(item, Mapping) or set(item) != {"revision", "weight"}:
                errors["split"] = 'Give the split as [{"revision": 3, "weight": 90}, ...].'
                return {}
            pairs.append((item["revision"], item["weight"]))
    else:
        errors["split"] = 'Give the split as [{"revision": 3, "weight": 90}, ...].'
        return {}
    split: dict[int, int] = {}
    for revision, weight in pairs:
        local: Errors = {}
        number = read_whole(revision, errors=local, key="r", low=1, high=10**9, what="Revision")
        share = read_whole(weight, errors=local, key="w", low=0, high=100, what="Weight (%)")
        if local:
            errors["split"] = " ".join(local.values())
            return {}
        split[number] = share
    if set(split) != live:
        errors["split"] = (
            f"Give a weight for each live revision ({', '.join(map(str, sorted(live)))}) and "
            "no other."
        )
        return {}
    total = sum(split.values())
    if total != 100:
        errors["split"] = f"The weights add up to {total}%, not 100%."
        return {}
    return split


@dataclass(frozen=True)
class Variant:
    name: str
    weight: int


def read_variants(value: Any, *, errors: Errors) -> tuple[Variant, Variant] | None:
    """An A/B test's two variants, ``[{"name": "control", "weight": 50}, {"name": "bigger",
    "weight": 50}]``: the first is the running revision, the second the new one. Distinct
    short names; whole weights adding up to 100."""
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(v, Mapping) and set(v) == {"name", "weight"} for v in value)
    ):
        errors["variants"] = (
            'Give two variants: [{"name": "control", "weight": 50}, '
            '{"name": "candidate", "weight": 50}] (the running revision first).'
        )
        return None
    variants = []
    for item in value:
        name = item["name"].strip() if isinstance(item["name"], str) else ""
        if not VARIANT_NAME_RE.match(name):
            errors["variants"] = (
                f"{item['name']!r} is not a variant name (1-32 lower-case letters, digits and '-')."
            )
            return None
        local: Errors = {}
        weight = read_whole(item["weight"], errors=local, key="w", low=0, high=100, what="Weight")
        if local:
            errors["variants"] = f"{name}: {local['w']}"
            return None
        variants.append(Variant(name=name, weight=weight))
    if variants[0].name == variants[1].name:
        errors["variants"] = "The two variants need different names."
        return None
    total = variants[0].weight + variants[1].weight
    if total != 100:
        errors["variants"] = f"The variants' weights add up to {total}%, not 100%."
        return None
    return variants[0], variants[1]
