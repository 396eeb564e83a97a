"""Forms for the portal's pages. They parse and shape input; the rules live in ``services``.

A service's ``ValidationError`` names fields by the same keys these forms use, so
``add_service_errors`` puts each message next to the field it is about.
"""

import re

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity, QuotaMode
from core.validators import MAX_NOTE_LENGTH, MAX_TEXT_LENGTH
from tenants.cluster_settings import MAX_ALLOWED_REGISTRIES, MAX_REGISTRY_ENTRY_LENGTH


class DateInput(forms.DateInput):
    input_type = "date"

    def __init__(self, attrs=None):
        super().__init__(attrs=attrs, format="%Y-%m-%d")


def add_service_errors(form: forms.Form, error: ValidationError) -> None:
    """Show a service's ValidationError on the form: keyed messages beside their field, the
    rest (``non_field_errors``, keys the form has no field for) at the top of the form."""
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for field, messages in error.message_dict.items():
        target = field if field in form.fields else None
        if target is None and field not in ("non_field_errors", "__all__"):
            messages = [f"{field.replace('_', ' ').capitalize()}: {m}" for m in messages]
        for message in messages:
            form.add_error(target, message)


def gpu_kind_choices(cluster: Cluster | None = None) -> list[tuple[str, str]]:
    """GPU kinds to choose from: those the cluster offers, or those any cluster offers."""
    capacities = GpuCapacity.objects.order_by("resource_name", "cluster__name")
    if cluster is not None:
        capacities = capacities.filter(cluster=cluster)
    labels: dict[str, list[str]] = {}
    for resource_name, gpu_model in capacities.values_list("resource_name", "gpu_model"):
        models = labels.setdefault(resource_name, [])
        if gpu_model and gpu_model not in models:
            models.append(gpu_model)
    return [
        (name, f"{name} ({', '.join(models)})" if models else name)
        for name, models in labels.items()
    ]


ANY_MODEL = ("", "Any model")


def gpu_model_choices(cluster: Cluster | None = None) -> list[tuple[str, str]]:
    """GPU models to choose from, after "any model": those the cluster's nodes carry (with how
    many GPUs of each it has), or those of any cluster."""
    rows = GpuModelCapacity.objects.order_by("gpu_model", "resource_name")
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    gpus: dict[str, int] = {}
    for model, allocatable in rows.values_list("gpu_model", "allocatable"):
        gpus[model] = gpus.get(model, 0) + allocatable
    if cluster is None:
        return [ANY_MODEL, *((model, model) for model in gpus)]
    return [ANY_MODEL, *((model, f"{model} ({count} GPUs)") for model, count in gpus.items())]


class QuotaRequestForm(forms.Form):
    cluster = forms.ModelChoiceField(
        queryset=Cluster.objects.filter(gpu_capacities__isnull=False).distinct(),
        empty_label=None,
    )
    gpu_resource = forms.ChoiceField(label="GPU kind")
    gpu_model = forms.ChoiceField(
        label="GPU model",
        required=False,
        help_text="A model of the cluster's GPUs, or any: quota of any model counts against the "
        "cluster's total only.",
    )
    gpus = forms.IntegerField(label="GPUs", widget=forms.NumberInput(attrs={"min": 1}))
    cpu_cores = forms.DecimalField(
        label="CPU cores",
        required=False,
        # The column's shape; the range is the service's rule.
        max_digits=8,
        decimal_places=2,
    )
    memory_gib = forms.IntegerField(label="Memory (GiB)", required=False)
    starts_on = forms.DateField(label="Start date", widget=DateInput())
    ends_on = forms.DateField(
        label="End date",
        required=False,
        widget=DateInput(),
        help_text="Leave empty for open-ended quota.",
    )
    justification = forms.CharField(
        max_length=MAX_TEXT_LENGTH,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="What will the GPUs be used for?",
    )

    def __init__(self, *args, cluster: Cluster | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            self.initial.setdefault("starts_on", timezone.localdate())
            if cluster is None:
                cluster = self.fields["cluster"].queryset.first()
            if cluster is not None:
                self.initial.setdefault("cluster", cluster.pk)
        # An unbound form offers the chosen cluster's kinds; a submitted one accepts any kind a
        # cluster offers, so a kind the chosen cluster lacks gets the service's precise message.
        self.fields["gpu_resource"].choices = gpu_kind_choices(None if self.is_bound else cluster)
        self.fields["gpu_model"].choices = gpu_model_choices(None if self.is_bound else cluster)
        self.fields["cluster"].widget.attrs["aria-controls"] = "id_gpu_resource id_gpu_model"


class ApproveForm(forms.Form):
    gpus = forms.IntegerField(
        label="GPUs to grant",
        required=False,
        widget=forms.NumberInput(attrs={"min": 1}),
        help_text="Leave empty to grant what was asked.",
    )
    ends_on = forms.DateField(
        label="Grant until",
        required=False,
        widget=DateInput(),
        help_text="Leave empty to keep the requested end.",
    )
    note = forms.CharField(
        required=False, max_length=MAX_NOTE_LENGTH, widget=forms.Textarea(attrs={"rows": 2})
    )


class RejectForm(forms.Form):
    # The service requires the note and says why; the browser's check spares a round trip.
    note = forms.CharField(
        required=False,
        max_length=MAX_NOTE_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2, "required": True}),
        help_text="Required: tell the team why.",
    )


class BulkDecisionForm(forms.Form):
    """Approve or reject the requests ticked on a page of the review queue (at most a page's
    worth). Requests that are no longer pending are refused one by one by the service."""

    APPROVE, REJECT = "approve", "reject"
    MAX_REQUESTS = 100

    requests = forms.ModelMultipleChoiceField(
        queryset=None,
        widget=forms.MultipleHiddenInput,
        error_messages={"required": "Tick the requests to decide."},
    )
    decision = forms.ChoiceField(choices=[(APPROVE, "Approve"), (REJECT, "Reject")])
    note = forms.CharField(
        required=False,
        max_length=MAX_NOTE_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Sent with every decision; required to reject.",
    )

    def __init__(self, *args, requests, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["requests"].queryset = requests

    def clean_requests(self):
        chosen = self.cleaned_data["requests"]
        if len(chosen) > self.MAX_REQUESTS:
            raise ValidationError(f"Decide at most {self.MAX_REQUESTS} requests at once.")
        return chosen


class RevokeForm(forms.Form):
    note = forms.CharField(
        required=False, max_length=MAX_NOTE_LENGTH, widget=forms.Textarea(attrs={"rows": 2})
    )


class ShrinkForm(forms.Form):
    gpus = forms.IntegerField(
        label="GPUs", required=False, widget=forms.NumberInput(attrs={"min": 1})
    )
    ends_on = forms.DateField(label="End date", required=False, widget=DateInput())
    note = forms.CharField(
        required=False, max_length=MAX_NOTE_LENGTH, widget=forms.Textarea(attrs={"rows": 2})
    )


class QueuePolicyForm(forms.Form):
    """A team's queue policy on one cluster. Empty limits mean none; the ranges are the
    service's rules (tenants.queueing)."""

    borrowing_limit = forms.IntegerField(
        label="Borrowing limit (GPUs per model)",
        required=False,
        widget=forms.NumberInput(attrs={"min": 0}),
        help_text="How many idle GPUs of each model the team's opportunistic jobs may borrow "
        "beyond its quota. Empty: no limit.",
    )
    lending_limit = forms.IntegerField(
        label="Lending limit (GPUs per model)",
        required=False,
        widget=forms.NumberInput(attrs={"min": 0}),
        help_text="How many of its own idle GPUs of each model others may borrow. Empty: all.",
    )
    fair_sharing_weight = forms.DecimalField(
        label="Fair-sharing weight",
        max_digits=7,
        decimal_places=3,
        initial=1,
        help_text="Its share of idle GPUs relative to other teams' weights (above 0).",
    )


class QuotaModeForm(forms.Form):
    quota_mode = forms.ChoiceField(
        label="Quota mode", choices=QuotaMode.choices, widget=forms.RadioSelect
    )
    borrowers_share_by_weight = forms.BooleanField(
        label="Borrowers share idle GPUs by weight",
        required=False,
        help_text="Kueue mode: borrowers preempt one another until the borrowed GPUs are shared "
        "in proportion to their teams' fair-sharing weights. Off: first come, first served; "
        "only a lender taking its GPUs back preempts a borrower.",
    )
    fair_share_half_life_hours = forms.IntegerField(
        label="Half-life of past use (hours)",
        min_value=0,
        help_text="A team's weight for borrowing counts for less the more its opportunistic "
        "jobs used lately, their GPU-hours halved every this many hours. 0: weights alone.",
    )
    fair_share_usage_scale_gpu_hours = forms.IntegerField(
        label="Use that halves a weight (GPU-hours)",
        min_value=1,
        help_text="A team borrows with its weight ÷ (1 + decayed GPU-hours ÷ this).",
    )
    borrower_min_runtime_seconds = forms.IntegerField(
        label="Minimum run time of borrowers (seconds)",
        min_value=0,
        help_text="An opportunistic job is not preempted before it has run this long. 0: off.",
    )
    lender_wait_bound_seconds = forms.IntegerField(
        label="Longest a lender waits (seconds)",
        min_value=1,
        help_text="A lender's guaranteed job waits at most this long for borrowers within their "
        "minimum run time; then they may be preempted.",
    )
    preemption_grace_seconds = forms.IntegerField(
        label="Grace period on preemption (seconds)",
        min_value=0,
        help_text="Between SIGTERM and SIGKILL, for a preempted job to save its work.",
    )


class ClusterRegistriesForm(forms.Form):
    """A cluster's allowed registries, one a line; what an entry may be is the service's rule
    (``tenants.cluster_settings``)."""

    allowed_registries = forms.CharField(
        label="Allowed registries",
        required=False,
        max_length=MAX_ALLOWED_REGISTRIES * (MAX_REGISTRY_ENTRY_LENGTH + 2),
        strip=True,
        widget=forms.Textarea(attrs={"rows": 7, "spellcheck": "false", "autocomplete": "off"}),
        help_text="One a line: a registry host (with a '.' or a port, or localhost), or a path "
        "under one. nvcr.io admits every image there; registry.example.com/vision only that "
        "path and below; docker.io admits all of Docker Hub, docker.io/library only its "
        f"official images. Empty allows none. At most {MAX_ALLOWED_REGISTRIES}.",
    )
    allow_all_registries = forms.BooleanField(
        label="Allow all registries",
        required=False,
        help_text="Images from any registry, whatever the list says.",
    )

    @classmethod
    def for_cluster(cls, cluster: Cluster) -> "ClusterRegistriesForm":
        return cls(
            initial={
                "allowed_registries": "\n".join(cluster.allowed_registries or []),
                "allow_all_registries": cluster.allow_all_registries,
            }
        )

    def clean_allowed_registries(self) -> list[str]:
        # Entries hold no blanks or commas: any of them separates two.
        return [e for e in re.split(r"[\s,]+", self.cleaned_data["allowed_registries"]) if e]
