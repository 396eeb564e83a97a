"""Kueue's queues as the portal reads them (``queues``) and explains them (``waiting``): the
snapshot of ClusterQueues, flavors and pending workloads; each team's own, borrowed, lent and
idle GPUs; why a job waits, in words and numbers; its places in the queues; and when it may
start. No database."""

import datetime

import pytest

from gpujobs.queues import Snapshot, count, snapshot_fields
from gpujobs.waiting import (
    Release,
    WaitingJob,
    cohort_usage,
    estimated_start,
    explain,
    needed_gpus,
    positions,
)

A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"
FA, FH = "gpu-portal-nvidia-a100", "gpu-portal-nvidia-h100"
MODEL_LABEL = "nvidia.com/gpu.product"
NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def cq(name, team, *, flavors, usage=(), pending=0, cohort="gpu-portal"):
    """flavors: {flavor: (nominal, borrowing_limit, lending_limit)}; usage: (flavor, total,
    borrowed)."""
    resources = []
    for flavor, (nominal, borrowing, lending) in flavors.items():
        resource = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
        if borrowing is not None:
            resource["borrowingLimit"] = borrowing
        if lending is not None:
            resource["lendingLimit"] = lending
        resources.append({"name": flavor, "resources": [resource]})
    return {
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team}},
            "resourceGroups": [
                {"coveredResources": ["nvidia.com/gpu"], "flavors": resources},
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": "100"}]}
                    ],
                },
            ],
        },
        "status": {
            "pendingWorkloads": pending,
            "flavorsReservation": [
                {
                    "name": f,
                    "resources": [
                        {"name": "nvidia.com/gpu", "total": str(total), "borrowed": str(borrowed)}
                    ],
                }
                for f, total, borrowed in usage
            ],
        },
    }


def flavor(name, model):
    labels = {"hardware-type": "gpu"}
    if model:
        labels[MODEL_LABEL] = model
    return {"metadata": {"name": name}, "spec": {"nodeLabels": labels}}


def pending(job_id, namespace, *, position, priority, created, queue="guaranteed"):
    return {
        "metadata": {
            "name": f"job-gpujob-{job_id}-x",
            "namespace": namespace,
            "creationTimestamp": created,
            "ownerReferences": [{"kind": "Job", "name": f"gpujob-{job_id}"}],
        },
        "priority": priority,
        "localQueueName": queue,
        "positionInClusterQueue": position,
        "positionInLocalQueue": position,
    }


def snapshot(cluster_queues, pending_by_queue=None, error="") -> Snapshot:
    fields = snapshot_fields(
        cluster_queues=cluster_queues,
        resource_flavors=[flavor(FA, A100), flavor(FH, H100), flavor("cpu", "")],
        pending=pending_by_queue or {},
        portal_name="gpu-portal",
        gpu_model_label=MODEL_LABEL,
        kueue_error=error,
    )

    class Row:
        taken_at = NOW
        kueue_error = error
        kueue_error_since = None

    row = Row()
    for name, value in fields.items():
        setattr(row, name, value)
    return Snapshot.from_row(row)


# vision owns 8 A100, all in use, and borrows 1 more (limit 3); nlp owns 4 A100 and uses 0,
# but lends at most 3 of them; cv owns 2 H100, lends 1 A100 worth nothing (no A100 quota).
QUEUES = [
    cq("gpu-portal-vision", "vision", flavors={FA: (8, 0, None), FH: (0, 0, None)},
       usage=[(FA, 8, 0)], pending=1),
    cq("gpu-portal-vision-opportunistic", "vision", flavors={FA: (0, 3, None), FH: (0, 3, None)},
       usage=[(FA, 1, 1)], pending=1),
    cq("gpu-portal-nlp", "nlp", flavors={FA: (4, 0, 3), FH: (0, 0, None)}),
    cq("gpu-portal-nlp-opportunistic", "nlp", flavors={FA: (0, None, None), FH: (0, None, None)}),
    cq("gpu-portal-cv", "cv", flavors={FA: (0, 0, None), FH: (2, 0, None)}, usage=[(FH, 2, 0)]),
    cq("gpu-portal-cv-opportunistic", "cv", flavors={FA: (0, None, None), FH: (0, None, None)}),
]  # fmt: skip
PENDING = {
    "gpu-portal-vision": [
        pending(21, "vision", position=0, priority=1000, created="2026-12-01T11:00:05Z"),
        pending(22, "vision", position=1, priority=1000, created="2026-12-01T11:00:09Z"),
    ],
    "gpu-portal-vision-opportunistic": [
        pending(23, "vision", position=0, priority=100, created="2026-12-01T10:00:00Z",
                queue="opportunistic"),
    ],
    "gpu-portal-cv": [
        pending(31, "cv", position=0, priority=1000, created="2026-12-01T11:00:07Z"),
    ],
}  # fmt: skip


@pytest.mark.parametrize(("value", "expected"), [(8, 8), ("8", 8), ("8000m", 8), ("x", 0)])
def test_kueue_quantities_are_read_as_whole_gpus(value, expected):
    assert count(value) == expected


def test_the_snapshot_knows_each_queues_team_kind_cohort_and_gpu_flavors():
    taken = snapshot(QUEUES, PENDING)

    queue = taken.team_queue("vision", "opportunistic")
    assert queue.name == "gpu-portal-vision-opportunistic"
    assert queue.cohort == "gpu-portal"
    assert set(queue.flavors) == {FA, FH}  # the CPU flavor is not a GPU flavor
    assert queue.flavors[FA].borrowing_limit == 3
    assert taken.flavors == {FA: A100, FH: H100}
    assert [p.job_id for p in taken.pending if p.cluster_queue == "gpu-portal-vision"] == [21, 22]


def test_each_team_shows_its_own_gpus_and_what_it_borrows_lends_and_leaves_idle():
    rows = {(r.team, r.flavor): r for r in cohort_usage(snapshot(QUEUES), cohort="gpu-portal")}

    vision, nlp = rows[("vision", FA)], rows[("nlp", FA)]
    assert (vision.own, vision.in_use, vision.borrowed, vision.lent) == (8, 9, 1, 0)
    assert (nlp.own, nlp.in_use, nlp.borrowed, nlp.lent, nlp.idle) == (4, 0, 0, 1, 3)
    cv = rows[("cv", FH)]
    assert (cv.own, cv.in_use, cv.idle) == (2, 2, 0)


def test_a_guaranteed_job_waits_for_its_teams_own_gpus():
    taken = snapshot(QUEUES, PENDING)
    job = WaitingJob(job_id=21, team="vision", priority="guaranteed", gpus=2, gpu_model=A100)

    why = explain(taken, job, cluster_name="gpu-east")

    assert why.words == (
        f"Team vision's guaranteed jobs use 8 of its 8 {A100}; this job needs 2 and 0 are free. "
        "Guaranteed jobs run only within the team's own quota."
    )
    assert (why.flavor, why.own, why.free_now) == (FA, 8, 0)


def test_an_opportunistic_job_says_what_is_idle_and_what_its_team_may_still_borrow():
    taken = snapshot(QUEUES, PENDING)
    job = WaitingJob(job_id=23, team="vision", priority="opportunistic", gpus=4, gpu_model=A100)

    why = explain(taken, job, cluster_name="gpu-east")

    # nlp may lend 3 of its 4 idle A100, of which vision borrows 1: 2 left.
    assert why.words == (
        f"Team vision uses 9 of its 8 {A100}; 2 {A100} are idle in the cohort and vision may "
        "borrow 2 more (its borrowing limit is 3); this job needs 4."
    )
    assert (why.idle_in_cohort, why.may_borrow, why.free_now) == (2, 2, 2)


def test_teams_in_different_departments_cohorts_count_each_others_idle_gpus():
    """Department cohorts lend through the root: the figures are the whole tree's."""
    departments = {"vision": "gpu-portal-department-research", "nlp": "gpu-portal-department-ops"}
    in_departments = [
        {**q, "spec": {**q["spec"], "cohortName": departments.get(team, q["spec"]["cohortName"])}}
        for q in QUEUES
        for team in [q["spec"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]]
    ]
    taken = snapshot(in_departments, PENDING)
    job = WaitingJob(job_id=23, team="vision", priority="opportunistic", gpus=4, gpu_model=A100)

    assert taken.team_queue("vision", "guaranteed").cohort == "gpu-portal"
    assert explain(taken, job, cluster_name="gpu-east").idle_in_cohort == 2


def test_kueue_not_answering_is_the_reason_whatever_the_figures():
    taken = snapshot(QUEUES, PENDING, error="Kueue on cluster gpu-east is not admitting: x")
    job = WaitingJob(job_id=21, team="vision", priority="guaranteed", gpus=2)

    assert explain(taken, job, cluster_name="gpu-east").words.startswith("Kueue on cluster")


def test_places_count_the_teams_queue_and_the_whole_cohort_by_priority_then_age():
    taken = snapshot(QUEUES, PENDING)

    second = positions(taken, job_id=22, namespace="vision")
    borrowing = positions(taken, job_id=23, namespace="vision")

    assert (second.team_queue, second.team_queue_length) == (2, 2)
    # 21 (11:00:05), cv's 31 (11:00:07), then 22 (11:00:09); the opportunistic one after all.
    assert (second.cluster, second.cluster_length) == (3, 4)
    assert (borrowing.team_queue, borrowing.cluster) == (1, 4)
    assert positions(taken, job_id=99, namespace="vision").cluster is None


def test_a_job_needs_its_own_gpus_and_those_of_the_jobs_before_it():
    taken = snapshot(QUEUES, PENDING)
    job = WaitingJob(job_id=22, team="vision", priority="guaranteed", gpus=2)

    assert needed_gpus(taken, job, gpus_of={21: 3}) == 5


def test_the_estimated_start_is_when_enough_running_jobs_reach_their_maximum_run_time():
    releases = [
        Release(end_by=NOW + datetime.timedelta(hours=3), gpus=4),
        Release(end_by=NOW + datetime.timedelta(hours=1), gpus=1),
        Release(end_by=NOW + datetime.timedelta(hours=2), gpus=2),
    ]

    assert estimated_start(needed=3, free_now=0, releases=releases, now=NOW) == (
        NOW + datetime.timedelta(hours=2)
    )
    assert estimated_start(needed=2, free_now=2, releases=releases, now=NOW) == NOW
    assert estimated_start(needed=9, free_now=1, releases=releases, now=NOW) is None
