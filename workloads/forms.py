"""The form pieces every workload's pages share: lists typed one item per line (each line one
argument as it is, never split or interpreted by a shell), NAME=value environments, amounts of
CPU and memory, the GPU container's fields in the API's shape, the GPU kinds (whole GPUs, MIG
slices, shared GPUs) and models of a cluster, and a request's errors put beside the fields they
name."""

from __future__ import annotations

from django import forms
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from tenants.forms import gpu_kind_choices
from tenants.models import Membership
from workloads import gpu_kinds
from workloads.models import MAX_LIMIT


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


def add_request_errors(
    form: forms.Form, error: ValidationError, fields: dict[str, str] | None = None
) -> None:
    """A request's or a service's ValidationError on the form, each message beside its
    field (``fields``: a request field -> the form field its errors belong to)."""
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for key, messages in error.message_dict.items():
        field = (fields or {}).get(key, key)
        if field not in form.fields:
            messages = [f"{key.replace('_', ' ').capitalize()}: {m}" for m in messages]
            field = None
        for message in messages:
            form.add_error(field, message)


def parse_request(form: forms.Form, parse, add_errors=add_request_errors):
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
    """The browser's hint of a bound; the request's parse checks it."""
    return forms.NumberInput(attrs=attrs)


def amount_field(label: str) -> forms.DecimalField:
    """An optional amount of a container's CPU cores or memory (GiB); the request's parse
    checks its bounds."""
    return forms.DecimalField(label=label, required=False, widget=number_input(min=0, step="0.01"))


def gpu_container_data(data: dict) -> dict:
    """A form's GPU container (image, lists, environment, GPUs, CPU and memory) from its
    cleaned data, in the shape of the API's body."""
    return {
        "image": data["image"],
        "command": lines(data["command"]),
        "args": lines(data["args"]),
        "env": data["env"],
        "gpus": data["gpus"],
        "gpu_resource": data.get("gpu_resource") or DEFAULT_GPU_RESOURCE,
        "gpu_model": data.get("gpu_model") or "",
        "cpu_cores": data.get("cpu_cores"),
        "memory_gib": data.get("memory_gib"),
    }


def gpu_kind_field() -> forms.ChoiceField:
    """The GPU kind a workload asks for: whole GPUs, a MIG slice or a shared GPU."""
    return forms.ChoiceField(
        label="GPU kind",
        required=False,  # whole GPUs when not given
        help_text="Whole GPUs, a MIG slice or a shared (time-sliced) GPU, as the cluster offers.",
    )


def workload_gpu_kinds(cluster: Cluster | None) -> list[tuple[str, str]]:
    """The kinds the cluster offers (the quota form's choices), whole GPUs always among them
    and first: a cluster whose inventory is not read yet still takes whole-GPU work."""
    offered = gpu_kind_choices(cluster) if cluster is not None else []
    whole = [choice for choice in offered if choice[0] == DEFAULT_GPU_RESOURCE]
    rest = [choice for choice in offered if choice[0] != DEFAULT_GPU_RESOURCE]
    return (whole or [(DEFAULT_GPU_RESOURCE, DEFAULT_GPU_RESOURCE)]) + rest


def gpu_model_choices(cluster: Cluster | None) -> list[tuple[str, str]]:
    models = gpu_kinds.gpu_models(cluster) if cluster is not None else []
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
    offer_gpu_choices(form, cluster)


def offer_gpu_choices(form: forms.Form, cluster: Cluster | None) -> None:
    """The cluster's GPU models, and its GPU kinds where the form asks for one."""
    form.fields["gpu_model"].choices = gpu_model_choices(cluster)
    if "gpu_resource" in form.fields:
        form.fields["gpu_resource"].choices = workload_gpu_kinds(cluster)


class MemberLimitForm(forms.Form):
    """A lead's limit for one member of the team on one cluster (``member_limits``)."""

    user = forms.ModelChoiceField(queryset=None, label="Member", to_field_name="username")
    cluster = forms.ModelChoiceField(
        queryset=Cluster.objects.order_by("name"), to_field_name="name"
    )
    max_gpus = forms.IntegerField(
        label="GPUs at once",
        required=False,
        min_value=0,
        max_value=MAX_LIMIT,
        widget=number_input(min=0),
        help_text="Empty: no limit of GPUs.",
    )
    max_running = forms.IntegerField(
        label="Jobs and sessions at once",
        required=False,
        min_value=0,
        max_value=MAX_LIMIT,
        widget=number_input(min=0),
        help_text="Empty: no limit of running work.",
    )

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["user"].queryset = User.objects.filter(
            memberships__team=team,
            memberships__role__in=[Membership.Role.LEAD, Membership.Role.MEMBER],
        ).order_by("username")
