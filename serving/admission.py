"""Whether a team may run a service's revision on a cluster, and whether a change fits its
quota: the shared workload rules of ``workloads.admission`` applied to services.

The team and the cluster's rules (archived team, a namespace someone else made, allowed
registries for the model server and the sidecar, GPU kinds and models, reserved annotations)
are ``workload_refusals``'. The quota is the one jobs are held to
(``workloads.quota.check_quota``, under the team's row lock): replicas x GPUs of every live
revision of every active service count against the team's grants together with its unfinished
jobs, and a change that would hold more GPUs than are left (a new service, a new revision
beside the running one, a canary, a scale-up, a restart) is refused before anything reaches the
cluster, with the arithmetic in the message.

On a cluster whose quota Kueue enforces, services are not queued: Kueue admits batch Jobs, and a
Deployment's pods would never wait in its queues. They are checked here against the team's own
grants, as in quota only mode, and the namespace's ResourceQuota refuses any pod beyond it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from clusters.models import Cluster
from serving import selectors
from serving.models import InferenceService
from serving.specs import DeployRequest, RevisionRequest, revision_changes
from tenants.models import Team
from workloads.admission import parse_with_refusals, workload_refusals
from workloads.quota import check_quota

Errors = dict[str, str]


def revision_refusals(*, team: Team, cluster: Cluster, request: RevisionRequest) -> Errors:
    """Every rule of the team and the cluster the revision breaks, by field (quota aside)."""
    sidecar = request.sidecar
    return workload_refusals(
        team=team,
        cluster=cluster,
        request=request,
        second=("sidecar", sidecar) if sidecar is not None else None,
        what="services",
    )


def check_revision(*, team: Team, cluster: Cluster, request: RevisionRequest) -> None:
    errors = revision_refusals(team=team, cluster=cluster, request=request)
    if errors:
        raise ValidationError(errors)


def parse_deploy_request(
    data: Mapping[str, Any], *, team: Team | None, cluster: Cluster | None
) -> DeployRequest:
    """``DeployRequest.parse`` for the serializer and the form, naming every bad field in one
    answer (``parse_with_refusals``)."""
    refusals = None
    if team is not None and cluster is not None:

        def refusals(request: DeployRequest) -> Errors:
            return revision_refusals(team=team, cluster=cluster, request=request.revision)

    return parse_with_refusals(DeployRequest.read, data, refusals)


def parse_revision_changes(data: Mapping[str, Any], *, base: RevisionRequest) -> RevisionRequest:
    """A new revision: ``base`` (the running revision's spec) with the fields ``data`` gives
    changed; one ``ValidationError`` naming every bad field."""
    return RevisionRequest.parse(revision_changes(base, data))


@dataclass(frozen=True)
class Planned:
    """A live revision as a change would leave it, for the quota arithmetic."""

    number: int
    role: str
    replicas: int
    weight: int
    gpus: int
    gpu_resource: str


def planned(revision) -> Planned:
    return Planned(
        number=revision.number,
        role=revision.role,
        replicas=revision.replicas,
        weight=revision.weight,
        gpus=revision.gpus,
        gpu_resource=revision.gpu_resource,
    )


def check_fits(
    *,
    service: InferenceService,
    before: Sequence[Planned],
    after: Sequence[Planned],
    stopped_before: bool,
    asking: str,
    field: str,
) -> None:
    """What the service's replicas would ask for after a change, beyond what they ask for now,
    must fit in what the team's quota leaves. ``asking`` is the change in words with its
    arithmetic ("scaling r1 from 2 to 5 replicas x 2 GPUs asks for"). The caller holds the
    team's row lock."""
    routing = selectors.service_routing(service)
    now = selectors.gpus_by_resource(before, routing=routing, stopped=stopped_before)
    then = selectors.gpus_by_resource(after, routing=routing)
    for gpu_resource, gpus in sorted(then.items()):
        more = gpus - now.get(gpu_resource, 0)
        if more > 0:
            check_quota(
                team=service.team,
                cluster=service.cluster,
                gpu_resource=gpu_resource,
                gpus=more,
                asking=asking,
                field=field,
            )


def replicas_words(replicas: int, gpus: int) -> str:
    return (
        f"{replicas} replica{'s' if replicas != 1 else ''} × {gpus} GPU{'s' if gpus != 1 else ''}"
    )
