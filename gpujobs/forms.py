"""The job pages' forms. The job form turns what was typed into a ``JobRequest`` (its fields'
shapes are checked by ``JobRequest.parse``, as for the API; the team's and the cluster's rules
by ``admission`` and ``services.job_submit``), and their errors come back beside the fields
they name.

Command, arguments and the preprocessor's lists are typed one item per line: each line is one
argument as it is, never split or interpreted by a shell.
"""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from clusters.models import Cluster
from gpujobs import admission, selectors
from gpujobs.models import GpuJob
from gpujobs.specs import PRIORITY_HELP, JobRequest, PreprocessMode
from tenants.models import Team

# Request field -> the form field its errors belong to.
REQUEST_FIELDS = {
    "max_runtime_seconds": "max_runtime_minutes",
    "preprocess": "preprocess_image",
}


def lines(text: str) -> list[str]:
    """One list item per line; a trailing newline does not make an empty item."""
    items = text.replace("\r\n", "\n").split("\n")
    while items and items[-1] == "":
        items.pop()
    return items


def env_pairs(text: str) -> list[dict]:
    pairs = []
    for number, line in enumerate(lines(text), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise ValidationError(f"Line {number}: write NAME=value.")
        pairs.append({"name": name.strip(), "value": value})
    return pairs


def add_job_errors(
    form: forms.Form, error: ValidationError, fields: dict[str, str] = REQUEST_FIELDS
) -> None:
    """A request's or a service's ValidationError on the form, each message beside its
    field (``fields``: a request field -> the form field its errors belong to)."""
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for key, messages in error.message_dict.items():
        field = fields.get(key, key)
        if field not in form.fields:
            messages = [f"{key.replace('_', ' ').capitalize()}: {m}" for m in messages]
            field = None
        for message in messages:
            form.add_error(field, message)


def parse_request(form: forms.Form, parse, add_errors=add_job_errors):
    """What ``parse`` (the app's ``admission.parse_*_request``) makes of a valid form's
    ``request_data()`` for its team and cluster; None when it refuses, its errors on the form
    (by ``add_errors``)."""
    data = form.cleaned_data
    try:
        return parse(form.request_data(), team=data["team"], cluster=data["cluster"])
    except ValidationError as error:
        add_errors(form, error)
        return None


class ListField(forms.CharField):
    widget = forms.Textarea(attrs={"rows": 3, "spellcheck": "false"})

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("strip", False)
        super().__init__(**kwargs)


def number_input(**attrs) -> forms.NumberInput:
    """The browser's hint of a bound; ``JobRequest.parse`` checks it."""
    return forms.NumberInput(attrs=attrs)


def amount_field(label: str) -> forms.DecimalField:
    """An optional amount of a container's CPU cores or memory (GiB); the request's parse
    checks its bounds."""
    return forms.DecimalField(label=label, required=False, widget=number_input(min=0, step="0.01"))


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
            self.job_request = parse_request(self, admission.parse_job_request)
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


def gpu_container_data(data: dict) -> dict:
    """A form's GPU container (image, lists, environment, GPUs, CPU and memory) from its
    cleaned data, in the shape of the API's body."""
    return {
        "image": data["image"],
        "command": lines(data["command"]),
        "args": lines(data["args"]),
        "env": data["env"],
        "gpus": data["gpus"],
        "gpu_model": data.get("gpu_model") or "",
        "cpu_cores": data.get("cpu_cores"),
        "memory_gib": data.get("memory_gib"),
    }


def gpu_model_choices(cluster: Cluster | None) -> list[tuple[str, str]]:
    models = selectors.gpu_models(cluster) if cluster is not None else []
    return [("", "Any GPU model"), *((m, m) for m in models)]


def cluster_by_id(raw: str) -> Cluster | None:
    """The cluster a select (or a query parameter) names by its id; None for anything else
    (``str.isdigit`` alone would pass digits such as "²" that no id is, and too many)."""
    if not (raw.isascii() and raw.isdigit() and len(raw) < 19):
        return None
    return Cluster.objects.filter(pk=raw).first()


def offer_gpu_models(form: forms.Form, cluster: Cluster | None) -> None:
    """The form's GPU model choices: those of ``cluster``, else of the cluster a bound form
    chose, else of the first cluster (the one its cluster select shows first)."""
    if cluster is None and form.is_bound:
        cluster = cluster_by_id(form.data.get(form.add_prefix("cluster"), ""))
    if cluster is None:
        cluster = Cluster.objects.order_by("name").first()
    form.fields["gpu_model"].choices = gpu_model_choices(cluster)
