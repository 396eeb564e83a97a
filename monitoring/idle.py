"""Idle GPUs: the periodic check that opens, continues and closes each idle pod's episode, tells
the team's leads, and applies the team's stop policy (warn, then stop pods the portal created);
and setting that policy.

Which pods are idle is ``monitoring.metrics.pod_usage``' verdict (the cluster's threshold over
its window); stopping one is ``clusters.pods``. Only pods in namespaces the reconcile found the
portal's for their team count, and before warning about or stopping a pod the namespace is read
again from the cluster (``reconcile.namespaces``): the portal never acts in a namespace of a team's
name that someone else made.

An inference service's replica is reported like any pod, but stopped only when the team's policy
says so (``IdlePolicy.stop_services``): a service answers requests, and a quiet hour is not
waste the way an idle notebook is. Stopping one scales the whole service to zero through the
portal (``clusters.pods`` hands the stop to the serving app).
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from clusters import pods
from clusters.kube import KubeClient, KubeError
from clusters.models import Cluster
from clusters.vocabulary import INFERENCE_SERVICE_KIND
from monitoring import permissions, selectors
from monitoring.metrics import pod_usage, prometheus_for
from monitoring.models import IdlePod, IdlePolicy, Notification
from monitoring.notifications import notify_team_leads
from monitoring.prometheus import PrometheusError
from reconcile.namespaces import check_namespace_owned
from tenants.audit import audit
from tenants.events import EventKind, emit
from tenants.models import AuditEvent, Team
from tenants.selectors import owned_namespaces

logger = logging.getLogger(__name__)


@dataclass
class IdleCheckResult:
    """What one check of one cluster did."""

    cluster: str
    idle: list[str] = field(default_factory=list)  # namespace/pod found idle now
    notified: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    error: str = ""


def _policy_for(team: Team, policies: dict[int, IdlePolicy]) -> IdlePolicy:
    return policies.get(team.pk) or IdlePolicy(team=team)


def _idle_minutes(episode: IdlePod, *, now: datetime.datetime, window_minutes: int) -> float:
    """How long the pod has been idle: it already was for a whole window when first found."""
    return (now - episode.first_idle_at).total_seconds() / 60 + window_minutes


def _team_link(team: Team, cluster: Cluster) -> str:
    return reverse("monitoring-team", args=[team.slug]) + f"?cluster={cluster.name}"


def _emit_idle(team: Team, cluster: Cluster, episode: IdlePod) -> None:
    """Tell the team's listeners (webhooks) of a newly idle pod, once per idle episode."""
    emit(
        team_id=team.pk,
        kind=EventKind.GPUS_IDLE,
        title=(
            f"GPUs idle: {episode.namespace}/{episode.pod} holds {episode.gpus_text} on "
            f"{cluster.name} at {episode.average_utilisation:.1f}% utilisation"
        ),
        data={
            "cluster": cluster.name,
            "namespace": episode.namespace,
            "pod": episode.pod,
            "gpus": episode.gpus,
            "gpu_equivalents": episode.gpu_equivalents,
            "gpus_described": episode.gpus_text,
            "average_utilisation_percent": round(episode.average_utilisation, 1),
            "window_minutes": cluster.idle_window_minutes,
            "threshold_percent": cluster.idle_utilization_percent,
        },
        link=_team_link(team, cluster),
    )


def idle_check_cluster(
    *, cluster: Cluster, now: datetime.datetime | None = None
) -> IdleCheckResult:
    """Find the pods idle on the cluster now; open, continue and close their idle episodes;
    tell the leads of a newly idle pod; warn, then stop, pods past their team's stop limit.

    Safe to run twice at once: the episodes are written under the cluster's row lock, and
    warning and stopping are each claimed by a conditional update before they happen.
    """
    now = now or timezone.now()
    result = IdleCheckResult(cluster=cluster.name)
    try:
        with prometheus_for(cluster) as prometheus:
            usage = pod_usage(prometheus, cluster, at=now.timestamp())
    except PrometheusError as error:
        # Unknown is not "busy": leave every open episode as it is until Prometheus answers.
        result.error = str(error)
        logger.warning("idle check of %s skipped: %s", cluster.name, error)
        return result
    owned = owned_namespaces(cluster=cluster, among={p.namespace for p in usage})
    teams = {t.slug: t for t in Team.objects.filter(slug__in=owned, archived_at__isnull=True)}
    idle_now = {(p.namespace, p.pod): p for p in usage if p.idle and p.namespace in teams}
    policies = {p.team_id: p for p in IdlePolicy.objects.filter(team__in=teams.values())}

    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
        episodes = {
            (e.namespace, e.pod): e
            for e in IdlePod.objects.filter(cluster=cluster, ended_at__isnull=True)
        }
        for key, episode in episodes.items():
            if key not in idle_now:
                episode.ended_at = now
                episode.save(update_fields=["ended_at"])
                result.recovered.append("/".join(key))
        for key, usage_now in idle_now.items():
            team = teams[usage_now.namespace]
            episode = episodes.get(key)
            if episode is None:
                episode = IdlePod.objects.create(
                    cluster=cluster,
                    team=team,
                    namespace=key[0],
                    pod=key[1],
                    gpus=usage_now.gpus,
                    gpu_equivalents=usage_now.gpu_equivalents,
                    gpus_described=usage_now.gpus_described[:200],
                    average_utilisation=usage_now.average_utilisation,
                    first_idle_at=now,
                    last_idle_at=now,
                )
                episodes[key] = episode
                _emit_idle(team, cluster, episode)
            else:
                episode.gpus = usage_now.gpus
                episode.gpu_equivalents = usage_now.gpu_equivalents
                episode.gpus_described = usage_now.gpus_described[:200]
                episode.average_utilisation = usage_now.average_utilisation
                episode.last_idle_at = max(now, episode.first_idle_at)
                episode.save(
                    update_fields=[
                        "gpus",
                        "gpu_equivalents",
                        "gpus_described",
                        "average_utilisation",
                        "last_idle_at",
                    ]
                )
            result.idle.append("/".join(key))
            if episode.notified_at is None and _policy_for(team, policies).notify_leads:
                notify_team_leads(
                    team=team,
                    kind=Notification.Kind.IDLE,
                    subject=f"GPUs idle: {key[0]}/{key[1]} on {cluster.name}",
                    body=(
                        f"Pod {key[1]} in {key[0]} holds {usage_now.gpus_described} on "
                        f"{cluster.name} that averaged {usage_now.average_utilisation:.1f}% "
                        f"utilisation over the last {cluster.idle_window_minutes} minutes "
                        f"(the idle threshold is {cluster.idle_utilization_percent}%). "
                        "Stop it if it is not doing useful work, so others can use the GPUs."
                    ),
                    link=_team_link(team, cluster),
                    idle_pod=episode,
                )
                episode.notified_at = now
                episode.save(update_fields=["notified_at"])
                result.notified.append("/".join(key))

    for key, usage_now in idle_now.items():
        team = teams[usage_now.namespace]
        policy = _policy_for(team, policies)
        if policy.stop_after_minutes is not None:
            _apply_stop_policy(
                cluster=cluster,
                team=team,
                policy=policy,
                episode=episodes[key],
                now=now,
                result=result,
            )
    return result


def _check_namespace(cluster: Cluster, namespace: str) -> None:
    """Raises ``NamespaceNotOwned`` (a ``KubeError``) unless the namespace, read now, is the
    portal's for its team."""
    check_namespace_owned(KubeClient.for_cluster(cluster), slug=namespace)


def _stop_failed(episode: IdlePod, error: Exception, *, doing: str) -> None:
    """Release the stop claim. A refusal, or an error retrying will not mend (the portal may
    not delete it, say), is written on the episode once, so checks stop trying and the page
    shows why; a transient cluster error is left for the next check."""
    if isinstance(error, KubeError) and error.transient:
        logger.warning("could not %s: %s", doing, error)
        IdlePod.objects.filter(pk=episode.pk).update(stopped_at=None)
        return
    IdlePod.objects.filter(pk=episode.pk).update(stopped_at=None, stop_error=str(error))


def _apply_stop_policy(
    *,
    cluster: Cluster,
    team: Team,
    policy: IdlePolicy,
    episode: IdlePod,
    now: datetime.datetime,
    result: IdleCheckResult,
) -> None:
    """Warn once the pod is within the warning time of the limit, stop it once it is past the
    limit and the warning is at least the warning time old. Pods the portal did not create are
    never stopped (nor warned about); that is recorded once on the episode."""
    if episode.stopped_at is not None or episode.stop_error:
        return
    name = f"{episode.namespace}/{episode.pod}"
    idle_minutes = _idle_minutes(episode, now=now, window_minutes=cluster.idle_window_minutes)
    stop_at = policy.stop_after_minutes
    warning = datetime.timedelta(minutes=policy.warn_minutes_before_stop)
    if episode.warned_at is None:
        if idle_minutes < stop_at - policy.warn_minutes_before_stop:
            return
        try:
            _check_namespace(cluster, episode.namespace)
            target = pods.check_stoppable(cluster, namespace=episode.namespace, pod=episode.pod)
        except (pods.StopRefused, KubeError) as error:
            _stop_failed(episode, error, doing=f"check {name} on {cluster.name}")
            return
        if target.kind == INFERENCE_SERVICE_KIND and not policy.stop_services:
            IdlePod.objects.filter(pk=episode.pk).update(
                stop_error=f"a replica of an inference service; {team}'s idle policy does not "
                "stop services (its leads are told it is idle)"
            )
            return
        with transaction.atomic():
            claimed = IdlePod.objects.filter(pk=episode.pk, warned_at__isnull=True).update(
                warned_at=now
            )
            if claimed != 1:
                return  # another check warned first
            minutes = max(policy.warn_minutes_before_stop, round(stop_at - idle_minutes))
            notify_team_leads(
                team=team,
                kind=Notification.Kind.IDLE_WARNING,
                subject=f"Idle pod {name} will be stopped in {minutes} minutes",
                body=(
                    f"Pod {episode.pod} in {episode.namespace} has left its {episode.gpus_text} "
                    f"on {cluster.name} idle for {idle_minutes:.0f} minutes. {team}'s idle policy "
                    f"stops portal {_what(target.kind)} idle for {stop_at} minutes: it will be "
                    f"stopped in {minutes} minutes unless its GPUs get busy."
                ),
                link=_team_link(team, cluster),
                idle_pod=episode,
            )
        result.warned.append(name)
        return
    if idle_minutes < stop_at or now - episode.warned_at < warning:
        return
    if IdlePod.objects.filter(pk=episode.pk, stopped_at__isnull=True).update(stopped_at=now) != 1:
        return  # another check is stopping it
    try:
        _check_namespace(cluster, episode.namespace)
        stopped = pods.stop_managed_pod(cluster, namespace=episode.namespace, pod=episode.pod)
    except (pods.StopRefused, KubeError) as error:
        _stop_failed(episode, error, doing=f"stop {name} on {cluster.name}")
        return
    with transaction.atomic():
        audit(
            actor=None,
            action=AuditEvent.Action.IDLE_POD_STOPPED,
            target=episode,
            team=team,
            before=None,
            after={
                "cluster": cluster.name,
                "namespace": episode.namespace,
                "pod": episode.pod,
                "deleted": f"{stopped.kind}/{stopped.name}",
                "idle_minutes": round(idle_minutes),
            },
            note=f"Idle past the team's {stop_at}-minute limit.",
        )
        notify_team_leads(
            team=team,
            kind=Notification.Kind.IDLE_STOPPED,
            subject=f"Stopped idle pod {name}",
            body=(
                f"Pod {episode.pod} in {episode.namespace} left its {episode.gpus_text} on "
                f"{cluster.name} idle for {idle_minutes:.0f} minutes, past {team}'s limit of "
                f"{stop_at} minutes. The portal {_how(stopped)} to free the GPUs."
            ),
            link=_team_link(team, cluster),
            idle_pod=episode,
        )
    result.stopped.append(name)


def _what(kind: str) -> str:
    return "inference services" if kind == INFERENCE_SERVICE_KIND else "jobs"


def _how(stopped: pods.Stopped) -> str:
    if stopped.kind == INFERENCE_SERVICE_KIND:
        return f"stopped the inference service (#{stopped.name}: scaled to zero)"
    return f"deleted {stopped.kind} {stopped.name}"


def idle_check(*, now: datetime.datetime | None = None) -> list[IdleCheckResult]:
    """Check every cluster that has a Prometheus; one cluster's trouble never stops the rest."""
    return [idle_check_cluster(cluster=c, now=now) for c in selectors.clusters_with_metrics()]


def idle_policy_set(
    *,
    actor: User,
    team: Team,
    notify_leads: bool,
    stop_after_minutes: int | None,
    warn_minutes_before_stop: int,
    stop_services: bool = False,
) -> IdlePolicy:
    """Set the team's idle policy (its leads and admins may)."""
    permissions.check_can_set_idle_policy(actor, team)
    if stop_after_minutes is not None and stop_after_minutes <= warn_minutes_before_stop:
        raise ValidationError(
            {"stop_after_minutes": "Must be longer than the warning time before it."}
        )
    fields = ["notify_leads", "stop_after_minutes", "warn_minutes_before_stop"]
    with transaction.atomic():
        policy, _ = IdlePolicy.objects.select_for_update().get_or_create(team=team)
        before = {f: getattr(policy, f) for f in fields}
        before_stop_services = policy.stop_services
        policy.notify_leads = notify_leads
        policy.stop_after_minutes = stop_after_minutes
        policy.warn_minutes_before_stop = warn_minutes_before_stop
        policy.stop_services = stop_services
        policy.updated_by = actor
        policy.full_clean(exclude=["team"])
        policy.save()
        after = {f: getattr(policy, f) for f in fields}
        if before_stop_services != stop_services:
            # Audited when it changes (services are stopped only when a lead said so).
            before["stop_services"], after["stop_services"] = before_stop_services, stop_services
        if before != after:
            audit(
                actor=actor,
                action=AuditEvent.Action.IDLE_POLICY_SET,
                target=policy,
                team=team,
                before=before,
                after=after,
            )
    return policy
