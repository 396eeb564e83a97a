"""The pages read what the watcher last read of Kueue's queues: the cluster page shows the
cohort's usage per team (own, borrowed, lent, idle), the team page its GPUs borrowed and lent
and its waiting jobs, and a waiting job's page why it waits and where it stands. Database only:
the snapshot is written as the watcher writes it."""

import pytest
from django.utils import timezone

from clusters.models import QuotaMode
from gpujobs.models import GpuJob
from gpujobs.observe import Reason
from gpujobs.queues import record_snapshot, snapshot_fields
from tests import factories

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
    pending = {
        "metadata": {
            "name": "w",
            "namespace": "vision",
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "ownerReferences": [{"kind": "Job", "name": f"gpujob-{job.pk}"}],
        },
        "priority": 1000,
        "localQueueName": "guaranteed",
        "positionInClusterQueue": 0,
        "positionInLocalQueue": 0,
    }
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
