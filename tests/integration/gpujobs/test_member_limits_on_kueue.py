"""A member's own limit in the team, end to end on the devcluster with Kueue, the real worker and
the real watcher: a job beyond it waits in the portal with the reason (nothing reaches the
cluster), and goes to the cluster once the member's running job ends; the team page shows the
member's use against the limit."""

import pytest

from gpujobs.models import GpuJob
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import finishing, submit, wait_for_job, wait_for_state
from tests.integration.gpujobs.kueue import A100
from workloads import member_limits
from workloads.pod_states import Reason

pytestmark = [pytest.mark.devcluster]

State = GpuJob.State


def submitted(response) -> GpuJob:
    assert response.status_code == 201, response.content
    return GpuJob.objects.get(pk=response.json()["id"])


def test_a_job_beyond_the_members_limit_waits_with_the_reason_until_their_job_ends(
    make_kueue_team, running_services, kueue_cluster, batch, client_as
):
    cluster = kueue_cluster.cluster
    gpu = make_kueue_team({A100: 4}, name="limited")
    member_limits.member_limit_set(
        actor=gpu.lead, team=gpu.team, user=gpu.member, cluster=cluster,
        max_gpus=2, max_running=1,
    )  # fmt: skip

    first = submitted(
        submit(gpu.member, gpu.team, cluster, name="first", gpus=2, annotations=finishing(12))
    )
    first = wait_for_state(first.pk, State.RUNNING, timeout=60)
    second = submitted(submit(gpu.member, gpu.team, cluster, name="second", gpus=1))

    # The team's quota has room (4 A100s, 2 in use): only the member's own limit holds it back.
    second.refresh_from_db()
    assert second.state == State.QUEUED
    assert second.reason == Reason.MEMBER_LIMIT
    assert f"{gpu.member.username} may run 1 job or session at once" in second.message
    assert "goes once one of your jobs or sessions there ends" in second.message
    # Another member of the team is not held back by it.
    lead_job = submitted(submit(gpu.lead, gpu.team, cluster, name="leads", gpus=1))
    wait_for_state(lead_job.pk, State.RUNNING, timeout=60)
    second.refresh_from_db()
    assert second.state == State.QUEUED
    assert not batch.list_namespaced_job(
        gpu.namespace, label_selector=f"gpuportal.io/job-id={second.pk}"
    ).items
    page = client_as(gpu.lead).get(f"/teams/{gpu.team.slug}/").content.decode()
    row = page[page.index(f'data-member="{gpu.member.username}"') :]
    assert '<td class="num over" data-testid="running">1 / 1</td>' in row[: row.index("</tr>")]

    # The first job ends: the watcher sees it and the second goes to the cluster and runs.
    wait_for_state(first.pk, State.SUCCEEDED, timeout=60)
    second = wait_for_job(
        second.pk, lambda j: j.state == State.RUNNING, timeout=60, what="the held job to run"
    )
    assert second.reason != Reason.MEMBER_LIMIT
    assert second.admitted_at is not None
    wait_for(
        lambda: (
            batch.list_namespaced_job(
                gpu.namespace, label_selector=f"gpuportal.io/job-id={second.pk}"
            ).items
        ),
        what="the second job's Job on the cluster",
    )
