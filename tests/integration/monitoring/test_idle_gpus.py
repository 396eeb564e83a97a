"""Idle GPUs on the real simulator: pods annotated to 0% are flagged on their team's page, the
leads hear about it once (portal and e-mail), and a team's policy warns, then stops, an idle
portal Job, never a pod the portal did not create.

The pods run for the whole module: a pod is judged only once it held its GPUs for a whole idle
window (one minute here), so the wait is paid once."""

import datetime
import io
import subprocess
from types import SimpleNamespace

import pytest
import yaml
from django.core import mail
from django.core.management import call_command
from django.utils import timezone
from kubernetes.client.rest import ApiException

from monitoring import idle, promql, tasks
from monitoring.models import IdlePod, IdlePolicy, Notification
from tenants.models import AuditEvent, Membership
from tests import factories

from .pages import member_of, portal_namespace
from .workloads import (
    create_team_namespace,
    delete_namespace,
    eventually,
    gpu_pod,
    patiently,
    portal_job,
    prometheus_has,
    run_pod,
    running_job_pod,
)

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

WINDOW_MINUTES = 1


@pytest.fixture(scope="module")
def workloads(devcluster, core, batch):
    """An unmanaged idle pod and a busy one in one namespace, an idle portal Job in another;
    returned once Prometheus can judge them over the idle window."""
    pods_ns = create_team_namespace(core, "idle")
    job_ns = create_team_namespace(core, "idlejob")
    try:
        run_pod(core, pods_ns, gpu_pod("sleepy", gpus=1, utilisation=0))
        run_pod(core, pods_ns, gpu_pod("busy", gpus=1, utilisation=80))
        patiently(batch.create_namespaced_job, job_ns, portal_job("train-idle", utilisation=3))
        job_pod = running_job_pod(core, job_ns, "train-idle")
        config = promql.MetricsConfig()
        for namespace, count in ((pods_ns, 2), (job_ns, 1)):
            query = promql.pod_average_utilisation(
                config, window_minutes=WINDOW_MINUTES, namespace=namespace
            )
            prometheus_has(devcluster, query, count=count, timeout=180)
        yield SimpleNamespace(pods_ns=pods_ns, job_ns=job_ns, job_pod=job_pod)
    finally:
        delete_namespace(core, pods_ns)
        delete_namespace(core, job_ns)


@pytest.fixture
def cluster(metrics_cluster):
    metrics_cluster.idle_window_minutes = WINDOW_MINUTES
    metrics_cluster.save()
    return metrics_cluster


def team_with_lead(namespace, name, cluster):
    team = factories.TeamFactory(slug=namespace, name=name)
    portal_namespace(team, cluster)
    lead = member_of(team, f"{name.lower()}-lead", Membership.Role.LEAD)
    member = member_of(team, f"{name.lower()}-member")
    return team, lead, member


def check():
    (result,) = tasks.check_idle_gpus()
    return result


def test_an_idle_pod_is_flagged_on_its_page_and_its_lead_notified(
    workloads, cluster, client_as, django_capture_on_commit_callbacks
):
    team, lead, member = team_with_lead(workloads.pods_ns, "Pods", cluster)
    hook = factories.WebhookFactory(team=team, events=["gpus.idle"])

    with django_capture_on_commit_callbacks(execute=True):
        result = check()

    assert result["idle"] == [f"{team.slug}/sleepy"]
    assert result["notified"] == [f"{team.slug}/sleepy"]
    episode = IdlePod.objects.get(team=team)
    assert (episode.pod, episode.gpus, episode.average_utilisation) == ("sleepy", 1, 0)

    (note,) = Notification.objects.filter(team=team)
    assert note.user == lead
    assert note.kind == Notification.Kind.IDLE
    assert "sleepy" in note.subject
    assert not Notification.objects.filter(user=member).exists()
    (email,) = mail.outbox
    assert email.to == [lead.email]
    assert "sleepy" in email.subject
    assert f"/monitoring/teams/{team.slug}/" in email.body
    note.refresh_from_db()
    assert note.emailed_at is not None
    (delivery,) = hook.deliveries.all()  # the team's webhook hears of it too
    assert delivery.event == "gpus.idle"
    assert delivery.payload["data"]["pod"] == "sleepy"
    assert delivery.payload["data"]["gpus"] == 1

    page = client_as(lead).get(f"/monitoring/teams/{team.slug}/")
    assert [p.pod for p in page.context["dashboard"].idle_pods] == ["sleepy"]
    html = page.content.decode()
    assert 'data-testid="pod-sleepy" class="row-idle"' in html
    assert 'data-testid="pod-busy">' in html
    assert 'aria-label="1 unread"' in html
    assert "sleepy" in client_as(lead).get("/monitoring/notifications/").content.decode()


def test_a_pod_still_idle_at_the_next_check_is_not_notified_again(workloads, cluster):
    team, lead, _ = team_with_lead(workloads.pods_ns, "Pods", cluster)
    check()
    second = check()

    assert second["idle"] == [f"{team.slug}/sleepy"]
    assert second["notified"] == []
    assert Notification.objects.filter(user=lead).count() == 1
    assert IdlePod.objects.filter(team=team).count() == 1


def test_the_check_idle_gpus_command_reports_the_idle_pod_and_notifies_once(workloads, cluster):
    team, lead, _ = team_with_lead(workloads.pods_ns, "Pods", cluster)
    runs = []
    for _ in range(2):
        out = io.StringIO()
        call_command("check_idle_gpus", stdout=out)
        runs.append(out.getvalue())

    assert runs == [
        f"devcluster: 1 idle pod(s) ({team.slug}/sleepy), 1 newly notified, 0 stopped\n",
        f"devcluster: 1 idle pod(s) ({team.slug}/sleepy), 0 newly notified, 0 stopped\n",
    ]
    assert Notification.objects.filter(user=lead).count() == 1


def test_an_episode_ends_when_the_pod_is_no_longer_idle(workloads, cluster):
    team, _, _ = team_with_lead(workloads.pods_ns, "Pods", cluster)
    check()

    # A day from now Prometheus has no samples for the pod: it is not idle any more.
    later = timezone.now() + datetime.timedelta(days=1)
    result = idle.idle_check_cluster(cluster=cluster, now=later)

    assert result.recovered == [f"{team.slug}/sleepy"]
    assert IdlePod.objects.get(team=team).ended_at == later


def test_the_api_lists_the_idle_verdict(workloads, cluster, api):
    team, lead, _ = team_with_lead(workloads.pods_ns, "Pods", cluster)
    body = api.as_user(lead).get(f"/api/v1/monitoring/teams/{team.slug}/pods/").json()
    assert {p["pod"]: p["idle"] for p in body["pods"]} == {"busy": False, "sleepy": True}
    busy = next(p for p in body["pods"] if p["pod"] == "busy")
    assert busy["average_utilisation"] == pytest.approx(80)


def test_the_exported_rule_is_valid_and_fires_for_the_idle_pod_only(
    devcluster, workloads, cluster, client_as, tmp_path, promtool
):
    team, lead, _ = team_with_lead(workloads.pods_ns, "Pods", cluster)
    response = client_as(lead).get(
        f"/monitoring/teams/{team.slug}/alert-rules/?cluster={cluster.name}&format=rules"
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    rules_file = tmp_path / "rules.yml"
    rules_file.write_bytes(response.content)
    check_rules = subprocess.run(
        [promtool, "check", "rules", str(rules_file)], capture_output=True, text=True
    )
    assert check_rules.returncode == 0, check_rules.stdout + check_rules.stderr

    (rule,) = yaml.safe_load(response.content)["groups"][0]["rules"]
    firing = devcluster.prometheus_query(rule["expr"])
    assert [s["metric"]["pod"] for s in firing] == ["sleepy"]

    manifest = yaml.safe_load(
        client_as(lead)
        .get(f"/monitoring/teams/{team.slug}/alert-rules/?format=prometheusrule")
        .content
    )
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["spec"]["groups"][0]["rules"] == [rule]


def test_the_policy_never_stops_a_pod_the_portal_did_not_create(workloads, cluster, core):
    team, _, _ = team_with_lead(workloads.pods_ns, "Pods", cluster)
    IdlePolicy.objects.create(team=team, stop_after_minutes=30, warn_minutes_before_stop=10)
    check()
    IdlePod.objects.filter(team=team).update(
        first_idle_at=timezone.now() - datetime.timedelta(hours=2)
    )

    result = check()

    assert result["warned"] == []
    assert result["stopped"] == []
    episode = IdlePod.objects.get(team=team)
    assert "only stops what it created" in episode.stop_error
    assert patiently(core.read_namespaced_pod, "sleepy", team.slug).status.phase == "Running"
    assert not Notification.objects.filter(kind=Notification.Kind.IDLE_WARNING).exists()


def test_the_policy_warns_then_stops_an_idle_portal_job(workloads, cluster, batch, core):
    """Last in the module: it deletes the Job."""
    team, lead, _ = team_with_lead(workloads.job_ns, "Jobs", cluster)
    IdlePolicy.objects.create(team=team, stop_after_minutes=30, warn_minutes_before_stop=10)
    pod = f"{team.slug}/{workloads.job_pod}"

    first = check()
    assert first["idle"] == [pod]
    assert first["warned"] == []  # idle for a minute: far from the 30-minute limit

    IdlePod.objects.filter(team=team).update(
        first_idle_at=timezone.now() - datetime.timedelta(minutes=25)
    )
    warned = check()
    assert warned["warned"] == [pod]
    assert warned["stopped"] == []
    (warning,) = Notification.objects.filter(kind=Notification.Kind.IDLE_WARNING)
    assert warning.user == lead
    assert "will be stopped" in warning.subject

    # Past the limit, but warned only just now: the warning time is given in full.
    IdlePod.objects.filter(team=team).update(
        first_idle_at=timezone.now() - datetime.timedelta(minutes=40)
    )
    assert check()["stopped"] == []

    IdlePod.objects.filter(team=team).update(
        warned_at=timezone.now() - datetime.timedelta(minutes=11)
    )
    stopped = check()

    assert stopped["stopped"] == [pod]
    assert IdlePod.objects.get(team=team).stopped_at is not None
    assert Notification.objects.filter(kind=Notification.Kind.IDLE_STOPPED, user=lead).exists()
    event = AuditEvent.objects.get(action="idle_pod.stopped")
    assert event.after["deleted"] == "Job/train-idle"

    def job_gone():
        try:
            job = patiently(batch.read_namespaced_job, "train-idle", team.slug)
        except ApiException as error:
            return error.status == 404
        return job.metadata.deletion_timestamp is not None

    eventually(job_gone, timeout=30, what="the Job to be deleted")
    assert check()["stopped"] == []  # never twice
