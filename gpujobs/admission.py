"""Whether a team may run a job on a cluster: the rules every workload meets
(``workloads.admission``: team, namespace, images, GPU kind and model, annotations), the
preprocessing container's and the team's budget. ``submission_refusals`` judges requests by
all of them; the quota (``workloads.quota.check_quota``, under the team's row lock) is checked
by ``services.job_submit`` and ``job_submit_many`` when they store the jobs.

On a cluster whose quota Kueue enforces, a job that does not fit what the quota leaves now
waits in the team's queue instead, and ``queue_fit_refusals`` refuses only a job that can never
run there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from billing.enforcement import budget_refusal
from clusters.models import Cluster, QuotaMode
from clusters.vocabulary import GUARANTEED
from gpujobs import selectors
from gpujobs.specs import JobRequest
from reconcile.desired_state import team_queue_limits
from tenants.models import Team
from workloads.admission import parse_with_refusals, workload_refusals
from workloads.specs import Errors


def job_refusals(*, team: Team, cluster: Cluster, request: JobRequest) -> Errors:
    """Every rule of the team and the cluster the request breaks, by field (quota aside)."""
    preprocess = request.preprocess
    return workload_refusals(
        team=team,
        cluster=cluster,
        request=request,
        second=("preprocess", preprocess.container) if preprocess is not None else None,
    )


def parse_job_request(
    data: Mapping[str, Any], *, team: Team | None, cluster: Cluster | None
) -> JobRequest:
    """``JobRequest.parse`` for the serializer and the form (``parse_with_refusals``)."""
    refusals = None
    if team is not None and cluster is not None:

        def refusals(request: JobRequest) -> Errors:
            return job_refusals(team=team, cluster=cluster, request=request)

    return parse_with_refusals(JobRequest.read, data, refusals)


def _model_words(model: str) -> str:
    return f"{model} GPUs" if model else "GPUs"


def queue_fit_refusals(*, team: Team, cluster: Cluster, request: JobRequest) -> Errors:
    """Why a job can never run on a Kueue cluster, under ``gpus`` (nothing when it can), from
    the team's queue figures as the reconcile builds its queues (``team_queue_limits``):

    * more GPUs than one node of the model has (a job's pod runs on one node);
    * guaranteed: more than the team's own quota of the job's GPU model (a job that names no
      model: of the model, or of "any model", it holds most of). Kueue gives a job's GPUs one
      flavor, so two flavors' quotas never add up for one job, and a job that names a model
      never gets the flavor of grants of any model (Kueue finds that flavor's node labels do
      not match the job's model);
    * opportunistic: more than the team may borrow (its opportunistic queue has no quota of its
      own: its borrowing limit, or without one the cluster's GPUs of the model).

    Without the cluster's per-model inventory the node and cluster-size checks are left to
    Kueue (the job then waits with Kueue's reason)."""
    capacities = selectors.model_capacities(cluster=cluster, gpu_resource=request.gpu_resource)
    if request.gpu_model:
        capacities = [c for c in capacities if c.gpu_model == request.gpu_model]
    where = f"cluster {cluster.name}"
    wanted = _model_words(request.gpu_model)
    gpus = request.gpus
    largest_node = max((c.max_per_node for c in capacities), default=None)
    if largest_node is not None and gpus > largest_node:
        return {
            "gpus": f"This job can never run: it asks for {gpus} GPUs, a job runs on one node, "
            f"and the largest node of {where} has {largest_node} {wanted}."
        }
    limits = team_queue_limits(team=team, cluster=cluster)
    if request.priority == GUARANTEED:
        own = {
            model: count
            for (resource, model), count in limits.own.items()
            if resource == request.gpu_resource
        }
        models = [request.gpu_model] if request.gpu_model else list(own)
        usable = max((own.get(model, 0) for model in models), default=0)
        if gpus > usable:
            return {
                "gpus": f"A guaranteed job runs only within team {team.slug}'s own quota, and "
                f"the most it holds of {wanted} on {where} is {usable}; this job asks for "
                f"{gpus}, so it could never start. Submit it as opportunistic to borrow GPUs "
                "other teams leave idle (it may then be preempted), or ask for more quota."
            }
        return {}
    limit = limits.policy.borrowing_limit
    if limit is not None and gpus > limit:
        return {
            "gpus": f"An opportunistic job runs on borrowed GPUs, and team {team.slug} may "
            f"borrow at most {limit} {wanted} on {where} (its borrowing limit); this job asks "
            f"for {gpus}, so it could never start."
        }
    total = max((c.allocatable for c in capacities), default=None)
    if total is not None and gpus > total:
        return {
            "gpus": f"This job can never run: it asks for {gpus} GPUs and {where} has "
            f"{total} {wanted} of one model at most."
        }
    return {}


def _judged_alike(request: JobRequest) -> tuple:
    """What the rules of ``submission_refusals`` read of a request: the images and annotations
    and the GPUs' kind and model (``job_refusals``), the model and the kind of work
    (the budgets), and the GPUs' number (``queue_fit_refusals``). Requests alike in
    these are refused alike, whatever their names, commands or environments."""
    preprocess = request.preprocess
    return (
        request.main.image,
        preprocess.container.image if preprocess is not None else None,
        request.annotations,
        request.gpu_resource,
        request.gpu_model,
        request.priority,
        request.gpus,
    )


def submission_refusals(
    *, team: Team, cluster: Cluster, job_requests: Sequence[JobRequest]
) -> list[Errors]:
    """Each request's refusals by field, every rule but the quota (checked under the team's
    lock when the jobs are stored): the team's and the cluster's rules, else the budgets, else,
    on a Kueue cluster, whether the job could ever run there. Requests alike in what the rules
    read are judged once."""
    judged: dict[tuple, Errors] = {}
    per_job = []
    for request in job_requests:
        key = _judged_alike(request)
        if key not in judged:
            judged[key] = _refusals(team=team, cluster=cluster, request=request)
        per_job.append(judged[key])
    return per_job


def _refusals(*, team: Team, cluster: Cluster, request: JobRequest) -> Errors:
    errors = job_refusals(team=team, cluster=cluster, request=request)
    if errors:
        return errors
    refusal = budget_refusal(
        team=team, cluster=cluster, gpu_model=request.gpu_model, priority=request.priority
    )
    if refusal:
        return {"gpus": refusal}
    if cluster.quota_mode == QuotaMode.KUEUE:
        # It waits in the queue when it does not fit now; refused only if it never can.
        return queue_fit_refusals(team=team, cluster=cluster, request=request)
    return {}
