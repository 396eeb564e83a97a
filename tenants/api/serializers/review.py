"""The review queue: pending requests beside their cluster's figures and, for a department admin,
whether they may decide each."""

from functools import cached_property

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tenants import review_history
from tenants.api.serializers.clusters import GpuModelCapacitySerializer, model_rows
from tenants.api.serializers.quota_requests import QuotaRequestSerializer
from tenants.ceilings import delegation
from tenants.models import QuotaRequest
from tenants.permissions import is_portal_admin
from tenants.selectors import GrantedInPeriod, granted_in_request_periods


class ReviewCapacitySerializer(serializers.Serializer):
    capacity = serializers.IntegerField(help_text="GPUs of this kind the cluster has to plan with.")
    plannable = serializers.IntegerField(help_text="Capacity times the overcommit ratio.")
    granted = serializers.IntegerField(help_text="GPUs active grants hold from today on.")
    free = serializers.IntegerField(help_text="Plannable minus granted, now.")
    granted_in_period = serializers.IntegerField(
        help_text="GPUs active grants hold during this request's period (what approval checks)."
    )
    free_after = serializers.IntegerField(
        help_text="Plannable minus granted in the request's period minus this request's GPUs "
        "(negative: approving it in full would be refused)."
    )


DECISION_FIELDS = {"state", "decided_by", "decided_at", "decision_note"}


class DelegationSerializer(serializers.Serializer):
    allowed = serializers.BooleanField(help_text="Whether you may approve or reject it.")
    reason = serializers.CharField(
        help_text="Why (not): the ceilings' arithmetic, or that it needs a portal admin."
    )


class UseWindowSerializer(serializers.Serializer):
    days = serializers.IntegerField(help_text="The window: the last this many days, to now.")
    granted_gpu_hours = serializers.FloatField(
        help_text="GPU-hours the team's grants of the asked kind (and model) on the cluster "
        "allowed, in GPU equivalents."
    )
    hours_in_force = serializers.FloatField(
        help_text="Hours of the window in which any such grant was in force."
    )
    held_gpu_hours = serializers.FloatField(
        allow_null=True,
        help_text="GPU-hours the team's pods held on the cluster (any GPU, GPU equivalents); "
        "null when its Prometheus could not say.",
    )
    used_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="Held GPU-hours weighted by utilisation."
    )
    held_percent = serializers.FloatField(allow_null=True, help_text="Held of granted.")
    utilisation_percent = serializers.FloatField(
        allow_null=True, help_text="Used of held: how busy the GPUs it held were."
    )
    jobs = serializers.IntegerField(
        help_text="Its jobs of the asked kind (and model) on the cluster created in the window."
    )
    jobs_waited = serializers.IntegerField(
        help_text="Of them, those that started more than waited_minutes after submission "
        "(or have waited that long, or ended having waited that long)."
    )
    waited_minutes = serializers.IntegerField()


class SuggestionSerializer(serializers.Serializer):
    gpus = serializers.IntegerField(help_text="The size the team's use suggests.")
    arithmetic = serializers.CharField(help_text="How it was reached, in words and numbers.")


class GrantHistorySerializer(serializers.Serializer):
    windows = UseWindowSerializer(many=True)
    suggestion = SuggestionSerializer()
    error = serializers.CharField(help_text="Why held and used hours are missing, if they are.")


def _float_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


def grant_history_data(history: review_history.GrantHistory) -> dict:
    """What ``GrantHistorySerializer`` writes for ``history``, written directly: a review queue
    page of 1,000 requests would build 4,000 nested serializers for it, a third of the page's
    time (profiled at 500 teams; ``make bench-scale``). The serializer stays the schema; a test
    holds the two equal."""
    return {
        "windows": [
            {
                "days": int(w.days),
                "granted_gpu_hours": float(w.granted_gpu_hours),
                "hours_in_force": float(w.hours_in_force),
                "held_gpu_hours": _float_or_none(w.held_gpu_hours),
                "used_gpu_hours": _float_or_none(w.used_gpu_hours),
                "held_percent": _float_or_none(w.held_percent),
                "utilisation_percent": _float_or_none(w.utilisation_percent),
                "jobs": int(w.jobs),
                "jobs_waited": int(w.jobs_waited),
                "waited_minutes": int(w.waited_minutes),
            }
            for w in history.windows
        ],
        "suggestion": {
            "gpus": int(history.suggestion.gpus),
            "arithmetic": str(history.suggestion.arithmetic),
        },
        "error": str(history.error),
    }


class ReviewQueueItemSerializer(QuotaRequestSerializer):
    """A pending request beside its cluster's figures for the requested GPU kind, for the
    requested model (when it names one) and for every model of the kind."""

    capacity = serializers.SerializerMethodField()
    model_capacity = serializers.SerializerMethodField(
        help_text="The requested model's figures; null for a request of any model."
    )
    gpu_models = serializers.SerializerMethodField(
        help_text="Capacity, granted and free per GPU model of the requested kind."
    )

    delegation = serializers.SerializerMethodField(
        help_text="For a department admin: whether they may decide it, and why (not), with the "
        "ceiling's arithmetic. Null for portal admins."
    )
    history = serializers.SerializerMethodField(
        help_text="What the team did with its grants of this kind on the cluster over the last "
        "30 and 90 days, and the size that suggests (approve it with its gpus)."
    )

    class Meta(QuotaRequestSerializer.Meta):
        # Every item is pending: no state and no decision yet.
        fields = [
            *(f for f in QuotaRequestSerializer.Meta.fields if f not in DECISION_FIELDS),
            "capacity",
            "model_capacity",
            "gpu_models",
            "delegation",
            "history",
        ]
        read_only_fields = fields

    def prepare_rows(self, objects) -> None:
        """What grants hold during each request's period, and for a department admin each
        request's verdict (``core.rows``: read once per page, from the requests themselves)."""
        self._in_period = granted_in_request_periods(objects)
        histories = review_history.histories([review_history.ask_of(o) for o in objects])
        self._histories = {o.pk: h for o, h in zip(objects, histories, strict=True)}
        self._delegations = {}
        user = self.context["request"].user
        if is_portal_admin(user):
            return
        requests = QuotaRequest.objects.filter(pk__in=[o.pk for o in objects]).select_related(
            "team", "cluster"
        )
        for quota_request in requests:
            verdict = delegation(reviewer=user, quota_request=quota_request)
            self._delegations[quota_request.pk] = {
                "allowed": verdict.allowed,
                "reason": verdict.reason,
            }

    def _granted_in_period(self, quota_request) -> GrantedInPeriod:
        """The page's figures; read here for a request serialized outside a page."""
        in_period = getattr(self, "_in_period", None)
        if in_period is None or quota_request.pk not in in_period:
            return granted_in_request_periods([quota_request])[quota_request.pk]
        return in_period[quota_request.pk]

    @extend_schema_field(GrantHistorySerializer(allow_null=True))
    def get_history(self, quota_request) -> dict | None:
        """The page's histories; read here for a request serialized outside a page."""
        histories = getattr(self, "_histories", None)
        if histories is None or quota_request.pk not in histories:
            (history,) = review_history.histories([review_history.ask_of(quota_request)])
        else:
            history = histories[quota_request.pk]
        return None if history is None else grant_history_data(history)

    @extend_schema_field(DelegationSerializer(allow_null=True))
    def get_delegation(self, quota_request) -> dict | None:
        delegations = getattr(self, "_delegations", None)
        return delegations.get(quota_request.pk) if delegations else None

    # Read once per page rather than per row: the context's figures, and each GPU kind's model
    # rows (the same for every request of the kind).
    @cached_property
    def _capacity(self) -> dict:
        return self.context["capacity"]

    @cached_property
    def _model_capacity(self) -> dict:
        return self.context["model_capacity"]

    @cached_property
    def _model_rows(self) -> dict[tuple[int, str], list[dict]]:
        return {key: model_rows(summaries) for key, summaries in self._model_capacity.items()}

    @extend_schema_field(GpuModelCapacitySerializer(many=True))
    def get_gpu_models(self, quota_request: QuotaRequest) -> list[dict]:
        rows = self._model_rows.get((quota_request.cluster_id, quota_request.gpu_resource))
        return list(rows) if rows else []

    @extend_schema_field(ReviewCapacitySerializer(allow_null=True))
    def get_model_capacity(self, quota_request: QuotaRequest) -> dict[str, int] | None:
        gpu_model = quota_request.gpu_model
        if not gpu_model:
            return None
        models = self._model_capacity.get((quota_request.cluster_id, quota_request.gpu_resource))
        summary = next((m for m in models or () if m.gpu_model == gpu_model), None)
        return _figures(
            summary,
            gpus=quota_request.gpus,
            granted_in_period=self._granted_in_period(quota_request).model,
        )

    @extend_schema_field(ReviewCapacitySerializer)
    def get_capacity(self, quota_request: QuotaRequest) -> dict[str, int]:
        summary = self._capacity.get((quota_request.cluster_id, quota_request.gpu_resource))
        return _figures(
            summary,
            gpus=quota_request.gpus,
            # No figures for the kind: nothing counted in the period either.
            granted_in_period=self._granted_in_period(quota_request).kind if summary else 0,
        )


def _figures(summary, *, gpus: int, granted_in_period: int) -> dict[str, int]:
    """A request's figures for its GPU kind or model; zeros for one the cluster lacks."""
    if summary is None:
        return {
            "capacity": 0,
            "plannable": 0,
            "granted": 0,
            "free": 0,
            "granted_in_period": granted_in_period,
            "free_after": -granted_in_period - gpus,
        }
    return {
        "capacity": summary.capacity,
        "plannable": summary.plannable,
        "granted": summary.granted,
        "free": summary.free,
        "granted_in_period": granted_in_period,
        "free_after": summary.free_after(gpus=gpus, granted_in_period=granted_in_period),
    }
