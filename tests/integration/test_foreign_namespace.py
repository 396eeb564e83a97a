"""A namespace of a team's name that someone else made is never touched as the team's: the
reconcile records it as someone else's, a job is refused (and the worker, even on a stale record,
creates no Job there), the team's monitoring shows nothing from it, and the idle policy neither
flags nor stops what runs there, a Job carrying the portal's label included.

On the devcluster, someone else (the admin) has made the namespace and runs an idle Job in it
that carries the portal's managed-by label; the portal acts with deploy/rbac.yaml's identity.
Where the portal relies on what the reconcile recorded, each test also shows what a stale record
(one that still says the namespace is the portal's) would let through, or that the live check
stops it, so that it can fail.
"""

import datetime
from types import SimpleNamespace

import pytest
from django.utils import timezone

from gpujobs import cluster_jobs
from gpujobs import tasks as job_tasks
from gpujobs.models import GpuJob
from monitoring import idle, promql
from monitoring.models import IdlePod, IdlePolicy
from reconcile import team_pass
from reconcile.namespaces import NamespaceNotOwned
from tenants.models import Membership, TeamCluster
from tests import factories
from tests.integration.monitoring.pages import chart_values, member_of
from tests.integration.monitoring.workloads import (
    create_namespace,
    delete_namespace,
    delete_series,
    eventually,
    patiently,
    portal_job,
    prometheus_has,
    running_job_pod,
)
from tests.integration.portal_identity import mint_portal_identity

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

WINDOW_MINUTES = 1
REFUSED = "was not created by the portal for team"


@pytest.fixture(scope="module")
def foreign(devcluster, core, batch):
    """The namespace someone else made, with their idle Job labelled as the portal's; returned
    once Prometheus can judge its pod over the idle window."""
    namespace = create_namespace(core, "foreign")
    patiently(core.patch_namespace, namespace, {"metadata": {"labels": {"owner": "data-eng"}}})
    try:
        patiently(batch.create_namespaced_job, namespace, portal_job("theirs", utilisation=2))
        pod = running_job_pod(core, namespace, "theirs")
        judged = promql.pod_average_utilisation(
            promql.MetricsConfig(), window_minutes=WINDOW_MINUTES, namespace=namespace
        )
        prometheus_has(devcluster, judged, timeout=180)
        yield SimpleNamespace(namespace=namespace, pod=pod)
    finally:
        delete_namespace(core, namespace)
        delete_series(devcluster, f'{{namespace="{namespace}"}}')


@pytest.fixture(scope="module")
def portal_kubeconfig(devcluster, k8s):
    return mint_portal_identity(devcluster, k8s, user="gpu-portal-foreign-namespace-tests")


@pytest.fixture
def cluster(postgres_database, db, devcluster, portal_kubeconfig, settings):
    settings.MONITORING_CACHE_SECONDS = 0
    cluster = factories.ClusterFactory(
        name="devcluster",
        kubeconfig_path=str(portal_kubeconfig),
        prometheus_url=devcluster.prometheus_url,
        idle_window_minutes=WINDOW_MINUTES,
    )
    factories.GpuCapacityFactory(cluster=cluster, allocatable=32)
    return cluster


@pytest.fixture
def team(foreign, cluster):
    """The team of the namespace's name, granted GPUs there; the reconcile found the namespace
    someone else's (run here, as the worker runs it)."""
    team = factories.TeamFactory(slug=foreign.namespace, name="Latecomers")
    factories.QuotaGrantFactory(request__team=team, request__cluster=cluster, request__gpus=2)
    with pytest.raises(NamespaceNotOwned):
        team_pass.reconcile_team_on_cluster(team_id=team.pk, cluster_id=cluster.pk)
    return team


@pytest.fixture
def lead(team):
    return member_of(team, "lia-lead", Membership.Role.LEAD)


@pytest.fixture
def member(team):
    return member_of(team, "max-member")


def believe_it_is_the_portals(team, cluster):
    """A stale record: as if the namespace had been the portal's at the last reconcile and was
    replaced by someone else's since."""
    TeamCluster.objects.filter(team=team, cluster=cluster).update(namespace_owned=True)


def test_the_reconcile_records_the_namespace_as_someone_elses(team, cluster, lead, api, core):
    state = TeamCluster.objects.get(team=team, cluster=cluster)

    assert (state.status, state.namespace_owned) == (TeamCluster.Status.ERROR, False)
    assert REFUSED in state.last_error
    (shown,) = api.as_user(lead).get(f"/api/v1/teams/{team.slug}/clusters/").json()["results"]
    assert shown["namespace_owned"] is False
    assert core.read_namespace(team.slug).metadata.labels["owner"] == "data-eng"


def test_a_job_for_the_team_is_refused_naming_the_cluster(team, cluster, member, api):
    response = api.as_user(member).post(
        "/api/v1/jobs/",
        {
            "team": team.slug,
            "cluster": cluster.name,
            "name": "train",
            "image": "registry.example.com/ml/trainer:1.0",
            "gpus": 1,
        },
    )

    assert response.status_code == 400, response.json()
    assert REFUSED in response.json()["cluster"][0]
    assert not GpuJob.objects.exists()


def test_the_worker_creates_no_job_there_even_on_a_stale_record(team, cluster, member, batch):
    believe_it_is_the_portals(team, cluster)
    job = GpuJob.objects.create(
        team=team,
        cluster=cluster,
        submitted_by=member,
        name="train",
        image="registry.example.com/ml/trainer:1",
        gpus=1,
        max_runtime_seconds=600,
    )

    outcome = cluster_jobs.job_create_on_cluster(job_id=job.pk)

    assert outcome.startswith("failed")
    job.refresh_from_db()
    assert (job.state, job.reason) == ("failed", "SubmitFailed")
    assert REFUSED in job.message
    created = batch.list_namespaced_job(team.slug, label_selector=f"gpuportal.io/job-id={job.pk}")
    assert created.items == []


def test_a_share_of_a_batch_creates_no_job_there_even_on_a_stale_record(
    team, cluster, member, batch
):
    believe_it_is_the_portals(team, cluster)
    jobs = [
        GpuJob.objects.create(
            team=team,
            cluster=cluster,
            submitted_by=member,
            name=f"sweep-{i}",
            image="registry.example.com/ml/trainer:1",
            gpus=1,
            max_runtime_seconds=600,
        )
        for i in range(2)
    ]

    outcomes = job_tasks.submit_jobs(job_ids=[job.pk for job in jobs])

    assert all(outcome.startswith("failed") for outcome in outcomes.values()), outcomes
    for job in jobs:
        job.refresh_from_db()
        assert (job.state, job.reason) == ("failed", "SubmitFailed")
        assert REFUSED in job.message
        mine = f"gpuportal.io/job-id={job.pk}"
        assert batch.list_namespaced_job(team.slug, label_selector=mine).items == []


def test_the_teams_monitoring_shows_nothing_from_it(team, cluster, lead, client_as, api, foreign):
    page = client_as(lead)
    team_page = f"/monitoring/teams/{team.slug}/?window=1h&cluster={cluster.name}"

    response = page.get(team_page)
    pod_page = page.get(f"/monitoring/teams/{team.slug}/pods/{foreign.pod}/?cluster=devcluster")
    answers = [
        api.as_user(lead).get(f"/api/v1/monitoring/teams/{team.slug}/{what}/?cluster=devcluster")
        for what in ("utilisation", "pods")
    ]

    assert response.status_code == 200
    assert 'data-testid="namespace-refused"' in response.content.decode()
    assert REFUSED in response.context["dashboard"].refused
    assert response.context["dashboard"].charts == []
    assert 'data-testid="namespace-refused"' in pod_page.content.decode()
    for answer in answers:
        assert answer.status_code == 409
        assert REFUSED in answer.json()["detail"]

    # What the record guards: believed the portal's, their pod would be charted as the team's.
    believe_it_is_the_portals(team, cluster)
    eventually(
        lambda: foreign.pod in chart_values(page.get(team_page), "utilisation"),
        what="their pod charted once the namespace is believed the team's",
    )


def test_the_idle_policy_neither_flags_nor_stops_anything_there(
    team, cluster, lead, batch, foreign
):
    IdlePolicy.objects.create(team=team, stop_after_minutes=30, warn_minutes_before_stop=10)
    pod = f"{team.slug}/{foreign.pod}"

    assert idle.idle_check_cluster(cluster=cluster).idle == []
    assert not IdlePod.objects.exists()

    # On a stale record the pod is flagged, but read again before any warning or stop, the
    # namespace is found someone else's: their Job (labelled as the portal's) is left alone.
    believe_it_is_the_portals(team, cluster)
    assert idle.idle_check_cluster(cluster=cluster).idle == [pod]
    IdlePod.objects.update(first_idle_at=timezone.now() - datetime.timedelta(hours=2))

    result = idle.idle_check_cluster(cluster=cluster)

    assert (result.warned, result.stopped) == ([], [])
    episode = IdlePod.objects.get()
    assert REFUSED in episode.stop_error
    assert (episode.warned_at, episode.stopped_at) == (None, None)
    theirs = batch.read_namespaced_job("theirs", team.slug)
    assert theirs.metadata.deletion_timestamp is None
