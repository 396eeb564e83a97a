"""GPU monitoring: dashboards from Prometheus, idle-GPU checks, usage reports and alert rules.

Pages and the API call these functions; they build PromQL with ``monitoring.promql``, run it
with ``monitoring.prometheus`` and turn results into figures with ``monitoring.figures``. The
namespace every team query filters on is the team's slug, read from the database: nothing from
a request ever widens a query beyond what the caller already may see.

Dashboards never raise for Prometheus trouble: each chart carries the figure or the message to
show in its place. Functions behind the API (``team_series``, ``usage_report(strict=True)``)
raise ``PrometheusError`` instead, which the API answers with a 503.
"""

from __future__ import annotations

import datetime
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from clusters import inventory, pods
from clusters.kube import KubeError
from clusters.models import Cluster
from monitoring import figures, promql, reports, rules, selectors
from monitoring.figures import Axis
from monitoring.models import IdlePod, IdlePolicy, Notification
from monitoring.prometheus import PrometheusClient, PrometheusError, Series
from tenants import services as tenant_services
from tenants.models import Membership, QuotaGrant, Team
from tenants.permissions import is_portal_admin, team_role
from tenants.selectors import teams_visible_to

logger = logging.getLogger(__name__)

UTILISATION_AXIS = Axis("Utilisation", "%", (0, 100))
MIB_PER_GIB = 1024


def metrics_config(cluster: Cluster) -> promql.MetricsConfig:
    return promql.MetricsConfig(
        layout=cluster.metrics_label_layout, utilisation_metric=cluster.gpu_utilization_metric
    )


def prometheus_for(cluster: Cluster) -> PrometheusClient:
    """A client for the cluster's Prometheus (``PrometheusNotConfigured`` when it has none)."""
    return PrometheusClient(cluster.prometheus_url)


def unavailable_message(error: PrometheusError) -> str:
    return f"GPU metrics are unavailable right now. {error}"


# --- charts ----------------------------------------------------------------------------------


@dataclass
class Chart:
    """One chart of a page: its figure, or the sentence to show in its place."""

    key: str
    title: str
    figure: dict | None = None
    message: str = ""
    failed: bool = False

    @property
    def script_id(self) -> str:
        return f"figure-{self.key}"


def _chart(key: str, title: str, build: Callable[[], dict | None], *, empty: str) -> Chart:
    try:
        figure = build()
    except PrometheusError as error:
        return Chart(key, title, message=unavailable_message(error), failed=True)
    if figure is None:
        return Chart(key, title, message=empty)
    return Chart(key, title, figure=figure)


@dataclass(frozen=True)
class GaugeChart:
    """A DCGM gauge drawn per pod or per GPU: which metric, on what axis, scaled how."""

    key: str
    title: str
    metric: str
    axis: Axis
    scale: float = 1.0


GAUGE_CHARTS = (
    GaugeChart("memory", "Framebuffer memory used", promql.FB_USED, Axis("Memory", "GiB"),
               1 / MIB_PER_GIB),
    GaugeChart("power", "Power draw", promql.POWER, Axis("Power", "W")),
    GaugeChart("temperature", "Temperature (hottest GPU)", promql.TEMPERATURE,
               Axis("Temperature", "°C")),
)  # fmt: skip


# --- pods and idleness -----------------------------------------------------------------------


@dataclass(frozen=True)
class PodUsage:
    """A pod holding GPUs now: how many, and their average utilisation over the cluster's idle
    window (None while the pod is younger than the window). Idle when that is under the
    cluster's threshold."""

    namespace: str
    pod: str
    gpus: int
    average_utilisation: float | None
    idle: bool


def pod_usage(
    prometheus: PrometheusClient,
    cluster: Cluster,
    *,
    namespace: str | None = None,
    at: float | None = None,
) -> list[PodUsage]:
    """Every pod holding GPUs on the cluster (or in one namespace), judged by the idle rule."""
    config = metrics_config(cluster)
    labels = config.labels
    counts = prometheus.query(promql.pod_gpu_count(config, namespace=namespace), at=at)
    averages = prometheus.query(
        promql.pod_average_utilisation(
            config, window_minutes=cluster.idle_window_minutes, namespace=namespace
        ),
        at=at,
    )

    def key(sample) -> tuple[str, str]:
        return sample.labels.get(labels.namespace, ""), sample.labels.get(labels.pod, "")

    average_by_pod = {key(s): s.value for s in averages if not math.isnan(s.value)}
    usage = []
    for sample in counts:
        average = average_by_pod.get(key(sample))
        usage.append(
            PodUsage(
                namespace=key(sample)[0],
                pod=key(sample)[1],
                gpus=int(sample.value),
                average_utilisation=average,
                idle=average is not None and average < cluster.idle_utilization_percent,
            )
        )
    return sorted(usage, key=lambda p: (p.namespace, p.pod))


# --- dashboards ------------------------------------------------------------------------------


@dataclass
class Dashboard:
    """Charts of a team's (or some pods') GPUs over a window, and the pods holding GPUs now."""

    cluster: Cluster
    window: promql.Window
    charts: list[Chart]
    pods: list[PodUsage] = field(default_factory=list)
    error: str = ""
    gpus_held: int | None = None
    gpus_granted: int | None = None

    @property
    def idle_pods(self) -> list[PodUsage]:
        return [p for p in self.pods if p.idle]


def _first_error(charts: Sequence[Chart], *errors: str) -> str:
    return next((c.message for c in charts if c.failed), "") or next((e for e in errors if e), "")


def _line_chart(
    prometheus: PrometheusClient,
    window: promql.Window,
    *,
    key: str,
    title: str,
    query: str,
    axis: Axis,
    name: Callable[[dict], str],
    empty: str,
    scale: float = 1.0,
) -> Chart:
    """A line per series of a range query over the window."""
    start, end = window.aligned()

    def build():
        series = prometheus.query_range(query, start=start, end=end, step=window.step)
        if not series:
            return None
        return figures.time_series(
            series, title=title, axis=axis, name=name, scale=scale, x_range=(start, end)
        )

    return _chart(key, title, build, empty=empty)


def _gpu_name(labels: dict) -> str:
    return f"{labels.get(promql.NODE_LABEL, '?')}/{labels.get(promql.GPU_LABEL, '?')}"


def _gpu_charts(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    window: promql.Window,
    *,
    namespace: str,
    pods: Sequence[str] | None,
    empty: str,
) -> list[Chart]:
    """Utilisation, memory, power and temperature of the GPUs a namespace's pods hold: a line
    per pod, or, for the given ``pods``, a line per GPU they hold."""
    if pods is None:
        per, by = "per pod", [config.labels.pod]
        utilisation = promql.utilisation_by_pod(config, namespace=namespace)

        def name(labels: dict) -> str:
            return labels.get(config.labels.pod, "?")

    else:
        per, by, name = "per GPU", [promql.NODE_LABEL, promql.GPU_LABEL], _gpu_name
        utilisation = promql.utilisation_by_gpu(config, namespace=namespace, pods=pods)
    charts = [
        _line_chart(
            prometheus, window, key="utilisation", title=f"GPU utilisation {per}",
            query=utilisation, axis=UTILISATION_AXIS, name=name, empty=empty,
        )
    ]  # fmt: skip
    for gauge in GAUGE_CHARTS:
        query = promql.gauge_by(gauge.metric, config, by, namespace=namespace, pods=pods)
        charts.append(
            _line_chart(
                prometheus, window, key=gauge.key, title=f"{gauge.title} {per}", query=query,
                axis=gauge.axis, name=name, empty=empty, scale=gauge.scale,
            )
        )  # fmt: skip
    return charts


def team_dashboard(*, team: Team, cluster: Cluster, window: promql.Window) -> Dashboard:
    """Utilisation, memory, power and temperature of the team's GPUs per pod, GPUs held vs
    granted, and the team's pods holding GPUs now with their idle verdict."""
    config = metrics_config(cluster)
    namespace = team.slug
    granted = selectors.gpus_granted_now(team=team, cluster=cluster)
    start, end = window.aligned()
    empty = f"No pod of {team} held GPUs on {cluster.name} in this window."
    with prometheus_for(cluster) as prometheus:

        def held_figure():
            query = promql.gpus_held(config, namespace=namespace)
            series = prometheus.query_range(query, start=start, end=end, step=window.step)
            return figures.held_vs_granted(
                series, granted=granted, title="GPUs held vs granted", x_range=(start, end)
            )

        charts = _gpu_charts(prometheus, config, window, namespace=namespace, pods=None,
                             empty=empty)  # fmt: skip
        charts.append(_chart("held", "GPUs held vs granted", held_figure, empty=empty))
        pods, pods_error = _pod_usage_or_error(prometheus, cluster, namespace=namespace)
    return Dashboard(
        cluster=cluster,
        window=window,
        charts=charts,
        pods=pods,
        error=_first_error(charts, pods_error),
        gpus_held=None if pods_error else sum(p.gpus for p in pods),
        gpus_granted=granted,
    )


def _pod_usage_or_error(
    prometheus: PrometheusClient, cluster: Cluster, *, namespace: str
) -> tuple[list[PodUsage], str]:
    try:
        return pod_usage(prometheus, cluster, namespace=namespace), ""
    except PrometheusError as error:
        return [], unavailable_message(error)


def pod_dashboard(
    *,
    cluster: Cluster | str,
    namespace: str,
    pod_names: Sequence[str],
    window: promql.Window,
) -> Dashboard:
    """The team dashboard's charts for the GPUs some pods hold, one line per GPU.

    For callers that already decided the user may see these pods (the jobs app calls it with a
    job's cluster, its team's namespace and its pods' names).
    """
    if isinstance(cluster, str):
        cluster = Cluster.objects.get(name=cluster)
    pods = list(pod_names)
    if not pods:
        return Dashboard(cluster=cluster, window=window, charts=[])
    config = metrics_config(cluster)
    empty = f"No GPU held by {', '.join(pods)} in this window."
    with prometheus_for(cluster) as prometheus:
        charts = _gpu_charts(prometheus, config, window, namespace=namespace, pods=pods,
                             empty=empty)  # fmt: skip
        usage, usage_error = _pod_usage_or_error(prometheus, cluster, namespace=namespace)
    mine = [p for p in usage if p.pod in pods]
    return Dashboard(
        cluster=cluster,
        window=window,
        charts=charts,
        pods=mine,
        error=_first_error(charts, usage_error),
        gpus_held=sum(p.gpus for p in mine),
    )


@dataclass(frozen=True)
class ModelGpus:
    """GPUs of one model across a cluster's nodes."""

    gpu_model: str
    nodes: int
    allocatable: int
    allocated: int

    @property
    def free(self) -> int:
        return max(0, self.allocatable - self.allocated)


@dataclass
class ClusterDashboard:
    cluster: Cluster
    window: promql.Window
    charts: list[Chart]
    nodes: list[inventory.NodeGpus] = field(default_factory=list)
    models: list[ModelGpus] = field(default_factory=list)
    nodes_error: str = ""
    error: str = ""

    def _charts(self, *keys: str) -> list[Chart]:
        return [c for c in self.charts if c.key in keys]

    @property
    def capacity_charts(self) -> list[Chart]:
        return self._charts("nodes", "models")

    @property
    def heatmap_charts(self) -> list[Chart]:
        return self._charts("heatmap")

    @property
    def ranking_charts(self) -> list[Chart]:
        return self._charts("rank-held", "rank-utilisation")


def gpus_by_model(nodes: Sequence[inventory.NodeGpus]) -> list[ModelGpus]:
    totals: dict[str, list[int]] = {}
    for node in nodes:
        row = totals.setdefault(node.gpu_model or "unknown model", [0, 0, 0])
        row[0] += 1
        row[1] += node.gpus_allocatable
        row[2] += node.gpus_allocated
    return [ModelGpus(model, *row) for model, row in sorted(totals.items())]


def _namespace_names(namespaces: set[str]) -> dict[str, str]:
    """How to show each namespace: its team's name, or the bare namespace when no team owns it."""
    teams = dict(Team.objects.filter(slug__in=namespaces).values_list("slug", "name"))
    return {ns: teams.get(ns) or f"{ns} (no team)" for ns in namespaces}


def cluster_dashboard(*, cluster: Cluster, window: promql.Window) -> ClusterDashboard:
    """For admins: GPUs allocatable vs allocated per node and model, utilisation of every GPU
    over the window, and teams ranked by GPUs held now and by average utilisation."""
    config = metrics_config(cluster)
    charts: list[Chart] = []
    try:
        nodes = inventory.gpu_nodes(cluster)
        nodes_error = ""
    except KubeError as error:
        nodes, nodes_error = [], f"The cluster's nodes cannot be read right now. {error}"
    models = gpus_by_model(nodes)
    if nodes:
        charts.append(
            Chart(
                "nodes",
                "GPUs per node",
                figure=figures.allocation_bars(
                    [n.name for n in nodes],
                    allocatable=[n.gpus_allocatable for n in nodes],
                    allocated=[n.gpus_allocated for n in nodes],
                    title="GPUs allocatable vs allocated per node",
                ),
            )
        )
        charts.append(
            Chart(
                "models",
                "GPUs per model",
                figure=figures.allocation_bars(
                    [m.gpu_model for m in models],
                    allocatable=[m.allocatable for m in models],
                    allocated=[m.allocated for m in models],
                    title="GPUs allocatable vs allocated per GPU model",
                ),
            )
        )
    else:
        message = nodes_error or "No GPU nodes match the cluster's GPU node selector."
        charts.append(Chart("nodes", "GPUs per node", message=message, failed=bool(nodes_error)))

    with prometheus_for(cluster) as prometheus:

        def heatmap_figure():
            step = window.heatmap_step
            start, end = window.aligned(step)
            query = promql.utilisation_heatmap(config)
            series = prometheus.query_range(query, start=start, end=end, step=step)
            if not series:
                return None
            return figures.heatmap(
                series,
                title="GPU utilisation by node and GPU",
                row=_gpu_name,
                start=start,
                end=end,
                step=step,
                axis=UTILISATION_AXIS,
            )

        def ranked(query: str, at: float | None, *, title: str, axis: Axis, decimals: int):
            samples = prometheus.query(query, at=at)
            values = {
                s.labels.get(config.labels.namespace, ""): s.value
                for s in samples
                if not math.isnan(s.value)
            }
            if not values:
                return None
            names = _namespace_names(set(values))
            return figures.ranking(
                [(names[ns], v) for ns, v in values.items()],
                title=title,
                axis=axis,
                decimals=decimals,
            )

        _, window_end = window.aligned()
        charts.append(
            _chart("heatmap", "Utilisation heatmap", heatmap_figure,
                   empty="Prometheus has no GPU utilisation for this cluster in this window.")
        )  # fmt: skip
        charts.append(
            _chart(
                "rank-held",
                "Teams by GPUs held",
                lambda: ranked(
                    promql.gpus_held_by_namespace(config), None,
                    title="GPUs held now", axis=Axis("GPUs"), decimals=0,
                ),
                empty="No pod holds a GPU right now.",
            )
        )  # fmt: skip
        charts.append(
            _chart(
                "rank-utilisation",
                "Teams by average utilisation",
                lambda: ranked(
                    promql.average_utilisation_by_namespace(config, window), window_end,
                    title="Average GPU utilisation over the window", axis=UTILISATION_AXIS,
                    decimals=1,
                ),
                empty="No pod held a GPU in this window.",
            )
        )  # fmt: skip
    return ClusterDashboard(
        cluster=cluster,
        window=window,
        charts=charts,
        nodes=nodes,
        models=models,
        nodes_error=nodes_error,
        error=next((c.message for c in charts if c.failed and c.key != "nodes"), ""),
    )


# --- series for the API ----------------------------------------------------------------------


@dataclass
class TeamSeries:
    """A team's utilisation per pod over a window, as numbers (the API's answer)."""

    team: Team
    cluster: Cluster
    window: promql.Window
    step: int
    series: list[dict]
    pods: list[PodUsage]
    gpus_granted: int


def team_series(*, team: Team, cluster: Cluster, window: promql.Window) -> TeamSeries:
    """Raises ``PrometheusError`` when Prometheus cannot answer."""
    config = metrics_config(cluster)
    start, end = window.aligned()
    with prometheus_for(cluster) as prometheus:
        series = prometheus.query_range(
            promql.utilisation_by_pod(config, namespace=team.slug),
            start=start,
            end=end,
            step=window.step,
        )
        pods = pod_usage(prometheus, cluster, namespace=team.slug)
    return TeamSeries(
        team=team,
        cluster=cluster,
        window=window,
        step=window.step,
        series=[_series_json(s, config.labels.pod) for s in series],
        pods=pods,
        gpus_granted=selectors.gpus_granted_now(team=team, cluster=cluster),
    )


def _series_json(series: Series, pod_label: str) -> dict:
    return {
        "pod": series.labels.get(pod_label, ""),
        "points": [
            [t, None if math.isnan(v) else v]
            for t, v in zip(series.timestamps, series.values, strict=True)
        ],
    }


def team_pod_usage(*, team: Team, cluster: Cluster) -> list[PodUsage]:
    """The team's pods holding GPUs now. Raises ``PrometheusError``."""
    with prometheus_for(cluster) as prometheus:
        return pod_usage(prometheus, cluster, namespace=team.slug)


# --- idle checks, notifications and the stop policy -----------------------------------------


def email_configured() -> bool:
    """Mail goes out when a mail server is set, or a non-SMTP backend (console, locmem)."""
    backend = settings.EMAIL_BACKEND
    return bool(settings.EMAIL_HOST) or not backend.endswith("smtp.EmailBackend")


def _absolute(link: str) -> str:
    return settings.PORTAL_BASE_URL.rstrip("/") + link if link.startswith("/") else link


def notify_team_leads(
    *,
    team: Team,
    kind: str,
    subject: str,
    body: str,
    link: str = "",
    idle_pod: IdlePod | None = None,
) -> list[Notification]:
    """A notification for each lead of the team, and an e-mail after commit when mail is set
    up. Call inside the transaction that records why."""
    leads = list(
        User.objects.filter(
            memberships__team=team, memberships__role=Membership.Role.LEAD, is_active=True
        ).order_by("pk")
    )
    created = Notification.objects.bulk_create(
        [
            Notification(user=lead, team=team, kind=kind, subject=subject, body=body, link=link,
                         idle_pod=idle_pod)
            for lead in leads
        ]
    )  # fmt: skip
    recipients = {n.pk: lead.email for n, lead in zip(created, leads, strict=True) if lead.email}
    if recipients and email_configured():
        transaction.on_commit(
            lambda: _send_notification_mail(subject, body, link, recipients), robust=True
        )
    return created


def _send_notification_mail(subject: str, body: str, link: str, recipients: dict) -> None:
    text = f"{body}\n\n{_absolute(link)}\n" if link else f"{body}\n"
    for notification_id, address in recipients.items():
        try:
            send_mail(f"[{settings.PORTAL_NAME}] {subject}", text, None, [address])
        except Exception:  # a mail server down must not stop the idle check
            logger.exception("could not e-mail notification %s to %s", notification_id, address)
            continue
        Notification.objects.filter(pk=notification_id).update(emailed_at=timezone.now())


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
    teams = {
        t.slug: t
        for t in Team.objects.filter(
            slug__in={p.namespace for p in usage}, archived_at__isnull=True
        )
    }
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
                    cluster=cluster, team=team, namespace=key[0], pod=key[1],
                    gpus=usage_now.gpus, average_utilisation=usage_now.average_utilisation,
                    first_idle_at=now, last_idle_at=now,
                )  # fmt: skip
                episodes[key] = episode
            else:
                episode.gpus = usage_now.gpus
                episode.average_utilisation = usage_now.average_utilisation
                episode.last_idle_at = max(now, episode.first_idle_at)
                episode.save(update_fields=["gpus", "average_utilisation", "last_idle_at"])
            result.idle.append("/".join(key))
            if episode.notified_at is None and _policy_for(team, policies).notify_leads:
                notify_team_leads(
                    team=team,
                    kind=Notification.Kind.IDLE,
                    subject=f"GPUs idle: {key[0]}/{key[1]} on {cluster.name}",
                    body=(
                        f"Pod {key[1]} in {key[0]} holds {usage_now.gpus} GPU(s) on "
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
                cluster=cluster, team=team, policy=policy, episode=episodes[key], now=now,
                result=result,
            )  # fmt: skip
    return result


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
            pods.check_stoppable(cluster, namespace=episode.namespace, pod=episode.pod)
        except (pods.StopRefused, KubeError) as error:
            _stop_failed(episode, error, doing=f"check {name} on {cluster.name}")
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
                    f"Pod {episode.pod} in {episode.namespace} has left its {episode.gpus} GPU(s) "
                    f"on {cluster.name} idle for {idle_minutes:.0f} minutes. {team}'s idle policy "
                    f"stops portal jobs idle for {stop_at} minutes: it will be stopped in "
                    f"{minutes} minutes unless its GPUs get busy."
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
        stopped = pods.stop_managed_pod(cluster, namespace=episode.namespace, pod=episode.pod)
    except (pods.StopRefused, KubeError) as error:
        _stop_failed(episode, error, doing=f"stop {name} on {cluster.name}")
        return
    with transaction.atomic():
        tenant_services.audit(
            actor=None, action="idle_pod.stopped", target=episode, team=team, before=None,
            after={"cluster": cluster.name, "namespace": episode.namespace, "pod": episode.pod,
                   "deleted": f"{stopped.kind}/{stopped.name}",
                   "idle_minutes": round(idle_minutes)},
            note=f"Idle past the team's {stop_at}-minute limit.",
        )  # fmt: skip
        notify_team_leads(
            team=team,
            kind=Notification.Kind.IDLE_STOPPED,
            subject=f"Stopped idle pod {name}",
            body=(
                f"Pod {episode.pod} in {episode.namespace} left its GPU(s) on {cluster.name} idle "
                f"for {idle_minutes:.0f} minutes, past {team}'s limit of {stop_at} minutes. The "
                f"portal deleted {stopped.kind} {stopped.name} to free the GPUs."
            ),
            link=_team_link(team, cluster),
            idle_pod=episode,
        )
    result.stopped.append(name)


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
) -> IdlePolicy:
    """Set the team's idle policy (its leads and admins may)."""
    if not (is_portal_admin(actor) or team_role(actor, team) == Membership.Role.LEAD):
        raise PermissionDenied(f"Only leads of {team.slug} can change its idle policy.")
    if stop_after_minutes is not None and stop_after_minutes <= warn_minutes_before_stop:
        raise ValidationError(
            {"stop_after_minutes": "Must be longer than the warning time before it."}
        )
    fields = ["notify_leads", "stop_after_minutes", "warn_minutes_before_stop"]
    with transaction.atomic():
        policy, _ = IdlePolicy.objects.select_for_update().get_or_create(team=team)
        before = {f: getattr(policy, f) for f in fields}
        policy.notify_leads = notify_leads
        policy.stop_after_minutes = stop_after_minutes
        policy.warn_minutes_before_stop = warn_minutes_before_stop
        policy.updated_by = actor
        policy.full_clean(exclude=["team"])
        policy.save()
        after = {f: getattr(policy, f) for f in fields}
        if before != after:
            tenant_services.audit(
                actor=actor, action="idle_policy.set", target=policy, team=team,
                before=before, after=after,
            )  # fmt: skip
    return policy


def notifications_mark_read(*, user: User, ids: Sequence[int] | None = None) -> int:
    """Mark the user's notifications read (all of them when ``ids`` is None)."""
    unread = Notification.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        unread = unread.filter(pk__in=ids)
    return unread.update(read_at=timezone.now())


# --- usage report ----------------------------------------------------------------------------


@dataclass
class UsageReport:
    start: datetime.datetime
    end: datetime.datetime
    bucket: str
    rows: list[reports.UsageRow]
    errors: dict[str, str] = field(default_factory=dict)  # cluster name -> why it has no figures

    @property
    def totals(self) -> dict[str, float]:
        def total(attribute: str) -> float:
            return sum(getattr(r, attribute) or 0 for r in self.rows)

        return {
            "granted_gpu_hours": total("granted_gpu_hours"),
            "held_gpu_hours": total("held_gpu_hours"),
            "used_gpu_hours": total("used_gpu_hours"),
        }

    def csv(self) -> str:
        return reports.csv_text(self.rows)


def _measured_hours(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    period: reports.Period,
    *,
    at: datetime.datetime,
    namespaces: list[str] | None,
) -> tuple[dict[str, float], dict[str, float]]:
    """GPU-hours held and used per namespace in the period up to ``at``."""
    seconds = (at - period.start).total_seconds()
    resolution = settings.MONITORING_USAGE_RESOLUTION_SECONDS
    filters = {"namespaces": namespaces} if namespaces is not None else {"held": True}
    measured = []
    for build in (promql.gpu_seconds_held, promql.gpu_seconds_used):
        query = build(config, period_seconds=seconds, resolution=resolution, **filters)
        samples = prometheus.query(query, at=at.timestamp())
        measured.append(
            {
                s.labels.get(config.labels.namespace, ""): s.value / 3600
                for s in samples
                if not math.isnan(s.value)
            }
        )
    return measured[0], measured[1]


def usage_report(
    *,
    user: User | AnonymousUser,
    start: datetime.datetime,
    end: datetime.datetime,
    bucket: str = "total",
    strict: bool = False,
    now: datetime.datetime | None = None,
) -> UsageReport:
    """GPU-hours granted, held and used per team the user may see, cluster and period.

    With ``strict`` a Prometheus failure raises (the API's 503); otherwise the cluster's rows
    show granted hours only and ``errors`` says why.
    """
    now = now or timezone.now()
    tz = timezone.get_current_timezone()
    periods = reports.periods(start, end, bucket)
    teams = list(teams_visible_to(user).order_by("slug"))
    by_slug = {t.slug: t for t in teams}
    # Admins see every team: ask for every namespace rather than spell out hundreds of slugs.
    namespaces = None if is_portal_admin(user) else sorted(by_slug)
    grants = selectors.grant_spans(QuotaGrant.objects.filter(team__in=teams))
    report = UsageReport(start=start, end=end, bucket=bucket, rows=[])
    if not teams:
        return report
    for cluster in Cluster.objects.order_by("name"):
        cluster_grants = [g for g in grants if g.cluster_id == cluster.pk]
        config = metrics_config(cluster)
        measured: dict[int, tuple[dict, dict]] = {}
        if not cluster.prometheus_url:
            report.errors[cluster.name] = "No Prometheus is configured for this cluster."
        else:
            try:
                with prometheus_for(cluster) as prometheus:
                    for index, period in enumerate(periods):
                        at = min(period.end, now)
                        if at > period.start:
                            measured[index] = _measured_hours(
                                prometheus, config, period, at=at, namespaces=namespaces
                            )
            except PrometheusError as error:
                if strict:
                    raise
                report.errors[cluster.name] = unavailable_message(error)
                measured = {}
        failed = cluster.name in report.errors
        for index, period in enumerate(periods):
            held, used = measured.get(index, ({}, {}))
            for team in teams:
                granted = reports.granted_gpu_hours(
                    [g for g in cluster_grants if g.team_id == team.pk], period, now=now, tz=tz
                )
                held_hours = None if failed else held.get(team.slug, 0.0)
                used_hours = None if failed else used.get(team.slug, 0.0)
                if not (granted or held_hours or used_hours):
                    continue
                report.rows.append(
                    reports.UsageRow(
                        team_slug=team.slug,
                        team_name=team.name,
                        cluster=cluster.name,
                        period=period,
                        granted_gpu_hours=granted,
                        held_gpu_hours=held_hours,
                        used_gpu_hours=used_hours,
                    )
                )
    report.rows.sort(key=lambda r: (r.period.start, r.team_slug, r.cluster))
    return report


# --- alert rules -----------------------------------------------------------------------------

RULE_FORMATS = ("rules", "prometheusrule")


def alert_rules_yaml(*, cluster: Cluster, team: Team | None, format: str) -> str:
    """The LowGPUUsage rule with the cluster's threshold, window, metric and labels, for one
    team's namespace (or every pod holding GPUs when ``team`` is None), as a plain rules file
    or a PrometheusRule object."""
    if format not in RULE_FORMATS:
        raise ValidationError({"format": f"Choose one of {', '.join(RULE_FORMATS)}."})
    namespace = team.slug if team is not None else None
    rule = rules.low_gpu_usage_rule(
        metrics_config(cluster),
        threshold_percent=cluster.idle_utilization_percent,
        window_minutes=cluster.idle_window_minutes,
        namespace=namespace,
    )
    name = f"{settings.PORTAL_NAME}-idle-gpus" + (f"-{team.slug}" if team else "")
    group = rules.rule_group(name, rule)
    if format == "rules":
        return rules.to_yaml(rules.rules_file(group))
    return rules.to_yaml(
        rules.prometheus_rule(
            group,
            name=name,
            namespace=namespace or "monitoring",
            managed_by=settings.PORTAL_NAME,
        )
    )
