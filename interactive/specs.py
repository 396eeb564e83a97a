"""What a member asks a session to be, and the one place its shape is checked: the name, the
image (the portal's default notebook image when none is given), GPUs (none for a CPU session),
CPU, memory, the maximum lifetime of a run and the size of the member's home volume.

The rules that depend on the team and the cluster (allowed registries, the GPU kinds offered,
the team's maximum lifetime, its storage quota) are ``interactive.admission``'s. No database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings

from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from interactive.models import MAX_HOME_GIB, MAX_LIFETIME_SECONDS
from workloads.images import read_image
from workloads.specs import (
    MAX_CPU_CORES,
    MAX_GPUS_PER_POD,
    MAX_MEMORY_GIB,
    ContainerRequest,
    EnvPairs,
    Errors,
    read_decimal,
    read_gpu_model,
    read_gpu_resource,
    read_name,
    read_whole,
)

FIELDS = {
    "team",
    "cluster",
    "name",
    "image",
    "gpus",
    "gpu_resource",
    "gpu_model",
    "cpu_cores",
    "memory_gib",
    "max_lifetime_hours",
    "home_gib",
}
MAX_LIFETIME_HOURS = MAX_LIFETIME_SECONDS // 3600


@dataclass(frozen=True)
class SessionRequest:
    """A session as asked for, shaped and bounded; satisfies ``workloads.specs.GpuPodRequest``
    so the shared admission rules check it like any workload."""

    name: str
    main: ContainerRequest
    gpus: int = 0
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    gpu_model: str = ""
    max_lifetime_hours: int = 8
    home_gib: int = 10
    annotations: EnvPairs = ()

    @classmethod
    def read(
        cls, data: Mapping[str, Any], *, team_max_lifetime_hours: int | None = None
    ) -> tuple[SessionRequest, Errors]:
        """The request ``data`` describes, and every bad field named in words. A lifetime left
        out is the portal's default, or the team's maximum when that is shorter."""
        errors: Errors = {}
        unknown = set(data) - FIELDS
        if unknown:
            errors["non_field_errors"] = (
                f"Unknown fields {', '.join(sorted(unknown))}; a session takes: "
                f"{', '.join(sorted(FIELDS - {'team', 'cluster'}))}."
            )
        image = data.get("image") or settings.SESSIONS_DEFAULT_IMAGE
        main = ContainerRequest(
            image=read_image(image, errors=errors, key="image"),
            cpu_cores=_amount(
                data.get("cpu_cores"),
                settings.SESSIONS_DEFAULT_CPU_CORES,
                errors=errors,
                key="cpu_cores",
                what="CPU cores",
                maximum=MAX_CPU_CORES,
            ),
            memory_gib=_amount(
                data.get("memory_gib"),
                settings.SESSIONS_DEFAULT_MEMORY_GIB,
                errors=errors,
                key="memory_gib",
                what="Memory (GiB)",
                maximum=MAX_MEMORY_GIB,
            ),
        )
        gpus = data.get("gpus")
        request = cls(
            name=read_name(data.get("name"), errors=errors),
            main=main,
            gpus=0
            if gpus in (None, "")
            else read_whole(
                gpus, errors=errors, key="gpus", low=0, high=MAX_GPUS_PER_POD, what="GPUs"
            ),
            gpu_resource=read_gpu_resource(data.get("gpu_resource"), errors=errors),
            gpu_model=read_gpu_model(data.get("gpu_model"), errors=errors),
            max_lifetime_hours=_whole_or_default(
                data.get("max_lifetime_hours"),
                min(
                    settings.SESSIONS_DEFAULT_LIFETIME_HOURS,
                    team_max_lifetime_hours or settings.SESSIONS_DEFAULT_LIFETIME_HOURS,
                ),
                errors=errors,
                key="max_lifetime_hours",
                high=MAX_LIFETIME_HOURS,
                what="The maximum lifetime (hours)",
            ),
            home_gib=_whole_or_default(
                data.get("home_gib"),
                settings.SESSIONS_DEFAULT_HOME_GIB,
                errors=errors,
                key="home_gib",
                high=MAX_HOME_GIB,
                what="The home volume (GiB)",
            ),
        )
        return request, errors

    @property
    def max_lifetime_seconds(self) -> int:
        return self.max_lifetime_hours * 3600

    def model_fields(self) -> dict[str, Any]:
        """The session's columns for what was asked."""
        return {
            "name": self.name,
            "image": self.main.image,
            "gpus": self.gpus,
            "gpu_resource": self.gpu_resource,
            "gpu_model": self.gpu_model,
            "cpu_cores": self.main.cpu_cores,
            "memory_gib": self.main.memory_gib,
            "max_lifetime_seconds": self.max_lifetime_seconds,
        }


def _amount(
    value: Any, default: Decimal, *, errors: Errors, key: str, what: str, maximum: Decimal
) -> Decimal:
    read = read_decimal(value, errors=errors, key=key, what=what, maximum=maximum)
    return Decimal(default) if read is None else read


def _whole_or_default(
    value: Any, default: int, *, errors: Errors, key: str, high: int, what: str
) -> int:
    if value is None or value == "":
        return default
    return read_whole(value, errors=errors, key=key, low=1, high=high, what=what)
