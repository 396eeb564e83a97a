"""The session pages' forms. The session form turns what was typed into a ``SessionRequest``
(its fields' shapes are checked by ``SessionRequest.read``, as for the API; the team's and the
cluster's rules by ``interactive.admission`` and ``services.session_start``), and their errors
come back beside the fields they name. The policy form is a team's ``SessionPolicy`` as a lead
types it (its bounds are the model's, checked by ``services.session_policy_set``).

The list's filters are here too while only the page uses them; when the API filters sessions
the same way, ``SessionFilter`` belongs in ``interactive/filtersets.py``, shared by both.
"""

from __future__ import annotations

import django_filters
from django import forms
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from interactive import admission
from interactive.models import HomeVolume, InteractiveSession, SessionPolicy, policy_for
from interactive.specs import SessionRequest
from tenants.filtersets import TeamFilterSet
from tenants.models import Team
from workloads.forms import (
    add_request_errors,
    amount_field,
    gpu_kind_field,
    number_input,
    offer_gpu_models,
)

# Request field -> the form field its errors belong to (the form offers no GPU kind: a refused
# kind is about the GPUs asked for).


def add_session_errors(form: forms.Form, error: ValidationError) -> None:
    """A session request's errors on the session form, each beside its field."""
    add_request_errors(form, error)


class SessionForm(forms.Form):
    """A new session. Empty fields take the portal's defaults (``SessionRequest.read``); a
    valid form holds the request in ``session_request``."""

    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), empty_label=None)
    name = forms.CharField(help_text="A short name, e.g. data-exploration.")
    image = forms.CharField(required=False)
    gpus = forms.IntegerField(
        label="GPUs",
        required=False,
        initial=0,
        help_text="0 for a CPU-only session.",
        widget=number_input(min=0),
    )
    gpu_resource = gpu_kind_field()
    gpu_model = forms.ChoiceField(label="GPU model", required=False)
    cpu_cores = amount_field("CPU cores")
    memory_gib = amount_field("Memory (GiB)")
    max_lifetime_hours = forms.IntegerField(
        label="Maximum lifetime (hours)", required=False, widget=number_input(min=1)
    )
    home_gib = forms.IntegerField(
        label="Home volume (GiB)", required=False, widget=number_input(min=1)
    )

    def __init__(self, *args, teams: QuerySet[Team], user: User, cluster=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.session_request: SessionRequest | None = None
        self.fields["team"].queryset = teams
        offer_gpu_models(self, cluster)
        default_image = settings.SESSIONS_DEFAULT_IMAGE
        self.fields["image"].widget.attrs["placeholder"] = default_image
        self.fields["image"].help_text = (
            f"Empty: the portal's JupyterLab image, {default_image}. Another image must serve "
            "JupyterLab the same way."
        )
        self.fields["cpu_cores"].widget.attrs["placeholder"] = settings.SESSIONS_DEFAULT_CPU_CORES
        self.fields["memory_gib"].widget.attrs["placeholder"] = settings.SESSIONS_DEFAULT_MEMORY_GIB
        default_hours = settings.SESSIONS_DEFAULT_LIFETIME_HOURS
        self.fields["max_lifetime_hours"].widget.attrs["placeholder"] = default_hours
        self.fields["max_lifetime_hours"].help_text = (
            f"Each run stops after this long (empty: {default_hours}); resume it to go on. At "
            f"most your team's maximum: {_team_maxima(teams)}."
        )
        self.fields["home_gib"].widget.attrs["placeholder"] = settings.SESSIONS_DEFAULT_HOME_GIB
        self.fields["home_gib"].help_text = _home_help(user, teams)

    def clean(self):
        data = super().clean()
        if not self.errors:
            request, errors = SessionRequest.read(
                self.request_data(),
                team_max_lifetime_hours=policy_for(data["team"]).max_lifetime_hours,
            )
            if errors:
                # Name the team's and the cluster's refusals too, so one answer shows them all.
                refusals = admission.session_refusals(
                    team=data["team"], cluster=data["cluster"], owner=self.user, request=request
                )
                for key, message in refusals.items():
                    errors.setdefault(key, message)
                add_session_errors(self, ValidationError(errors))
            else:
                self.session_request = request
        return data

    def request_data(self) -> dict:
        """The cleaned data in the shape ``SessionRequest.read`` reads (the API's JSON body,
        team and cluster aside)."""
        data = self.cleaned_data
        return {
            "name": data["name"],
            "image": data.get("image") or "",
            "gpus": data.get("gpus"),
            "gpu_resource": data.get("gpu_resource") or DEFAULT_GPU_RESOURCE,
            "gpu_model": data.get("gpu_model") or "",
            "cpu_cores": data.get("cpu_cores"),
            "memory_gib": data.get("memory_gib"),
            "max_lifetime_hours": data.get("max_lifetime_hours"),
            "home_gib": data.get("home_gib"),
        }


# The most teams whose maximum lifetime the form's help text names.
MAX_TEAMS_NAMED = 10


def _team_maxima(teams: QuerySet[Team]) -> str:
    named = [
        f"{team.name} {policy_for(team).max_lifetime_hours} h" for team in teams[:MAX_TEAMS_NAMED]
    ]
    return ", ".join(named) or f"{settings.SESSIONS_MAX_LIFETIME_HOURS} h"


def _home_help(user: User, teams: QuerySet[Team]) -> str:
    text = (
        "Your home volume, mounted by every session of yours in the team on the cluster and "
        "kept when they stop. Its size is asked for only the first time (empty: "
        f"{settings.SESSIONS_DEFAULT_HOME_GIB} GiB), within the team's storage quota."
    )
    homes = (
        HomeVolume.objects.filter(owner=user, team__in=teams)
        .select_related("team", "cluster")
        .order_by("team__name", "cluster__name")
    )
    existing = [f"{h.size_gib} GiB in {h.team.name} on {h.cluster.name}" for h in homes]
    if existing:
        text += f" You have: {'; '.join(existing)} (kept as it is there)."
    return text


class SessionPolicyForm(forms.Form):
    """A team's session policy as its lead types it; the bounds are the model's, checked by the
    service, whose errors come back beside these fields."""

    max_lifetime_hours = forms.IntegerField(
        label="Maximum lifetime of a run (hours)",
        help_text=SessionPolicy._meta.get_field("max_lifetime_hours").help_text,
        widget=number_input(min=1),
    )
    idle_minutes = forms.IntegerField(
        label="Stop idle sessions after (minutes)",
        help_text=SessionPolicy._meta.get_field("idle_minutes").help_text,
        widget=number_input(min=2),
    )
    warn_minutes = forms.IntegerField(
        label="Warn the owner before (minutes)",
        help_text=SessionPolicy._meta.get_field("warn_minutes").help_text,
        widget=number_input(min=1),
    )


class SessionFilter(TeamFilterSet):
    """The filters of the session list: team by slug, cluster by name, owner by username,
    state."""

    cluster = django_filters.CharFilter(
        field_name="cluster__name", label="Cluster", help_text="Cluster name."
    )
    owner = django_filters.CharFilter(
        field_name="owner__username", label="Owner", help_text="Username of its owner."
    )
    state = django_filters.MultipleChoiceFilter(
        choices=InteractiveSession.State.choices,
        help_text="One or more states (repeat the parameter).",
    )

    class Meta:
        model = InteractiveSession
        fields = ["team", "cluster", "owner", "state"]
