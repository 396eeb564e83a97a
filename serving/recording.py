"""Recording what the cluster shows on the revisions' rows: the writes of the watcher and the
periodic resync (through ``tracker``).

``observe`` reads the cluster's JSON into a ``RevisionObservation`` (pure); this module decides
what an observation changes on a row (``changes_to_record``, pure) and writes only that. An
observation counts only for the revision of its service on its cluster, from the service's
team's namespace: another portal's objects, or objects labelled to look like a service's in
another team's namespace, are never written. A rollout whose new revision has all its replicas
ready is handed to ``services.rollout_finish`` (after commit).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from serving import reconcile_triggers, selectors
from serving.models import InferenceService, Revision
from serving.observe import RevisionObservation

Key = tuple[str, int, int]  # (namespace, service id, revision number)

# What ``changes_to_record`` reads of a row.
OBSERVED_FIELDS = (
    "pk",
    "service_id",
    "desired_replicas",
    "current_replicas",
    "ready_replicas",
    "updated_replicas",
    "reason",
    "message",
    "pods",
    "nodes",
)


def changes_to_record(
    row: dict, observation: RevisionObservation, *, now: datetime.datetime
) -> dict:
    """What to write to a revision's row (as ``OBSERVED_FIELDS`` read it): nothing when the
    cluster shows what the row already says."""
    wanted = {
        "desired_replicas": observation.desired,
        "current_replicas": observation.current,
        "ready_replicas": observation.ready,
        "updated_replicas": observation.updated,
        "reason": observation.reason,
        "message": observation.message,
        "pods": list(observation.pods),
        "nodes": list(observation.nodes),
    }
    changes = {field: value for field, value in wanted.items() if row[field] != value}
    if changes:
        changes["observed_at"] = now
    return changes


def record_observations(*, cluster_id: int, seen: Sequence[tuple[Key, RevisionObservation]]) -> int:
    """Record what the cluster shows for many revisions at once; one read for all of them, one
    update per revision that changed, one commit. Returns how many rows changed."""
    followed = selectors.followed_revisions(cluster_id=cluster_id)
    wanted = {followed[key]: observation for key, observation in seen if key in followed}
    if not wanted:
        return 0
    rows = Revision.objects.filter(pk__in=list(wanted)).values(*OBSERVED_FIELDS)
    now = timezone.now()
    changed = 0
    finished: set[int] = set()
    rerouted: set[int] = set()
    with transaction.atomic():
        for row in rows:
            changes = changes_to_record(row, wanted[row["pk"]], now=now)
            if changes:
                changed += Revision.objects.filter(pk=row["pk"]).update(**changes)
                if "ready_replicas" in changes:
                    finished |= rollouts_to_finish(revision_ids=[row["pk"]])
                    if (row["ready_replicas"] > 0) != (changes["ready_replicas"] > 0):
                        # Its route's weights follow whether it has a ready replica.
                        rerouted.add(row["service_id"])
        for service_id in sorted(finished):
            transaction.on_commit(
                lambda service_id=service_id: reconcile_triggers.enqueue_rollout_finish(
                    service_id=service_id
                )
            )
        for service_id in sorted(rerouted - finished):
            transaction.on_commit(
                lambda service_id=service_id: reconcile_triggers.enqueue_now(service_id=service_id)
            )
    return changed


def rollouts_to_finish(*, revision_ids: list[int]) -> set[int]:
    """Services rolling out whose new revision (among these) has all its replicas ready."""
    rows = Revision.objects.filter(
        pk__in=revision_ids,
        role=Revision.Role.CANDIDATE,
        service__rollout=InferenceService.Rollout.ROLLING,
        service__state=InferenceService.State.ACTIVE,
    ).values_list("service_id", "ready_replicas", "replicas")
    return {service_id for service_id, ready, replicas in rows if ready >= replicas}
