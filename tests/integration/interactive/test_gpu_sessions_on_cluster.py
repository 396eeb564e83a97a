"""GPU sessions on the devcluster's kwok GPU nodes, end to end with the real worker and watcher:
started through the API on a Kueue cluster, the cluster holds the member's home claim, the
token Secret and a Job in the team's guaranteed queue that Kueue admits onto a GPU node of the
chosen model; stopping deletes the run and keeps the claim; resuming makes the next run. Under
quota only, a session whose GPUs the DCGM simulator reports idle is stopped as idle.

The home claims are bound by the devcluster's local-path provisioner (the ``storage`` fixture:
the cluster's default StorageClass), which finishes at once for a pod on a kwok node."""

import datetime

import pytest
from django.utils import timezone

from clusters.vocabulary import KUEUE_QUEUE_LABEL, SESSION_ID_LABEL
from devcluster.dcgm_metrics import UTILISATION_ANNOTATION
from interactive import culling
from interactive.models import InteractiveSession
from monitoring.idle import idle_check
from monitoring.models import IdlePod, IdlePolicy
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import api_client_for
from tests.integration.gpujobs.kueue import A100

pytestmark = [pytest.mark.devcluster]

State = InteractiveSession.State


def session_in(state: str, session_id: int, *, timeout: float = 120) -> InteractiveSession:
    wait_for(
        lambda: InteractiveSession.objects.filter(pk=session_id, state=state).exists(),
        timeout=timeout,
        what=f"session #{session_id} {state}",
    )
    return InteractiveSession.objects.get(pk=session_id)


def test_a_gpu_session_waits_in_the_guaranteed_queue_lands_on_a_gpu_node_and_resumes(
    storage, make_kueue_team, running_services, batch, core, kueue_cluster
):
    cluster = kueue_cluster.cluster
    cluster.allowed_registries = ["registry.example.com"]
    cluster.save(update_fields=["allowed_registries"])
    team = make_kueue_team({A100: 2}, name="notebooks")
    api = api_client_for(team.member)

    answer = api.post(
        "/api/v1/sessions/",
        {
            "team": team.team.slug,
            "cluster": cluster.name,
            "name": "explore",
            "image": "registry.example.com/ml/notebook:1",
            "gpus": 1,
            "gpu_model": A100,
            "home_gib": 5,
        },
    )
    assert answer.status_code == 201, answer.content
    assert "token" not in answer.json()
    session = session_in(State.RUNNING, answer.json()["id"])
    namespace = team.namespace

    job = batch.read_namespaced_job(f"session-{session.pk}-1", namespace)
    assert job.metadata.labels[KUEUE_QUEUE_LABEL] == "guaranteed"
    assert job.spec.suspend is False  # admitted by Kueue
    pod_spec = job.spec.template.spec
    assert pod_spec.tolerations[0].key == cluster.gpu_taint_key
    terms = pod_spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    keys = {e.key: e.values for e in terms.node_selector_terms[0].match_expressions}
    assert keys["hardware-type"] == ["gpu"]
    assert keys["nvidia.com/gpu.product"] == [A100]
    assert pod_spec.volumes[0].persistent_volume_claim.claim_name == f"home-{team.member.pk}"
    claim = core.read_namespaced_persistent_volume_claim(f"home-{team.member.pk}", namespace)
    assert claim.spec.resources.requests["storage"] == "5Gi"
    secret = core.read_namespaced_secret(f"session-{session.pk}-token", namespace)
    assert secret.metadata.labels[SESSION_ID_LABEL] == str(session.pk)
    (pod,) = core.list_namespaced_pod(
        namespace, label_selector=f"{SESSION_ID_LABEL}={session.pk}"
    ).items
    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels["nvidia.com/gpu.product"] == A100
    assert session.node == pod.spec.node_name
    assert session.server_address.endswith(":8888")

    # Another team's member does not see it; a teammate cannot stop it, the owner can.
    assert (
        api_client_for(team.viewer).post(f"/api/v1/sessions/{session.pk}/stop/").status_code == 403
    )
    stopped = api.post(f"/api/v1/sessions/{session.pk}/stop/")
    assert stopped.status_code == 200
    assert stopped.json()["state"] == State.STOPPED
    wait_for(
        lambda: (
            not core.list_namespaced_pod(
                namespace, label_selector=f"{SESSION_ID_LABEL}={session.pk}"
            ).items
        ),
        timeout=60,
        what="the stopped run's pod gone",
    )
    core.read_namespaced_persistent_volume_claim(f"home-{team.member.pk}", namespace)
    assert api.post(f"/api/v1/sessions/{session.pk}/stop/").status_code == 409

    resumed = api.post(f"/api/v1/sessions/{session.pk}/resume/")
    assert resumed.status_code == 200, resumed.content
    session = session_in(State.RUNNING, session.pk)
    assert session.run == 2
    batch.read_namespaced_job(f"session-{session.pk}-2", namespace)


def test_a_gpu_session_idle_by_dcgm_is_stopped_through_the_portal_and_keeps_its_volume(
    storage, make_gpu_team, running_services, gpu_cluster, core, devcluster
):
    """On the kwok nodes there is no notebook server to ask, so the GPUs alone decide: the
    simulator reports the idle session's GPU at 0% and the busy one's at 90% (the devcluster's
    utilisation annotation on their pods), Prometheus judges them over the cluster's idle window,
    and the team's idle-pod policy stops the idle one through the session (its home volume
    kept), never the busy one."""
    gpu_cluster.idle_window_minutes = 1
    gpu_cluster.save(update_fields=["idle_window_minutes"])
    team = make_gpu_team(gpus=2, name="idlenb")
    api = api_client_for(team.member)
    made = {}
    for name in ("idle", "busy"):
        answer = api.post(
            "/api/v1/sessions/",
            {"team": team.team.slug, "cluster": gpu_cluster.name, "name": name, "gpus": 1},
        )
        assert answer.status_code == 201, answer.content
        made[name] = session_in(State.RUNNING, answer.json()["id"])
    for name, utilisation in (("idle", "0"), ("busy", "90")):
        (pod,) = core.list_namespaced_pod(
            team.namespace, label_selector=f"{SESSION_ID_LABEL}={made[name].pk}"
        ).items
        core.patch_namespaced_pod(
            pod.metadata.name,
            team.namespace,
            {"metadata": {"annotations": {UTILISATION_ANNOTATION: utilisation}}},
        )

    def judged():
        idleness = culling.gpu_idleness(gpu_cluster)
        if idleness is None:
            return None
        return culling.gpus_idle(made["idle"], idleness) and not culling.gpus_idle(
            made["busy"], idleness
        )

    wait_for(judged, timeout=240, interval=2, what="DCGM's verdict: one session idle, one busy")

    IdlePolicy.objects.create(team=team.team, stop_after_minutes=30, warn_minutes_before_stop=10)
    idle_check()  # opens the idle session's episode
    IdlePod.objects.filter(team=team.team).update(
        first_idle_at=timezone.now() - datetime.timedelta(minutes=40),
        warned_at=timezone.now() - datetime.timedelta(minutes=11),
    )
    stopped = [pod for result in idle_check() for pod in result.stopped]
    assert len(stopped) == 1
    assert stopped[0].startswith(f"{team.namespace}/session-{made['idle'].pk}-1-")

    idle_session = InteractiveSession.objects.get(pk=made["idle"].pk)
    assert (idle_session.state, idle_session.stop_reason) == (State.STOPPED, "idle")
    assert InteractiveSession.objects.get(pk=made["busy"].pk).state == State.RUNNING
    core.read_namespaced_persistent_volume_claim(f"home-{team.member.pk}", team.namespace)
