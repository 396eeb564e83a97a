"""The pages read what the watcher last read of Kueue's queues: the cluster page shows the
cohort's usage per team (own, borrowed, lent, idle), the team page its GPUs borrowed and lent
and its waiting jobs, and a waiting job's page why it waits and where it stands. Database only:
the snapshot is written as the watcher writes it."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.models import QuotaMode
from gpujobs import queue_reads
from gpujobs.models import GpuJob
from gpujobs.queues import gpu_pod_holding, record_snapshot, snapshot_fields
from tests import factories
from workloads.pod_states import Reason

pytestmark = pytest.mark.django_db

A100 = "NVIDIA-A100-SXM4-80GB"
FLAVOR = "gpu-portal-nvidia-a100-sxm4-80gb"


def cluster_queue(name, slug, *, nominal, used=0, borrowed=0, pending=0, borrowing_limit=None):
    resource = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if borrowing_limit is not None:
        resource["borrowingLimit"] = borrowing_limit
    return {
        "metadata": {"name": name},
        "spec": {
            "cohortName": "gpu-portal",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": slug}},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": FLAVOR, "resources": [resource]}],
                }
            ],
        },
        "status": {
            "pendingWorkloads": pending,
            "flavorsReservation": [
                {
                    "name": FLAVOR,
                    "resources": [
                        {"name": "nvidia.com/gpu", "total": str(used), "borrowed": str(borrowed)}
                    ],
                }
            ],
        },
    }


def pending_workload(job, name: str, *, position: int) -> dict:
    """The job's Workload as the watcher's snapshot lists it pending in its team's guaranteed
    queue, at ``position`` in both its queues."""
    return {
        "metadata": {
            "name": name,
            "namespace": job.team.slug,
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "ownerReferences": [{"kind": "Job", "name": f"gpujob-{job.pk}"}],
        },
        "priority": 1000,
        "localQueueName": "guaranteed",
        "positionInClusterQueue": position,
        "positionInLocalQueue": position,
    }


@pytest.fixture
def queues(cluster, team, other_team):
    """vision owns 4 A100 and lends 2 of them to speech's opportunistic job; one of vision's
    guaranteed jobs (#waiting) waits behind nothing."""
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.save()
    job = factories.GpuJobFactory(
        team=team,
        cluster=cluster,
        name="waits",
        gpus=3,
        gpu_model=A100,
        state=GpuJob.State.PENDING,
        reason=Reason.IN_QUEUE,
        queue_name="guaranteed",
    )
    pending = pending_workload(job, "w", position=0)
    fields = snapshot_fields(
        cluster_queues=[
            cluster_queue("gpu-portal-vision", "vision", nominal=4, used=2, pending=1),
            cluster_queue("gpu-portal-vision-opportunistic", "vision", nominal=0),
            cluster_queue("gpu-portal-speech", "speech", nominal=0),
            cluster_queue(
                "gpu-portal-speech-opportunistic",
                "speech",
                nominal=0,
                used=2,
                borrowed=2,
                borrowing_limit=4,
            ),
        ],
        resource_flavors=[
            {"metadata": {"name": FLAVOR}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": A100}}}
        ],
        pending={"gpu-portal-vision": [pending]},
        portal_name="gpu-portal",
        gpu_model_label="nvidia.com/gpu.product",
    )
    record_snapshot(cluster.pk, fields, now=timezone.now())
    return job


def test_the_cluster_page_shows_the_cohorts_usage_per_team(client_as, admin, cluster, queues):
    html = client_as(admin).get(f"/monitoring/clusters/{cluster.name}/").content.decode()

    assert 'data-testid="cohort-usage"' in html
    vision = html.split('data-team="vision"')[1].split("</tr>")[0]
    speech = html.split('data-team="speech"')[1].split("</tr>")[0]
    assert '<td class="num" data-testid="cohort-lent">2</td>' in vision
    assert '<td class="num" data-testid="cohort-idle">0</td>' in vision
    assert '<td class="num" data-testid="cohort-borrowed">2</td>' in speech
    assert html.count('data-testid="cohort-usage"') == 1


H100 = "NVIDIA-H100-80GB-HBM3"
H100_FLAVOR = "gpu-portal-nvidia-h100-80gb-hbm3"


def queue_of_flavors(name, slug, flavors: dict[str, dict]) -> dict:
    """A ClusterQueue of the gpu-portal cohort with, per flavor, ``nominal`` (default 0),
    ``used``, ``borrowed`` and the optional ``borrowing_limit``."""
    resources, reservations = [], []
    for flavor, figures in flavors.items():
        resource = {"name": "nvidia.com/gpu", "nominalQuota": figures.get("nominal", 0)}
        if "borrowing_limit" in figures:
            resource["borrowingLimit"] = figures["borrowing_limit"]
        resources.append({"name": flavor, "resources": [resource]})
        used, borrowed = figures.get("used", 0), figures.get("borrowed", 0)
        reservations.append(
            {
                "name": flavor,
                "resources": [
                    {"name": "nvidia.com/gpu", "total": str(used), "borrowed": str(borrowed)}
                ],
            }
        )
    return {
        "metadata": {"name": name},
        "spec": {
            "cohortName": "gpu-portal",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": slug}},
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": resources}],
        },
        "status": {"flavorsReservation": reservations},
    }


@pytest.fixture
def crowded_cohort(cluster):
    """Two GPU models and four teams: vision owns A100s and H100s, speech borrows A100s, nlp
    may borrow 3 of each model but holds nothing, audio has neither quota nor use."""
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.save()
    nothing = {FLAVOR: {}, H100_FLAVOR: {}}
    fields = snapshot_fields(
        cluster_queues=[
            queue_of_flavors(
                "gpu-portal-vision",
                "vision",
                {FLAVOR: {"nominal": 4, "used": 2}, H100_FLAVOR: {"nominal": 2}},
            ),
            queue_of_flavors("gpu-portal-vision-opportunistic", "vision", nothing),
            queue_of_flavors("gpu-portal-speech", "speech", nothing),
            queue_of_flavors(
                "gpu-portal-speech-opportunistic",
                "speech",
                {FLAVOR: {"used": 2, "borrowed": 2}, H100_FLAVOR: {}},
            ),
            queue_of_flavors("gpu-portal-nlp", "nlp", nothing),
            queue_of_flavors(
                "gpu-portal-nlp-opportunistic",
                "nlp",
                {FLAVOR: {"borrowing_limit": 3}, H100_FLAVOR: {"borrowing_limit": 3}},
            ),
            queue_of_flavors("gpu-portal-audio", "audio", nothing),
            queue_of_flavors("gpu-portal-audio-opportunistic", "audio", nothing),
        ],
        resource_flavors=[
            {"metadata": {"name": f}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": m}}}
            for f, m in ((FLAVOR, A100), (H100_FLAVOR, H100))
        ],
        pending={},
        portal_name="gpu-portal",
        gpu_model_label="nvidia.com/gpu.product",
    )
    record_snapshot(cluster.pk, fields, now=timezone.now())


def cohort_groups(html: str) -> dict[str, list[str]]:
    """The cohort table's teams, in order, each with the GPU models listed under it."""
    table = html.split('data-testid="cohort-table"')[1].split("</table>")[0]
    return {
        group.split('"', 1)[0]: re.findall(r'<td data-testid="cohort-model">([^<]*)</td>', group)
        for group in table.split('<tbody data-team="')[1:]
    }


@pytest.mark.usefixtures("crowded_cohort")
def test_the_cohort_usage_lists_only_rows_with_quota_or_use_by_team(client_as, admin, cluster):
    html = client_as(admin).get(f"/monitoring/clusters/{cluster.name}/").content.decode()

    assert cohort_groups(html) == {"nlp": [A100, H100], "speech": [A100], "vision": [A100, H100]}
    vision = html.split('<tbody data-team="vision">')[1].split("</tbody>")[0]
    assert vision.count('data-testid="cohort-team"') == 1
    assert '<th scope="rowgroup" rowspan="2" data-testid="cohort-team">vision</th>' in vision
    assert 'data-team="audio"' not in html
    quiet = html.split('data-testid="cohort-teams-without-quota-or-use"')[1].split("</details>")[0]
    assert "1 team with a queue here has neither quota nor use on this cluster" in quiet
    assert "<code>audio</code>" in quiet


def test_the_cohort_usage_read_counts_the_teams_it_leaves_out(cluster, crowded_cohort):
    usage = queue_reads.cohort_usage(cluster)

    assert [group.team for group in usage.cohorts["gpu-portal"]] == ["nlp", "speech", "vision"]
    assert [(r.gpu_model, r.own) for r in usage.cohorts["gpu-portal"][2].rows] == [
        (A100, 4),
        (H100, 2),
    ]
    assert usage.teams_without_quota_or_use == ("audio",)


def bound_gpu_pod(namespace: str, name: str, *, gpus: int) -> dict:
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}"},
        "spec": {
            "nodeName": "gpu-node-1",
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {"phase": "Running"},
    }


@pytest.fixture
def held_by_hand(cluster, team):
    """vision's namespace holds 3 GPUs by two pods made by hand before the switch to Kueue
    mode, beside its queued job's pod, which Kueue admitted."""
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.save()
    factories.TeamClusterFactory(team=team, cluster=cluster)
    pods = [
        bound_gpu_pod("vision", "notebook-by-hand", gpus=1),
        bound_gpu_pod("vision", "train-by-hand", gpus=2),
        bound_gpu_pod("vision", "queued", gpus=4),
    ]
    fields = snapshot_fields(
        cluster_queues=[cluster_queue("gpu-portal-vision", "vision", nominal=8, used=4)],
        resource_flavors=[],
        pending={},
        portal_name="gpu-portal",
        gpu_model_label="nvidia.com/gpu.product",
        gpu_pods=[gpu_pod_holding(p) for p in pods],
        admitted={"uid-queued"},
    )
    record_snapshot(cluster.pk, fields, now=timezone.now())


@pytest.mark.usefixtures("held_by_hand")
def test_gpus_held_outside_the_queue_are_on_the_team_page_its_api_and_the_cluster_page(
    client_as, member, admin, cluster, team
):
    team_page = client_as(member).get(f"/teams/{team.slug}/").content.decode()
    answer = client_as(member).get(f"/api/v1/teams/{team.slug}/queue/?cluster={cluster.name}")
    cluster_page = client_as(admin).get(f"/monitoring/clusters/{cluster.name}/").content.decode()

    assert '<strong data-testid="team-held-outside-gpus">3</strong>' in team_page
    assert "<code>notebook-by-hand</code>, <code>train-by-hand</code>" in team_page
    assert answer.status_code == 200
    assert answer.json()["held_outside_the_queue"] == {
        "gpus": 3,
        "pods": 2,
        "pod_names": ["notebook-by-hand", "train-by-hand"],
    }
    row = cluster_page.split('data-testid="held-outside"')[1].split('data-team="vision"')[1]
    assert '<td class="num" data-testid="held-outside-gpus">3</td>' in row.split("</tr>")[0]
    assert "GPUs held outside the queue: 3" in cluster_page


def test_a_team_holding_nothing_outside_the_queue_shows_no_warning(
    client_as, member, cluster, team, queues
):
    team_page = client_as(member).get(f"/teams/{team.slug}/").content.decode()
    answer = client_as(member).get(f"/api/v1/teams/{team.slug}/queue/?cluster={cluster.name}")

    assert 'data-testid="team-held-outside"' not in team_page
    assert answer.json()["held_outside_the_queue"] == {"gpus": 0, "pods": 0, "pod_names": []}


def test_the_team_page_shows_gpus_lent_and_the_waiting_job(client_as, member, team, queues):
    html = client_as(member).get(f"/teams/{team.slug}/").content.decode()

    assert '<strong data-testid="team-lent">2</strong>' in html
    assert '<strong data-testid="team-waiting-count">1</strong>' in html
    assert f"#{queues.pk} waits" in html
    assert "guaranteed jobs use 2 of its 4" in html


def test_a_waiting_jobs_page_says_why_and_where_it_stands(client_as, member, queues):
    html = client_as(member).get(f"/jobs/{queues.pk}/").content.decode()

    assert (
        f"Team vision&#x27;s guaranteed jobs use 2 of its 4 {A100}; this job needs 3 and 2 are "
        "free." in html
    )
    assert '<dd data-testid="queue-position-team">1 of 1</dd>' in html
    assert '<dd data-testid="queue-position-cluster">1 of 1 waiting</dd>' in html


def wait_in_kueue(cluster, team, count, *, running):
    """``count`` one-GPU jobs of the team waiting in its guaranteed queue, in that order, and
    ``running`` admitted jobs holding 2 A100 each; the snapshot as the watcher writes it."""
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.save()
    now = timezone.now()
    for _ in range(running):
        factories.GpuJobFactory(
            team=team,
            cluster=cluster,
            gpus=2,
            gpu_model=A100,
            state=GpuJob.State.RUNNING,
            queue_name="guaranteed",
            admitted_flavor=FLAVOR,
            admitted_at=now,
            started_at=now,
            max_runtime_seconds=3600,
        )
    jobs = [
        factories.GpuJobFactory(
            team=team,
            cluster=cluster,
            name=f"waits-{i}",
            gpus=1,
            gpu_model=A100,
            state=GpuJob.State.PENDING,
            reason=Reason.IN_QUEUE,
            queue_name="guaranteed",
        )
        for i in range(count)
    ]
    workloads = [pending_workload(job, f"w{i}", position=i) for i, job in enumerate(jobs)]
    used = 2 * running
    fields = snapshot_fields(
        cluster_queues=[
            cluster_queue(
                f"gpu-portal-{team.slug}", team.slug, nominal=8, used=used, pending=count
            ),
            cluster_queue(f"gpu-portal-{team.slug}-opportunistic", team.slug, nominal=0),
        ],
        resource_flavors=[
            {"metadata": {"name": FLAVOR}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": A100}}}
        ],
        pending={f"gpu-portal-{team.slug}": workloads},
        portal_name="gpu-portal",
        gpu_model_label="nvidia.com/gpu.product",
    )
    record_snapshot(cluster.pk, fields, now=now)
    return jobs


def test_the_waiting_jobs_status_costs_the_same_queries_for_a_few_or_many(
    client_as, member, cluster, team
):
    """The jobs list and the team's queue read each cluster's queue facts once, not once per
    waiting job; each job's status in the list is what its own page's API says."""
    client = client_as(member)
    queue_path = f"/api/v1/teams/{team.slug}/queue/?cluster={cluster.name}"

    def queries(path):
        with CaptureQueriesContext(connection) as captured:
            response = client.get(path)
        assert response.status_code == 200
        return len(captured), response.json()

    wait_in_kueue(cluster, team, 2, running=3)
    few_list, few_queue = queries("/api/v1/jobs/?page_size=50")[0], queries(queue_path)[0]
    GpuJob.objects.filter(team=team).delete()
    jobs = wait_in_kueue(cluster, team, 12, running=3)
    many_list, listed = queries("/api/v1/jobs/?page_size=50")
    many_queue, queue = queries(queue_path)

    assert (many_list, many_queue) == (few_list, few_queue)
    statuses = {row["id"]: row["queue_status"] for row in listed["results"]}
    assert len([s for s in statuses.values() if s]) == len(queue["waiting"]) == 12
    for job in jobs:
        alone = client.get(f"/api/v1/jobs/{job.pk}/").json()["queue_status"]
        in_list = statuses[job.pk]
        # An estimate may be "now", which moves between the two requests.
        estimated = in_list.pop("estimated_start") is not None
        assert estimated == (alone.pop("estimated_start") is not None)
        assert in_list == alone
        # 2 GPUs free and 6 released by the running jobs: the first 8 in the queue can start.
        assert estimated == (in_list["position_in_team_queue"] <= 8)
    positions = [statuses[job.pk]["position_in_team_queue"] for job in jobs]
    assert positions == list(range(1, 13))
