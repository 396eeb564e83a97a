"""The service pages' forms. Each turns what was typed into the API's body shape and lets
``serving.specs`` (through ``serving.admission``) check it, as the API does, so a field's error
comes back beside that field; the rules of the team, the cluster and the quota are the
services', whose errors come back the same way.

Lists (command, arguments) are typed one item per line, environment variables one NAME=value
per line, as on the job form (``workloads.forms``, whose field helpers these are).
"""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from clusters.models import Cluster
from serving import admission, specs
from serving.models import InferenceService, Revision
from serving.specs import DeployRequest, RevisionRequest
from tenants.models import Team
from workloads.forms import (
    ListField,
    add_request_errors,
    amount_field,
    env_pairs,
    gpu_container_data,
    gpu_kind_field,
    lines,
    offer_gpu_choices,
    offer_gpu_models,
    parse_request,
)
from workloads.forms import number_input as number

# Request field -> the form field its errors belong to.
REQUEST_FIELDS = {"sidecar": "sidecar_image", "variants": "variant_b", "split": "weight"}


def add_errors(form: forms.Form, error: ValidationError) -> None:
    add_request_errors(form, error, REQUEST_FIELDS)


class SpecFields(forms.Form):
    """A revision's spec as typed; ``spec_data`` gives it in the API's shape."""

    image = forms.CharField(help_text="e.g. registry.example.com/vision/llm-server:2.1")
    command = ListField(help_text="Replaces the image's entrypoint. One argument per line.")
    args = ListField(label="Arguments", help_text="One argument per line.")
    env = ListField(label="Environment", help_text="One NAME=value per line.")
    gpus = forms.IntegerField(label="GPUs per replica", initial=1, widget=number(min=1))
    gpu_resource = gpu_kind_field()
    gpu_model = forms.ChoiceField(label="GPU model", required=False)
    cpu_cores = amount_field("CPU cores")
    memory_gib = amount_field("Memory (GiB)")
    port = forms.IntegerField(
        initial=8000, help_text="The port the model server listens on.", widget=number(min=1)
    )
    probe = forms.ChoiceField(
        label="Readiness probe",
        choices=[
            (specs.ProbeKind.HTTP, "HTTP GET of a path"),
            (specs.ProbeKind.TCP, "TCP connect to the port"),
        ],
        initial=specs.ProbeKind.HTTP,
    )
    probe_path = forms.CharField(
        label="Probe path", required=False, initial="/healthz", help_text="Starts with '/'."
    )

    def __init__(self, *args, cluster: Cluster | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        offer_gpu_choices(self, cluster)

    def clean_env(self):
        return env_pairs(self.cleaned_data["env"])

    def spec_data(self) -> dict:
        data = self.cleaned_data
        return {
            **gpu_container_data(data),
            "port": data["port"],
            "probe": data["probe"],
            "probe_path": data.get("probe_path") or "",
        }


class DeployForm(SpecFields):
    """A new service; a valid form holds it in ``request`` (a ``DeployRequest``)."""

    field_order = ["team", "cluster", "name"]

    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), empty_label=None)
    name = forms.CharField(
        help_text="Lower-case letters, digits and '-': the Kubernetes Service's name."
    )
    replicas = forms.IntegerField(initial=1, widget=number(min=1))
    sidecar_image = forms.CharField(
        label="Sidecar image", required=False, help_text="Optional CPU-only container."
    )
    sidecar_command = ListField(label="Sidecar command")
    sidecar_args = ListField(label="Sidecar arguments")
    sidecar_env = ListField(label="Sidecar environment", help_text="One NAME=value per line.")
    sidecar_cpu_cores = amount_field("Sidecar CPU cores")
    sidecar_memory_gib = amount_field("Sidecar memory (GiB)")

    def __init__(self, *args, teams, cluster: Cluster | None = None, **kwargs):
        super().__init__(*args, cluster=cluster, **kwargs)
        self.request: DeployRequest | None = None
        self.fields["team"].queryset = teams
        if cluster is None:  # ``SpecFields`` offered the given cluster's models
            offer_gpu_models(self, None)

    def clean_sidecar_env(self):
        return env_pairs(self.cleaned_data["sidecar_env"])

    def clean(self):
        data = super().clean()
        if not self.errors:
            self.request = parse_request(self, admission.parse_deploy_request, add_errors)
        return data

    def request_data(self) -> dict:
        data = self.cleaned_data
        body = {**self.spec_data(), "name": data["name"], "replicas": data["replicas"]}
        if (data.get("sidecar_image") or "").strip():
            body["sidecar"] = {
                "image": data["sidecar_image"],
                "command": lines(data["sidecar_command"]),
                "args": lines(data["sidecar_args"]),
                "env": data["sidecar_env"],
                "cpu_cores": data.get("sidecar_cpu_cores"),
                "memory_gib": data.get("sidecar_memory_gib"),
            }
        return body


class RevisionForm(SpecFields):
    """A new revision of a running service, its fields filled with the stable revision's spec:
    rolled out, as a canary at ``weight`` %, or as an A/B test's second variant. A valid form
    holds the spec in ``revision`` (a ``RevisionRequest``, the stable one's sidecar and
    annotations kept)."""

    class How:
        ROLLOUT = "rollout"
        CANARY = "canary"
        AB_TEST = "ab_test"

    how = forms.ChoiceField(
        label="How",
        choices=[
            (How.ROLLOUT, "Roll out (takes over once ready)"),
            (How.CANARY, "Canary (takes a share of the traffic)"),
            (How.AB_TEST, "A/B test (two named variants)"),
        ],
        initial=How.CANARY,
    )
    weight = forms.IntegerField(
        label="Weight of the new revision (%)",
        required=False,
        initial=10,
        widget=number(min=1, max=99),
    )
    variant_a = forms.CharField(label="Running revision's variant name", required=False)
    variant_b = forms.CharField(label="New revision's variant name", required=False)

    def __init__(self, *args, service: InferenceService, base: RevisionRequest, **kwargs):
        super().__init__(*args, cluster=service.cluster, **kwargs)
        self.base = base
        self.revision: RevisionRequest | None = None
        self.variants = None
        if not self.is_bound:
            self.initial.update(_spec_initial(base))

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        errors: dict = {}
        try:
            self.revision = admission.parse_revision_changes(self.spec_data(), base=self.base)
        except ValidationError as error:
            errors.update(error.message_dict)
        how = data["how"]
        if how == self.How.CANARY:
            specs.read_weight(data.get("weight"), errors=errors)
        elif how == self.How.AB_TEST:
            weight = data.get("weight")
            weight = weight if weight is not None else 50
            self.variants = specs.read_variants(
                [
                    {"name": data.get("variant_a") or "", "weight": 100 - weight},
                    {"name": data.get("variant_b") or "", "weight": weight},
                ],
                errors=errors,
            )
        if errors:
            add_errors(self, ValidationError(errors))
        return data


def _spec_initial(base: RevisionRequest) -> dict:
    return {
        "image": base.main.image,
        "command": "\n".join(base.main.command),
        "args": "\n".join(base.main.args),
        "env": "\n".join(f"{name}={value}" for name, value in base.main.env),
        "gpus": base.gpus,
        "gpu_resource": base.gpu_resource,
        "gpu_model": base.gpu_model,
        "cpu_cores": base.main.cpu_cores,
        "memory_gib": base.main.memory_gib,
        "port": base.port,
        "probe": base.probe.kind,
        "probe_path": base.probe.path,
    }


class TrafficForm(forms.Form):
    """The candidate's share (the stable revision takes the rest)."""

    weight = forms.IntegerField(label="Candidate's weight (%)", widget=number(min=0, max=100))


class ScaleForm(forms.Form):
    replicas = forms.IntegerField(widget=number(min=1))
    revision = forms.TypedChoiceField(coerce=int, label="Revision")

    def __init__(self, *args, revisions: list[Revision], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["revision"].choices = [(r.number, r.label) for r in revisions]

    def clean_replicas(self):
        errors: dict = {}
        replicas = specs.read_replicas(self.cleaned_data.get("replicas"), errors=errors)
        if errors:
            raise ValidationError(errors["replicas"])
        return replicas
