"""Pod Security Admission on team namespaces: baseline enforced (restricted where the cluster
says so), restricted warned and audited; a member with their own credentials cannot run a
privileged or host pod; the portal's own jobs pass restricted."""

import pytest
from kubernetes import client

from clusters.models import PodSecurityLevel
from gpujobs import services as job_services
from gpujobs.models import GpuJob
from gpujobs.specs import JobRequest
from tests.integration.conftest import wait_for

from .conftest import IMAGE, cpu_pod, refusal

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

COMPLETE_AFTER = "devcluster.gpuportal.io/complete-after-seconds"


@pytest.fixture
def team_with_member(iso_cluster, make_team, onboard, core, member):
    team = make_team("psa")
    onboard(team, iso_cluster, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    return team, client.CoreV1Api(member(f"portal:mo-{team.slug}"))


def test_a_team_namespace_enforces_baseline_and_warns_and_audits_at_restricted(
    team_with_member, core
):
    team, _ = team_with_member

    labels = core.read_namespace(team.slug).metadata.labels

    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"


def test_a_member_can_create_an_ordinary_pod(team_with_member):
    team, mo = team_with_member

    created = mo.create_namespaced_pod(team.slug, cpu_pod("ordinary"), dry_run="All")

    assert created.metadata.name == "ordinary"


HOST_POD_SPECS = {
    "privileged": {
        "containers": [{"name": "main", "image": IMAGE, "securityContext": {"privileged": True}}]
    },
    "hostPath": {
        "containers": [
            {
                "name": "main",
                "image": IMAGE,
                "volumeMounts": [{"name": "root", "mountPath": "/host"}],
            }
        ],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    },
    "hostNetwork": {"hostNetwork": True},
    "hostPID": {"hostPID": True},
}


@pytest.mark.parametrize("what", sorted(HOST_POD_SPECS))
def test_a_member_cannot_create_a_privileged_or_host_pod(team_with_member, what):
    team, mo = team_with_member
    pod = cpu_pod(f"sneaky-{what.lower()}")
    pod["spec"].update(HOST_POD_SPECS[what])

    status, message = refusal(mo.create_namespaced_pod, team.slug, pod)

    assert status == 403
    assert 'violates PodSecurity "baseline:latest"' in message


def test_a_restricted_cluster_runs_the_portals_job_and_refuses_a_root_pod(
    iso_cluster, make_team, onboard, core, member
):
    iso_cluster.pod_security_level = PodSecurityLevel.RESTRICTED
    iso_cluster.save()
    team = make_team("restricted")
    users = onboard(team, iso_cluster, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    assert (
        core.read_namespace(team.slug).metadata.labels["pod-security.kubernetes.io/enforce"]
        == "restricted"
    )

    # The portal's job, with a CPU container beside its GPU one (which hides the node's GPUs
    # with NVIDIA_VISIBLE_DEVICES=void, as the admission policy allows).
    request = JobRequest.parse(
        {
            "name": "restricted-run",
            "image": IMAGE,
            "gpus": 1,
            "preprocess": {"image": "registry.example.com/ml/cleaner:1", "mode": "beside"},
            "annotations": {COMPLETE_AFTER: "600"},
        }
    )
    job = job_services.job_submit(
        user=users[f"mo-{team.slug}"], team=team, cluster=iso_cluster, job_request=request
    )

    def running_pod():
        pods = core.list_namespaced_pod(team.slug, label_selector=f"gpuportal.io/job-id={job.pk}")
        running = [p for p in pods.items if p.status.phase in ("Running", "Succeeded")]
        return running[0] if running else None

    pod = wait_for(running_pod, timeout=90, what="the portal's job's pod to run")
    assert pod.spec.security_context.run_as_non_root is True
    assert GpuJob.objects.get(pk=job.pk).state != GpuJob.State.FAILED

    mo = client.CoreV1Api(member(f"portal:mo-{team.slug}"))
    status, message = refusal(mo.create_namespaced_pod, team.slug, cpu_pod("as-root"))
    assert status == 403
    assert 'violates PodSecurity "restricted:latest"' in message
