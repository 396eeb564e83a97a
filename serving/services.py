"""Changes to inference services: deploy, a new revision (rolled out, as a canary, or as an A/B
test's second variant), the traffic split, promote, roll back, scale, stop and delete. Views,
serializers and tasks call these.

Each checks first (``PermissionDenied``; ``ValidationError`` naming every bad field, quota
included; ``InvalidTransition`` when the service is not in a state that allows it) and then
writes in one transaction, holding the team's row (the lock every quota check takes, jobs'
too) and then the service's, records an audit event, and asks for the service's reconcile
after commit (``reconcile.request_after_commit``), which brings the cluster in line with the
rows. Nothing here talks to a cluster.

A service's revisions: one ``stable`` (takes the traffic the other leaves), at most one
``candidate``, and ``retired`` ones. A rollout (``update``) makes a candidate with weight 0 that
takes over once all its replicas are ready (``rollout_finish``, asked for by the watcher); a
canary takes ``weight`` % at once; an A/B test names the two; ``promote`` makes the candidate
(or the chosen variant) stable and retires the other, ``rollback`` retires the candidate, or,
when there is none, rolls an earlier revision out again.
"""

from __future__ import annotations

import logging

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from billing.enforcement import check_budgets
from clusters.models import Cluster
from serving import admission, reconcile_triggers, selectors
from serving.admission import Planned, planned, replicas_words
from serving.models import InferenceService, Revision
from serving.permissions import can_change, can_deploy
from serving.specs import DeployRequest, RevisionRequest, Variant
from tenants.audit import audit
from tenants.errors import InvalidTransition
from tenants.models import AuditEvent, Team

logger = logging.getLogger(__name__)

Service = InferenceService
State = InferenceService.State
Rollout = InferenceService.Rollout
Role = Revision.Role
Action = AuditEvent.Action


def _snapshot(service: InferenceService, revisions: list[Revision]) -> dict:
    return {
        "name": service.name,
        "cluster_id": service.cluster_id,
        "state": service.state,
        "rollout": service.rollout,
        "revisions": [
            {
                "number": r.number,
                "role": r.role,
                "replicas": r.replicas,
                "weight": r.weight,
                "variant": r.variant,
                "image": r.image,
                "gpus": r.gpus,
            }
            for r in revisions
        ],
    }


class Change:
    """One change to a service inside its transaction: the rows locked (team, then service),
    its live revisions, and a snapshot of before, for the audit event."""

    def __init__(self, service: InferenceService, *, actor: User | None, verb: str):
        if actor is not None and not can_change(actor, service):
            raise PermissionDenied(
                f"Only leads and members of {service.team.slug} can change its services."
            )
        # The team's row first, as every quota check takes it, then the service's.
        Team.objects.select_for_update().get(pk=service.team_id)
        self.service = (
            Service.objects.select_for_update(of=("self",))
            .select_related("team", "cluster")
            .get(pk=service.pk)
        )
        self.actor = actor
        self.verb = verb
        self.revisions = selectors.live_revisions(self.service)
        self.before = _snapshot(self.service, self.revisions)

    @property
    def stable(self) -> Revision:
        return next(r for r in self.revisions if r.role == Role.STABLE)

    @property
    def candidate(self) -> Revision | None:
        return next((r for r in self.revisions if r.role == Role.CANDIDATE), None)

    def require(self, *, states=(State.ACTIVE,), rollouts=None) -> None:
        service = self.service
        if service.state not in states:
            raise InvalidTransition(
                f"Cannot {self.verb} service {service.name}: it is {service.state}.",
                current_state=service.state,
            )
        if rollouts is not None and service.rollout not in rollouts:
            doing = service.get_rollout_display().lower()
            raise InvalidTransition(
                f"Cannot {self.verb} service {service.name} now ({doing}).",
                current_state=service.rollout,
            )

    def fits(self, after: list[Planned], *, asking: str, field: str) -> None:
        admission.check_fits(
            service=self.service,
            before=[planned(r) for r in self.revisions],
            after=after,
            stopped_before=self.service.state == State.STOPPED,
            asking=asking,
            field=field,
        )

    def next_number(self) -> int:
        last = self.service.revisions.order_by("-number").values_list("number", flat=True)
        return (last.first() or 0) + 1

    def done(self, action: str, *, note: str = "") -> InferenceService:
        """Audit the change and ask for the service's reconcile after commit."""
        self.service.refresh_from_db()
        revisions = selectors.live_revisions(self.service)
        audit(
            actor=self.actor,
            action=action,
            target=self.service,
            team=self.service.team,
            before=self.before,
            after=_snapshot(self.service, revisions),
            note=note,
        )
        reconcile_triggers.request_after_commit(service_id=self.service.pk)
        return self.service


def _retire(revision: Revision, now) -> None:
    revision.role = Role.RETIRED
    revision.weight = 0
    revision.retired_at = now
    revision.save(update_fields=["role", "weight", "retired_at"])


def _set_rollout(service: InferenceService, rollout: str) -> None:
    service.rollout = rollout
    service.save(update_fields=["rollout"])


def _new_candidate(
    change: Change, request: RevisionRequest, *, replicas: int, weight: int, variant: str = ""
) -> Revision:
    return Revision.objects.create(
        service=change.service,
        number=change.next_number(),
        created_by=change.actor,
        role=Role.CANDIDATE,
        replicas=replicas,
        weight=weight,
        variant=variant,
        **request.model_fields(),
    )


def _candidate_plan(change: Change, request: RevisionRequest, *, replicas: int, weight: int):
    stable = change.stable
    return [
        Planned(stable.number, Role.STABLE, stable.replicas, 100 - weight, stable.gpus,
                stable.gpu_resource),
        Planned(change.next_number(), Role.CANDIDATE, replicas, weight, request.gpus,
                request.gpu_resource),
    ]  # fmt: skip


# --- a new service -----------------------------------------------------------------------------


def service_deploy(
    *, user: User, team: Team, cluster: Cluster, request: DeployRequest
) -> InferenceService:
    """Store a new service and its first revision (stable, all the traffic) once the team's and
    the cluster's rules and the team's quota admit them; the reconcile makes its objects."""
    if not can_deploy(user, team):
        raise PermissionDenied(f"Only leads and members of {team.slug} can run services there.")
    admission.check_revision(team=team, cluster=cluster, request=request.revision)
    check_budgets(
        team=team, cluster=cluster, gpu_model=request.revision.gpu_model, field="replicas"
    )
    revision = request.revision
    with transaction.atomic():
        Team.objects.select_for_update().get(pk=team.pk)
        taken = Service.objects.filter(team=team, cluster=cluster, name=request.name).exclude(
            state=State.DELETED
        )
        if taken.exists():
            raise ValidationError(
                {
                    "name": f"Team {team.slug} already has a service named {request.name} on "
                    f"cluster {cluster.name}."
                }
            )
        service = Service(team=team, cluster=cluster, name=request.name, created_by=user)
        first = Planned(1, Role.STABLE, request.replicas, 100, revision.gpus, revision.gpu_resource)
        admission.check_fits(
            service=service,
            before=[],
            after=[first],
            stopped_before=False,
            asking=f"this service's {replicas_words(request.replicas, revision.gpus)} ask for",
            field="replicas",
        )
        service.save()
        Revision.objects.create(
            service=service,
            number=1,
            created_by=user,
            role=Role.STABLE,
            replicas=request.replicas,
            weight=100,
            **revision.model_fields(),
        )
        audit(
            actor=user,
            action=Action.SERVICE_DEPLOYED,
            target=service,
            team=team,
            before=None,
            after=_snapshot(service, selectors.live_revisions(service)),
        )
        reconcile_triggers.request_after_commit(service_id=service.pk)
    return service


# --- new revisions -----------------------------------------------------------------------------


def service_update(
    *, actor: User, service: InferenceService, request: RevisionRequest
) -> InferenceService:
    """Roll out a new revision: it starts beside the stable one with as many replicas, takes
    no traffic over HTTPRoute weights until all its replicas are ready, and then takes over
    (``rollout_finish``)."""
    admission.check_revision(team=service.team, cluster=service.cluster, request=request)
    with transaction.atomic():
        change = Change(service, actor=actor, verb="roll out a new revision of")
        change.require(rollouts=(Rollout.NONE,))
        replicas = change.stable.replicas
        change.fits(
            _candidate_plan(change, request, replicas=replicas, weight=0),
            asking=f"the new revision's {replicas_words(replicas, request.gpus)} beside the "
            "running one ask for",
            field="gpus",
        )
        _new_candidate(change, request, replicas=replicas, weight=0)
        _set_rollout(change.service, Rollout.ROLLING)
        return change.done(Action.SERVICE_REVISED, note="rolling out")


def service_canary(
    *,
    actor: User,
    service: InferenceService,
    request: RevisionRequest,
    weight: int,
    replicas: int | None = None,
) -> InferenceService:
    """A new revision as a canary taking ``weight`` % of the traffic beside the stable one,
    until promoted or rolled back. ``replicas`` defaults to 1 (under HTTPRoute weights; behind
    one Service the weight decides the replica count)."""
    admission.check_revision(team=service.team, cluster=service.cluster, request=request)
    with transaction.atomic():
        change = Change(service, actor=actor, verb="start a canary of")
        change.require(rollouts=(Rollout.NONE,))
        replicas = replicas or 1
        change.fits(
            _candidate_plan(change, request, replicas=replicas, weight=weight),
            asking=f"the canary at {weight}% with {replicas_words(replicas, request.gpus)} "
            "(as many as its weight needs, behind one Service) asks for",
            field="weight",
        )
        stable = change.stable
        stable.weight = 100 - weight
        stable.save(update_fields=["weight"])
        _new_candidate(change, request, replicas=replicas, weight=weight)
        _set_rollout(change.service, Rollout.CANARY)
        return change.done(Action.SERVICE_REVISED, note=f"canary at {weight}%")


def service_ab_test(
    *,
    actor: User,
    service: InferenceService,
    request: RevisionRequest,
    variants: tuple[Variant, Variant],
    replicas: int | None = None,
) -> InferenceService:
    """An A/B test: the running revision as the first variant, a new one as the second, side by
    side with the variants' weights, until one is promoted (or the second rolled back). The
    second runs as many replicas as the first unless ``replicas`` says otherwise."""
    admission.check_revision(team=service.team, cluster=service.cluster, request=request)
    first, second = variants
    with transaction.atomic():
        change = Change(service, actor=actor, verb="start an A/B test of")
        change.require(rollouts=(Rollout.NONE,))
        replicas = replicas or change.stable.replicas
        change.fits(
            _candidate_plan(change, request, replicas=replicas, weight=second.weight),
            asking=f"variant {second.name}'s {replicas_words(replicas, request.gpus)} ask for",
            field="variants",
        )
        stable = change.stable
        stable.weight = first.weight
        stable.variant = first.name
        stable.save(update_fields=["weight", "variant"])
        _new_candidate(
            change, request, replicas=replicas, weight=second.weight, variant=second.name
        )
        _set_rollout(change.service, Rollout.AB_TEST)
        return change.done(
            Action.SERVICE_REVISED,
            note=f"A/B test {first.name} {first.weight}% / {second.name} {second.weight}%",
        )


# --- traffic -----------------------------------------------------------------------------------


def service_set_traffic(
    *, actor: User, service: InferenceService, split: dict[int, int]
) -> InferenceService:
    """New weights for a canary or an A/B test's variants (``split``: revision number ->
    %, adding up to 100, as ``specs.read_split`` reads it)."""
    with transaction.atomic():
        change = Change(service, actor=actor, verb="change the traffic of")
        change.require(rollouts=(Rollout.CANARY, Rollout.AB_TEST))
        live = {r.number: r for r in change.revisions}
        if set(split) != set(live) or sum(split.values()) != 100:
            raise ValidationError(
                {
                    "split": f"Give weights adding up to 100% for revisions "
                    f"{', '.join(map(str, sorted(live)))}."
                }
            )
        after = [
            Planned(r.number, r.role, r.replicas, split[r.number], r.gpus, r.gpu_resource)
            for r in change.revisions
        ]
        words = ", ".join(f"r{n} {w}%" for n, w in sorted(split.items()))
        change.fits(
            after,
            asking=f"the split {words} (by replica counts behind one Service) asks for",
            field="split",
        )
        for number, revision in live.items():
            if revision.weight != split[number]:
                revision.weight = split[number]
                revision.save(update_fields=["weight"])
        return change.done(Action.SERVICE_TRAFFIC_SET, note=words)


def service_promote(
    *, actor: User, service: InferenceService, variant: str = ""
) -> InferenceService:
    """The candidate (or, in an A/B test, the named ``variant``) becomes the stable revision
    with all the traffic; the other is retired."""
    with transaction.atomic():
        change = Change(service, actor=actor, verb="promote")
        change.require(rollouts=(Rollout.ROLLING, Rollout.CANARY, Rollout.AB_TEST))
        winner = change.candidate
        if variant:
            winner = next((r for r in change.revisions if r.variant == variant), None)
            if winner is None:
                names = ", ".join(r.variant for r in change.revisions if r.variant)
                raise ValidationError({"variant": f"No variant {variant!r}; there are: {names}."})
        assert winner is not None
        return _promote(change, winner, note=f"r{winner.number} promoted")


def _promote(change: Change, winner: Revision, *, note: str) -> InferenceService:
    """``winner`` takes all the traffic with at least the replicas the stable revision ran (a
    canary's one replica does not carry the whole load); the others are retired."""
    replicas = max(winner.replicas, change.stable.replicas)
    after = [Planned(winner.number, Role.STABLE, replicas, 100, winner.gpus, winner.gpu_resource)]
    change.fits(
        after,
        asking=f"r{winner.number} alone with {replicas_words(replicas, winner.gpus)} asks for",
        field="variant",
    )
    now = timezone.now()
    for revision in change.revisions:
        if revision.pk != winner.pk:
            _retire(revision, now)
    winner.role = Role.STABLE
    winner.replicas = replicas
    winner.weight = 100
    winner.variant = ""
    winner.save(update_fields=["role", "replicas", "weight", "variant"])
    _set_rollout(change.service, Rollout.NONE)
    return change.done(Action.SERVICE_PROMOTED, note=note)


def service_rollback(
    *, actor: User, service: InferenceService, revision: int | None = None
) -> InferenceService:
    """Retire the candidate (a rollout, canary or A/B test's second variant) and give the
    stable revision all the traffic again. With none, roll an earlier revision (``revision``,
    else the one before the stable) out again: it takes over once ready, as a rollout does."""
    with transaction.atomic():
        change = Change(service, actor=actor, verb="roll back")
        change.require()
        candidate = change.candidate
        if candidate is not None:
            if revision is not None and revision != change.stable.number:
                raise ValidationError(
                    {
                        "revision": f"A rollout is under way: rolling back returns to the stable "
                        f"r{change.stable.number}."
                    }
                )
            _retire(candidate, timezone.now())
            stable = change.stable
            stable.weight = 100
            stable.variant = ""
            stable.save(update_fields=["weight", "variant"])
            _set_rollout(change.service, Rollout.NONE)
            return change.done(Action.SERVICE_ROLLED_BACK, note=f"r{candidate.number} retired")
        return _roll_back_to(change, revision)


def _roll_back_to(change: Change, number: int | None) -> InferenceService:
    stable = change.stable
    earlier = change.service.revisions.filter(role=Role.RETIRED, number__lt=stable.number)
    target = (
        earlier.filter(number=number).first() if number else earlier.order_by("-number").first()
    )
    if target is None:
        what = f"r{number}" if number else "an earlier revision"
        raise ValidationError(
            {"revision": f"There is no {what} of {change.service.name} to roll back to."}
        )
    replicas = stable.replicas
    change.fits(
        [
            planned(stable),
            Planned(target.number, Role.CANDIDATE, replicas, 0, target.gpus, target.gpu_resource),
        ],
        asking=f"r{target.number}'s {replicas_words(replicas, target.gpus)} beside the running "
        "revision ask for",
        field="revision",
    )
    target.role = Role.CANDIDATE
    target.replicas = replicas
    target.weight = 0
    target.retired_at = None
    target.save(update_fields=["role", "replicas", "weight", "retired_at"])
    _set_rollout(change.service, Rollout.ROLLING)
    return change.done(Action.SERVICE_ROLLED_BACK, note=f"rolling back to r{target.number}")


def rollout_finish(*, service_id: int) -> bool:
    """A rollout's candidate takes over once all its replicas are ready (the watcher asks);
    False when there is nothing to finish (not rolling, or not ready yet)."""
    with transaction.atomic():
        service = Service.objects.select_related("team").filter(pk=service_id).first()
        if service is None or service.rollout != Rollout.ROLLING or service.state != State.ACTIVE:
            return False
        change = Change(service, actor=None, verb="finish the rollout of")
        candidate = change.candidate
        if (
            change.service.rollout != Rollout.ROLLING
            or candidate is None
            or candidate.ready_replicas < candidate.replicas
        ):
            return False
        _promote(change, candidate, note=f"r{candidate.number} ready: rollout finished")
        return True


# --- scale, stop, delete -----------------------------------------------------------------------


def service_scale(
    *, actor: User, service: InferenceService, replicas: int, revision: int | None = None
) -> InferenceService:
    """Run ``replicas`` of a live revision (the stable one unless ``revision`` names the
    candidate). A stopped service starts again. Behind one Service, the other revisions'
    replica counts follow to keep the split."""
    with transaction.atomic():
        change = Change(service, actor=actor, verb="scale")
        change.require(states=(State.ACTIVE, State.STOPPED))
        target = change.stable
        if revision is not None:
            target = next((r for r in change.revisions if r.number == revision), None)
            if target is None:
                live = ", ".join(str(r.number) for r in change.revisions)
                raise ValidationError({"revision": f"No live revision {revision}; live: {live}."})
        after = [
            Planned(r.number, r.role, replicas if r.pk == target.pk else r.replicas, r.weight,
                    r.gpus, r.gpu_resource)
            for r in change.revisions
        ]  # fmt: skip
        was = 0 if change.service.state == State.STOPPED else target.replicas
        change.fits(
            after,
            asking=f"scaling r{target.number} from {was} to "
            f"{replicas_words(replicas, target.gpus)} asks for",
            field="replicas",
        )
        target.replicas = replicas
        target.save(update_fields=["replicas"])
        if change.service.state == State.STOPPED:
            change.service.state = State.ACTIVE
            change.service.stopped_at = None
            change.service.save(update_fields=["state", "stopped_at"])
        return change.done(Action.SERVICE_SCALED, note=f"r{target.number} to {replicas}")


def service_stop(
    *, actor: User | None, service: InferenceService, note: str = ""
) -> InferenceService:
    """Scale every revision to zero: the service keeps its revisions and objects, and holds no
    GPU until it is scaled again. ``actor`` None: the portal itself (the idle policy)."""
    with transaction.atomic():
        change = Change(service, actor=actor, verb="stop")
        change.require()
        change.service.state = State.STOPPED
        change.service.stopped_at = timezone.now()
        change.service.save(update_fields=["state", "stopped_at"])
        return change.done(Action.SERVICE_STOPPED, note=note)


def service_delete(*, actor: User, service: InferenceService) -> InferenceService:
    """Remove the service from the cluster: the reconcile deletes its objects and marks it
    deleted once nothing of it is left there."""
    with transaction.atomic():
        change = Change(service, actor=actor, verb="delete")
        change.require(states=(State.ACTIVE, State.STOPPED))
        change.service.state = State.DELETING
        change.service.save(update_fields=["state"])
        return change.done(Action.SERVICE_DELETED)


def service_stop_idle(cluster: Cluster, namespace: str, service_id: str) -> None:
    """The idle policy's stop of a service whose replica's GPUs stayed idle (the team's policy
    stops services): the service in that namespace of that cluster, if it is active there."""
    from clusters.pods import StopRefused

    service = (
        Service.objects.filter(
            pk=int(service_id) if service_id.isdigit() else 0,
            cluster=cluster,
            team__slug=namespace,
            state=State.ACTIVE,
        )
        .select_related("team", "cluster")
        .first()
    )
    if service is None:
        raise StopRefused(f"No active inference service #{service_id} in {namespace}.")
    service_stop(actor=None, service=service, note="idle past the team's limit")
