"""Whether a team may run a workload on a cluster: the rules that depend on them, checked on a
request whose shape ``workloads.specs`` has already checked, for every kind of workload (a job,
an inference service).

The team must not be archived, nor its namespace on the cluster be known as someone else's;
every image must come from the cluster's allowed registries; the GPU kind and model must be
among the cluster's; annotations must stay out of Kubernetes' and the portal's prefixes and ask
the container runtime for nothing. ``workload_refusals`` checks them all, by field; the quota
is ``workloads.quota``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

from clusters.models import Cluster
from clusters.vocabulary import PORTAL_PREFIX, RUNTIME_ANNOTATION_PREFIXES
from tenants.models import Team
from tenants.selectors import namespace_ownership
from workloads import gpu_kinds
from workloads.images import registry_refusal
from workloads.specs import ContainerRequest, EnvPairs, Errors, GpuPodRequest, joined

# Kubernetes' own annotation prefixes (and their subdomains); the portal's is PORTAL_PREFIX.
RESERVED_ANNOTATION_DOMAINS = ("kubernetes.io", "k8s.io")


def check_team(team: Team, *, errors: Errors, what: str = "jobs") -> None:
    if team.archived_at is not None:
        errors["team"] = f"Team {team.slug} is archived and cannot run {what}."


def check_namespace(team: Team, *, cluster: Cluster, errors: Errors, what: str = "job") -> None:
    """Refuse at once when the last reconcile found the team's namespace someone else's (the
    worker checks the cluster itself again before it creates anything there)."""
    if namespace_ownership(cluster=cluster, namespace=team.slug) is False:
        errors["cluster"] = (
            f"Namespace {team.slug} on cluster {cluster.name} was not created by the portal for "
            f"team {team.slug}, so the portal runs no {what} in it. A cluster admin must delete "
            "or rename it (or the team needs another slug)."
        )


def check_image(image: str, *, cluster: Cluster, errors: Errors, key: str) -> None:
    """The cluster's allowed registries (an image left empty by a shape error is skipped)."""
    if not image:
        return
    refusal = registry_refusal(
        image,
        allowed=cluster.allowed_registries or [],
        cluster_name=cluster.name,
        allow_all=cluster.allow_all_registries,
    )
    if refusal:
        errors[key] = refusal


def check_gpus(*, cluster: Cluster, gpu_resource: str, gpu_model: str, errors: Errors) -> None:
    """The GPU kind must be one the cluster offers, and the model one its nodes have (when its
    inventory names any)."""
    offered = gpu_kinds.gpu_resources(cluster)
    if gpu_resource not in offered:
        errors["gpu_resource"] = (
            f"Cluster {cluster.name} has no GPUs of kind {gpu_resource!r}; it offers: "
            f"{', '.join(offered)}."
        )
    if not gpu_model:  # any model: the inventory's models are not read
        return
    models = gpu_kinds.gpu_models(cluster)
    if models and gpu_model not in models:
        errors["gpu_model"] = (
            f"Cluster {cluster.name} has no {gpu_model} GPUs; it has: {', '.join(models)}."
        )


def check_annotations(annotations: EnvPairs, *, errors: Errors, what: str = "jobs") -> None:
    for key, _ in annotations:
        if key.startswith(RUNTIME_ANNOTATION_PREFIXES):
            errors["annotations"] = (
                f"{key} asks the container runtime for devices or another way to run; {what} "
                "get GPUs only from what they ask for."
            )
            return
        prefix = key.rpartition("/")[0]
        if prefix == PORTAL_PREFIX or any(
            prefix == domain or prefix.endswith(f".{domain}")
            for domain in RESERVED_ANNOTATION_DOMAINS
        ):
            errors["annotations"] = (
                f"{key} is reserved for Kubernetes and the portal; {what} cannot set it."
            )
            return


def workload_refusals(
    *,
    team: Team,
    cluster: Cluster,
    request: GpuPodRequest,
    second: tuple[str, ContainerRequest] | None = None,
    what: str = "jobs",
) -> Errors:
    """Every rule of the team and the cluster a workload breaks, by field (quota aside): the
    ``request``'s GPU container, its GPUs, its pods' annotations, and a CPU-only ``second``
    container given as (its field, the container) whose bad fields are named under its field.
    ``what`` names the workload in the messages ("jobs", "services")."""
    errors: Errors = {}
    check_team(team, errors=errors, what=what)
    check_namespace(team, cluster=cluster, errors=errors, what=what.removesuffix("s"))
    check_image(request.main.image, cluster=cluster, errors=errors, key="image")
    check_gpus(
        cluster=cluster,
        gpu_resource=request.gpu_resource,
        gpu_model=request.gpu_model,
        errors=errors,
    )
    if second is not None:
        key, container = second
        local: Errors = {}
        check_image(container.image, cluster=cluster, errors=local, key="image")
        if local:
            errors[key] = joined(local)
    check_annotations(request.annotations, errors=errors, what=what)
    return errors


def parse_with_refusals(read, data: Mapping[str, Any], refusals=None):
    """The request ``read`` makes of ``data`` (a ``(request, errors)`` reader such as
    ``JobRequest.read``). When the shape is wrong, ``refusals(request)`` (the team's and the
    cluster's rules, when both are known) is checked too on the fields that are right, so that
    one ``ValidationError`` names every bad field; a request that parses is left to the
    service's own checks."""
    request, errors = read(data)
    if not errors:
        return request
    if refusals is not None:
        for key, message in refusals(request).items():
            errors.setdefault(key, message)
    raise ValidationError(errors)


def field_errors(errors: Errors) -> dict[str, list[str]]:
    """Refusals by field as a 400 names a field's: a list of messages."""
    return {key: [message] for key, message in errors.items()}
