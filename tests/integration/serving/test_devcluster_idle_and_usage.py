"""An idle service on the devcluster's DCGM simulator and Prometheus: its replica's GPUs are
reported to the team's lead like any pod's; the team's idle policy stops it (scaled to zero,
through the portal) only when it says services are stopped too; and the GPU-hours its replicas
held count in the team's usage, from the same DCGM series as jobs'.

The idle window is one minute here: a pod is judged only once it held its GPUs that long, so
the test waits for that once and then moves the episode's times, as the monitoring tests do."""

import datetime

import pytest
from django.utils import timezone

from monitoring import idle, promql, usage
from monitoring.models import IdlePod, IdlePolicy, Notification
from serving.models import InferenceService
from tests.integration.monitoring.workloads import prometheus_has
from tests.integration.serving.cluster import deploy, wait_for_deployments, wait_for_ready

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

UTILISATION = "devcluster.gpuportal.io/gpu-util"
WINDOW_MINUTES = 1


@pytest.fixture(autouse=True)
def _services(running_services, gateway_api, settings):
    settings.MONITORING_CACHE_SECONDS = 0
    settings.MONITORING_USAGE_RESOLUTION_SECONDS = 5


def check(cluster):
    return idle.idle_check_cluster(cluster=cluster)


def back(team, **times):
    IdlePod.objects.filter(team=team).update(
        **{field: timezone.now() - delta for field, delta in times.items()}
    )


def test_an_idle_service_is_reported_and_stopped_only_when_the_policy_says_so(
    make_gpu_team, gpu_cluster, devcluster, apps
):
    gpu_cluster.idle_window_minutes = WINDOW_MINUTES
    gpu_cluster.save()
    gpu = make_gpu_team(gpus=1)
    started = timezone.now()
    service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=1, annotations={UTILISATION: "0"})
    (pod,) = wait_for_ready(service, 1, 1).pods
    query = promql.pod_average_utilisation(
        promql.MetricsConfig(), window_minutes=WINDOW_MINUTES, namespace=gpu.namespace
    )
    prometheus_has(devcluster, query, timeout=180)
    name = f"{gpu.namespace}/{pod}"

    # Reported to the lead, as any idle pod is.
    first = check(gpu_cluster)
    assert (first.idle, first.notified) == ([name], [name])
    (note,) = Notification.objects.filter(team=gpu.team, kind=Notification.Kind.IDLE)
    assert note.user == gpu.lead
    assert pod in note.subject

    # A stop policy that does not cover services leaves it running, and says why.
    policy = IdlePolicy.objects.create(
        team=gpu.team, stop_after_minutes=30, warn_minutes_before_stop=10
    )
    back(gpu.team, first_idle_at=datetime.timedelta(hours=2))
    second = check(gpu_cluster)
    assert (second.warned, second.stopped) == ([], [])
    assert "does not stop services" in IdlePod.objects.get(team=gpu.team).stop_error
    assert InferenceService.objects.get(pk=service.pk).state == "active"

    # GPU-hours held by the service's replica count in the team's usage.
    report = usage.usage_report(user=gpu.lead, start=started, end=timezone.now(), strict=True)
    (row,) = [r for r in report.rows if r.team_slug == gpu.namespace]
    assert row.held_gpu_hours > 0
    assert row.used_gpu_hours == 0

    # The lead lets the policy stop services: warned first, then stopped (scaled to zero).
    policy.stop_services = True
    policy.save()
    IdlePod.objects.filter(team=gpu.team).update(stop_error="")
    back(gpu.team, first_idle_at=datetime.timedelta(minutes=25))
    assert check(gpu_cluster).warned == [name]
    back(gpu.team, first_idle_at=datetime.timedelta(minutes=40))
    back(gpu.team, warned_at=datetime.timedelta(minutes=11))

    stopped = check(gpu_cluster)

    assert stopped.stopped == [name]
    assert InferenceService.objects.get(pk=service.pk).state == "stopped"
    assert Notification.objects.filter(kind=Notification.Kind.IDLE_STOPPED, user=gpu.lead).exists()
    wait_for_deployments(apps, service, {"llm-r1": 0})
