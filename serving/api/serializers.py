"""Shapes of the service API's JSON. Bodies are read by ``serving.specs`` into one request
object each (a deploy's ``DeployRequest``, a new revision's ``RevisionRequest`` laid over the
running one's, weights, a split, variants), the place the API and the pages' forms share, so
one 400 names every bad field. The fields declared here describe the bodies in the OpenAPI
schema; the team's and the cluster's rules are ``serving.admission``'s."""

from collections.abc import Mapping

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from clusters.vocabulary import DEFAULT_GPU_RESOURCE, team_domain
from serving import admission, selectors, specs, traffic
from serving.models import InferenceService, Revision
from serving.observe import rollout_progress
from serving.specs import RevisionRequest
from workloads.api.serializers import EnvVarSerializer, TeamClusterFields
from workloads.images import MAX_IMAGE_LENGTH
from workloads.specs import MAX_GPUS_PER_POD, Errors, read_whole

LIST_FIELD = serializers.ListField(
    child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False
)


class SidecarSerializer(serializers.Serializer):
    """A CPU-only container beside the model server (the seed's preprocessor): no GPUs."""

    image = serializers.CharField(max_length=MAX_IMAGE_LENGTH)
    command = serializers.ListField(child=serializers.CharField(), required=False)
    args = serializers.ListField(child=serializers.CharField(), required=False)
    env = EnvVarSerializer(many=True, required=False)
    cpu_cores = serializers.DecimalField(
        max_digits=7, decimal_places=2, required=False, allow_null=True
    )
    memory_gib = serializers.DecimalField(
        max_digits=8, decimal_places=2, required=False, allow_null=True
    )


class RevisionSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    env = EnvVarSerializer(many=True, read_only=True)
    command = serializers.ListField(child=serializers.CharField(), read_only=True)
    args = serializers.ListField(child=serializers.CharField(), read_only=True)
    sidecar = SidecarSerializer(read_only=True, allow_null=True)
    annotations = serializers.DictField(child=serializers.CharField(), read_only=True)
    pods = serializers.ListField(child=serializers.CharField(), read_only=True)
    nodes = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = Revision
        fields = [
            "number",
            "role",
            "variant",
            "weight",
            "replicas",
            "desired_replicas",
            "current_replicas",
            "ready_replicas",
            "reason",
            "message",
            "pods",
            "nodes",
            *specs.REVISION_KEYS,
            "created_by",
            "created_at",
            "retired_at",
            "observed_at",
        ]
        read_only_fields = fields


class TrafficShareSerializer(serializers.Serializer):
    revision = serializers.IntegerField()
    weight = serializers.IntegerField(help_text="The share asked for, %.")
    replicas = serializers.IntegerField(help_text="Replicas the portal runs for it.")
    share = serializers.FloatField(
        help_text="The share that results, %: the weight over HTTPRoute weights, the replica "
        "share behind one Service."
    )


class ReconcileSerializer(serializers.Serializer):
    status = serializers.CharField()
    last_error = serializers.CharField(allow_blank=True)
    last_applied_at = serializers.DateTimeField(allow_null=True)
    last_reconciled_at = serializers.DateTimeField(allow_null=True)


class InferenceServiceSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    routing = serializers.SerializerMethodField()
    traffic = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    endpoint = serializers.SerializerMethodField()
    hostname = serializers.SerializerMethodField(
        help_text="Where the cluster's gateway answers for it (its HTTPRoute's hostname, in the "
        "team's domain); empty without the Gateway API."
    )
    gpus_held = serializers.SerializerMethodField()
    reconcile = serializers.SerializerMethodField()
    revisions = serializers.SerializerMethodField()

    class Meta:
        model = InferenceService
        fields = [
            "id",
            "name",
            "team",
            "cluster",
            "state",
            "rollout",
            "routing",
            "traffic",
            "progress",
            "endpoint",
            "hostname",
            "gpus_held",
            "reconcile",
            "created_by",
            "created_at",
            "stopped_at",
            "deleted_at",
            "revisions",
        ]
        read_only_fields = fields

    def _live(self, service: InferenceService) -> list[Revision]:
        return selectors.live_revisions(service)

    def get_routing(self, service: InferenceService) -> str:
        return selectors.service_routing(service)

    @extend_schema_field(TrafficShareSerializer(many=True))
    def get_traffic(self, service: InferenceService) -> list[dict]:
        shares = traffic.plan(
            self._live(service),
            routing=selectors.service_routing(service),
            stopped=service.state != InferenceService.State.ACTIVE,
        )
        return [
            {"revision": s.number, "weight": s.weight, "replicas": s.replicas, "share": s.share}
            for s in shares
        ]

    def get_progress(self, service: InferenceService) -> str:
        return rollout_progress(
            rollout=service.rollout, state=service.state, revisions=self._live(service)
        )

    def get_endpoint(self, service: InferenceService) -> str:
        """Its in-cluster address (no traffic is served on the devcluster)."""
        live = self._live(service)
        port = live[0].port if live else 0
        return f"{service.name}.{service.team.slug}.svc:{port}" if port else ""

    def get_hostname(self, service: InferenceService) -> str:
        if selectors.service_routing(service) != traffic.GATEWAY_API:
            return ""
        return f"{service.name}.{team_domain(service.team.slug, service.cluster.apps_domain)}"

    def get_gpus_held(self, service: InferenceService) -> int:
        if service.state != InferenceService.State.ACTIVE:
            return 0
        return traffic.gpus_held(self._live(service), routing=selectors.service_routing(service))

    @extend_schema_field(ReconcileSerializer)
    def get_reconcile(self, service: InferenceService) -> dict:
        return {
            "status": service.status,
            "last_error": service.last_error,
            "last_applied_at": service.last_applied_at,
            "last_reconciled_at": service.last_reconciled_at,
        }

    @extend_schema_field(RevisionSerializer(many=True))
    def get_revisions(self, service: InferenceService) -> list[dict]:
        """Every revision, newest first."""
        revisions = sorted(service.revisions.all(), key=lambda r: -r.number)
        return RevisionSerializer(revisions, many=True).data


def refused(errors: Errors) -> serializers.ValidationError:
    """One 400 naming every bad field, each with a list of messages."""
    return serializers.ValidationError(
        {key: value if isinstance(value, list) else [value] for key, value in errors.items()}
    )


def _mapping(data, error_messages) -> Mapping:
    if not isinstance(data, Mapping):
        message = error_messages["invalid"].format(datatype=type(data).__name__)
        raise serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [message]})
    return data


class RevisionFieldsSerializer(serializers.Serializer):
    """A revision's spec as the API takes it (every field, for a new service; any of them, for
    a new revision, which keeps the rest of the running revision's)."""

    image = serializers.CharField(max_length=MAX_IMAGE_LENGTH, required=False)
    command = LIST_FIELD
    args = LIST_FIELD
    env = EnvVarSerializer(many=True, required=False)
    cpu_cores = serializers.DecimalField(
        max_digits=7, decimal_places=2, required=False, allow_null=True
    )
    memory_gib = serializers.DecimalField(
        max_digits=8, decimal_places=2, required=False, allow_null=True
    )
    gpus = serializers.IntegerField(
        min_value=1, max_value=MAX_GPUS_PER_POD, required=False, help_text="GPUs per replica."
    )
    gpu_resource = serializers.CharField(required=False, default=DEFAULT_GPU_RESOURCE)
    gpu_model = serializers.CharField(required=False, allow_blank=True)
    port = serializers.IntegerField(min_value=1, max_value=specs.MAX_PORT, required=False)
    probe = serializers.ChoiceField(
        choices=Revision.Probe.choices, required=False, help_text="Readiness: http or tcp."
    )
    probe_path = serializers.CharField(
        required=False, help_text="The readiness probe's HTTP path, starting with '/'."
    )
    sidecar = SidecarSerializer(required=False, allow_null=True)
    annotations = serializers.DictField(
        child=serializers.CharField(allow_blank=True), required=False
    )

    def read(self, data: Mapping, errors: Errors) -> dict:
        """The validated values from ``data``, each bad field named in ``errors``."""
        raise NotImplementedError

    def to_internal_value(self, data):
        data = _mapping(data, self.error_messages)
        errors: Errors = {}
        values = self.read(data, errors)
        if errors:
            raise refused(errors)
        return values


class ServiceCreateSerializer(RevisionFieldsSerializer, TeamClusterFields):
    """A new service. Validated data: ``team``, ``cluster`` and ``request`` (a
    ``DeployRequest``)."""

    name = serializers.CharField(
        max_length=specs.MAX_SERVICE_NAME_LENGTH,
        help_text="A DNS label: its Kubernetes Service's name.",
    )
    image = serializers.CharField(max_length=MAX_IMAGE_LENGTH)
    gpus = serializers.IntegerField(
        min_value=1, max_value=MAX_GPUS_PER_POD, help_text="GPUs per replica."
    )
    port = serializers.IntegerField(min_value=1, max_value=specs.MAX_PORT)
    replicas = serializers.IntegerField(min_value=1, max_value=specs.MAX_REPLICAS, default=1)

    def read(self, data: Mapping, errors: Errors) -> dict:
        return self.read_request(data, errors, parse=admission.parse_deploy_request, key="request")


class NewRevisionSerializer(RevisionFieldsSerializer):
    """A new revision's changes (``context["service"]``: the service, whose stable revision's
    spec they are laid over). Validated data: ``request`` (a ``RevisionRequest``)."""

    def base(self) -> RevisionRequest:
        service = self.context["service"]
        stable = next(
            r for r in selectors.live_revisions(service) if r.role == Revision.Role.STABLE
        )
        return RevisionRequest.from_model(stable)

    def read(self, data: Mapping, errors: Errors) -> dict:
        try:
            return {"request": admission.parse_revision_changes(data, base=self.base())}
        except DjangoValidationError as error:
            errors.update(error.message_dict)
            return {}


class CanarySerializer(NewRevisionSerializer):
    weight = serializers.IntegerField(
        min_value=1, max_value=99, help_text="The canary's share of the traffic, %."
    )
    replicas = serializers.IntegerField(
        min_value=1, max_value=specs.MAX_REPLICAS, required=False, help_text="Default 1."
    )

    def read(self, data: Mapping, errors: Errors) -> dict:
        values = super().read(data, errors)
        values["weight"] = specs.read_weight(data.get("weight"), errors=errors)
        if data.get("replicas") is not None:
            values["replicas"] = specs.read_replicas(data.get("replicas"), errors=errors)
        return values


class VariantSerializer(serializers.Serializer):
    name = serializers.CharField()
    weight = serializers.IntegerField(min_value=0, max_value=100)


class AbTestSerializer(NewRevisionSerializer):
    variants = VariantSerializer(
        many=True,
        help_text="Two variants, the running revision first, the new one second; weights add "
        "up to 100.",
    )
    replicas = serializers.IntegerField(
        min_value=1,
        max_value=specs.MAX_REPLICAS,
        required=False,
        help_text="The second variant's replicas (default: as many as the first).",
    )

    def read(self, data: Mapping, errors: Errors) -> dict:
        values = super().read(data, errors)
        values["variants"] = specs.read_variants(data.get("variants"), errors=errors)
        if data.get("replicas") is not None:
            values["replicas"] = specs.read_replicas(data.get("replicas"), errors=errors)
        return values


class SplitItemSerializer(serializers.Serializer):
    revision = serializers.IntegerField()
    weight = serializers.IntegerField(min_value=0, max_value=100)


class TrafficSerializer(serializers.Serializer):
    """``context["service"]``: whose live revisions the split covers."""

    split = SplitItemSerializer(many=True, help_text="A weight per live revision, adding to 100.")

    def to_internal_value(self, data):
        data = _mapping(data, self.error_messages)
        errors: Errors = {}
        live = {r.number for r in selectors.live_revisions(self.context["service"])}
        split = specs.read_split(data.get("split"), errors=errors, live=live)
        if errors:
            raise refused(errors)
        return {"split": split}


class ScaleSerializer(serializers.Serializer):
    replicas = serializers.IntegerField(min_value=1, max_value=specs.MAX_REPLICAS)
    revision = serializers.IntegerField(
        required=False, help_text="A live revision's number (default: the stable one)."
    )

    def to_internal_value(self, data):
        data = _mapping(data, self.error_messages)
        errors: Errors = {}
        values = {"replicas": specs.read_replicas(data.get("replicas"), errors=errors)}
        if data.get("revision") is not None:
            values["revision"] = read_whole(
                data.get("revision"),
                errors=errors,
                key="revision",
                low=1,
                high=10**9,
                what="Revision",
            )
        if errors:
            raise refused(errors)
        return values


class PromoteSerializer(serializers.Serializer):
    variant = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="In an A/B test, the variant that wins (default: the second).",
    )


class RollbackSerializer(serializers.Serializer):
    revision = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="With no rollout under way: the earlier revision to go back to (default: "
        "the one before the stable).",
    )
