"""Events are anyone's to write: a member may create Events in their team's namespace (the
``edit`` role allows it), and a new-style Event (with ``eventTime``) may name an involved object in
another namespace. Such an Event never changes a job: team A's job, refused by the quota, keeps
its state, reason and message when a member of team B, with their own minted credentials, writes
a later FailedCreate Event about it, and when an Event in team A's namespace names no uid or
another Job's (an older Job of the same name, say).

Both the watcher (running) and the periodic resync (called here, so that the test knows the
forged Event was considered) see the Events: the Job-event list holds them.
"""

import datetime
import uuid

import pytest
from kubernetes import client, config

from clusters.workloads import WorkloadClient
from gpujobs import manifests
from gpujobs.models import GpuJob
from gpujobs.tracker import object_selectors, resync_cluster
from tests.integration.gpujobs.fixtures import api_client_for, submit, wait_for_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

FORGED_MESSAGE = "Error creating: forged by another team"


def in_an_hour(micro: bool = False) -> str:
    # Later than every Event the job controller writes meanwhile: the newest FailedCreate Event
    # is the one a job's reason would come from.
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    return later.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def failed_create(*, namespace: str, job: GpuJob, uid: str, job_namespace: str) -> dict:
    """A FailedCreate Event in ``namespace`` about the job's Job in ``job_namespace``, dated
    after the job controller's own; new-style (``eventTime``), which the API server lets point
    at an object in another namespace."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"forged-{uuid.uuid4().hex[:8]}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": manifests.job_name(job.pk),
            "namespace": job_namespace,
            "uid": uid,
        },
        "reason": "FailedCreate",
        "message": FORGED_MESSAGE,
        "type": "Warning",
        "eventTime": in_an_hour(micro=True),
        "lastTimestamp": in_an_hour(),
        "reportingComponent": "job-controller",
        "reportingInstance": "forger",
        "action": "Create",
    }


@pytest.fixture
def events_as(devcluster, gpu_cluster):
    """``events_as(user)``: a CoreV1Api with the user's own minted cluster credentials."""
    made = []

    def make(user) -> client.CoreV1Api:
        kubeconfig = devcluster.mint(f"{gpu_cluster.user_prefix}{user.username}")
        api = config.new_client_from_config(config_file=str(kubeconfig))
        made.append(api)
        return client.CoreV1Api(api)

    yield make
    for api in made:
        api.close()


@pytest.fixture
def refused_job(running_services, make_gpu_team, gpu_cluster):
    """Team A's job that the cluster's quota refuses (the grant says 2, the quota was shrunk to
    1): no pod, so the job's Events decide its reason."""
    team_a = make_gpu_team(gpus=2, name="a", quota=1)
    job_id = submit(team_a.member, team_a.team, gpu_cluster, gpus=2).data["id"]
    job = wait_for_job(job_id, lambda j: j.reason == "ExceededQuota", what="the quota refusal")
    yield team_a, job
    api_client_for(team_a.member).post(f"/api/v1/jobs/{job_id}/cancel/")


def assert_still_refused_by_the_quota(job: GpuJob) -> None:
    """The job's row says what the job controller says (its own Events come again as it
    retries, each naming a new pod), never what the forged Event says."""
    job.refresh_from_db()
    assert (job.state, job.reason) == ("pending", "ExceededQuota")
    assert FORGED_MESSAGE not in job.message
    assert "exceeded quota" in job.message


def job_events_listed(cluster) -> list[dict]:
    """The Job Events the watcher and the resync see."""
    kube = WorkloadClient.for_cluster(cluster)
    return kube.list_objects("Event", **object_selectors("Event")).items


def test_an_event_team_b_writes_about_team_as_job_changes_nothing(
    refused_job, make_gpu_team, gpu_cluster, events_as
):
    team_a, job = refused_job
    team_b = make_gpu_team(gpus=1, name="b")
    forged = failed_create(
        namespace=team_b.namespace, job=job, uid=job.kube_uid, job_namespace=team_a.namespace
    )

    events_as(team_b.member).create_namespaced_event(team_b.namespace, forged)
    resync_cluster(gpu_cluster)

    names = {e["metadata"]["name"] for e in job_events_listed(gpu_cluster)}
    assert forged["metadata"]["name"] in names  # considered, and ignored
    assert_still_refused_by_the_quota(job)


@pytest.mark.parametrize("uid", ["", str(uuid.uuid4())], ids=["no uid", "another Job's uid"])
def test_an_event_that_does_not_name_the_jobs_uid_changes_nothing(
    refused_job, gpu_cluster, events_as, uid
):
    team_a, job = refused_job
    forged = failed_create(
        namespace=team_a.namespace, job=job, uid=uid, job_namespace=team_a.namespace
    )

    events_as(team_a.member).create_namespaced_event(team_a.namespace, forged)
    resync_cluster(gpu_cluster)

    names = {e["metadata"]["name"] for e in job_events_listed(gpu_cluster)}
    assert forged["metadata"]["name"] in names
    assert_still_refused_by_the_quota(job)
