"""The job pages' forms. The job form turns what was typed into a ``JobRequest`` (its fields'
shapes are checked by ``JobRequest.parse``, as for the API; the team's and the cluster's rules
by ``admission`` and ``services.job_submit``), and their errors come back beside the fields
they name.

Command, arguments and the preprocessor's lists are typed one item per line
(``workloads.forms``).
"""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from clusters.models import Cluster
from gpujobs import admission
from gpujobs.models import GpuJob
from gpujobs.specs import PRIORITY_HELP, JobRequest, PreprocessMode
from tenants.models import Team
from workloads.forms import (
    ListField,
    add_request_errors,
    amount_field,
    env_pairs,
    gpu_container_data,
    gpu_kind_field,
    lines,
    number_input,
    offer_gpu_models,
    parse_request,
)

# Request field -> the form field its errors belong to.
REQUEST_FIELDS = {
    "max_runtime_seconds": "max_runtime_minutes",
    "preprocess": "preprocess_image",
}


class JobForm(forms.Form):
    """A new job. Its fields convert what was typed (lines, NAME=value, minutes); the bounds
    and shapes are ``JobRequest.parse``'s. A valid form holds the request in ``job_request``."""

    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), empty_label=None)
    name = forms.CharField(help_text="A short name, e.g. bert-finetune.")
    image = forms.CharField(help_text="e.g. registry.example.com/vision/trainer:1.4")
    command = ListField(
        help_text="Replaces the image's entrypoint. One argument per line (no shell)."
    )
    args = ListField(label="Arguments", help_text="One argument per line.")
    env = ListField(label="Environment", help_text="One NAME=value per line.")
    gpus = forms.IntegerField(label="GPUs", initial=1, widget=number_input(min=1))
    priority = forms.ChoiceField(
        label="Kind of work",
        choices=GpuJob.Priority.choices,
        initial=GpuJob.Priority.GUARANTEED,
        required=False,  # guaranteed when not given
        help_text=PRIORITY_HELP,
    )
    gpu_resource = gpu_kind_field()
    gpu_model = forms.ChoiceField(label="GPU model", required=False)
    cpu_cores = amount_field("CPU cores")
    memory_gib = amount_field("Memory (GiB)")
    max_runtime_minutes = forms.IntegerField(
        label="Maximum run time (minutes)",
        initial=60,
        help_text="The job is stopped after this long.",
        widget=number_input(min=1),
    )
    backoff_limit = forms.IntegerField(
        label="Retries",
        initial=0,
        help_text="Times a failed pod is tried again.",
        widget=number_input(min=0),
    )
    preprocess_mode = forms.ChoiceField(
        label="Preprocessing container",
        choices=[
            ("", "None"),
            (PreprocessMode.BEFORE, "Runs before the GPU container (init container)"),
            (PreprocessMode.BESIDE, "Runs beside the GPU container"),
        ],
        required=False,
    )
    preprocess_image = forms.CharField(label="Preprocessing image", required=False)
    preprocess_command = ListField(label="Preprocessing command")
    preprocess_args = ListField(label="Preprocessing arguments")
    preprocess_cpu_cores = amount_field("Preprocessing CPU cores")
    preprocess_memory_gib = amount_field("Preprocessing memory (GiB)")

    def __init__(self, *args, teams, cluster: Cluster | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.job_request: JobRequest | None = None
        self.fields["team"].queryset = teams
        offer_gpu_models(self, cluster)

    def clean_env(self):
        return env_pairs(self.cleaned_data["env"])

    def clean(self):
        data = super().clean()
        if data.get("preprocess_mode") and not (data.get("preprocess_image") or "").strip():
            self.add_error("preprocess_image", "Give the preprocessing container's image.")
        if not self.errors:
            self.job_request = parse_request(self, admission.parse_job_request, add_job_errors)
        return data

    def request_data(self) -> dict:
        """The cleaned data in the shape ``JobRequest.parse`` reads (the API's JSON body)."""
        data = self.cleaned_data
        preprocess = None
        if data.get("preprocess_mode"):
            preprocess = {
                "image": data["preprocess_image"],
                "mode": data["preprocess_mode"],
                "command": lines(data["preprocess_command"]),
                "args": lines(data["preprocess_args"]),
                "cpu_cores": data.get("preprocess_cpu_cores"),
                "memory_gib": data.get("preprocess_memory_gib"),
            }
        return {
            "name": data["name"],
            **gpu_container_data(data),
            "max_runtime_seconds": data["max_runtime_minutes"] * 60,
            "backoff_limit": data["backoff_limit"],
            "preprocess": preprocess,
            "priority": data.get("priority") or "",
        }


def add_job_errors(form: forms.Form, error: ValidationError) -> None:
    """A job request's errors on the job form, each beside its field."""
    add_request_errors(form, error, REQUEST_FIELDS)
