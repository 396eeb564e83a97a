"""The booking calendar page's forms: which GPUs and days to show, the earliest-window search,
and a booking (a normal quota request). They parse input; the rules live in
``tenants.bookings`` and ``tenants.quota``."""

from __future__ import annotations

from django import forms
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from core.validators import MAX_TEXT_LENGTH
from tenants import bookings
from tenants.forms import DateInput, gpu_kind_choices, gpu_model_choices
from tenants.models import Membership, Team
from tenants.permissions import is_portal_admin


def bookable_clusters() -> QuerySet[Cluster]:
    return Cluster.objects.filter(gpu_capacities__isnull=False).distinct().order_by("name")


def teams_booking_for(user: User | AnonymousUser) -> QuerySet[Team]:
    """Teams the user may request quota for: those they lead (admins: every active team)."""
    teams = Team.objects.filter(archived_at__isnull=True).order_by("slug")
    if is_portal_admin(user):
        return teams
    return teams.filter(memberships__user=user, memberships__role=Membership.Role.LEAD)


class CalendarForm(forms.Form):
    """Which cluster, GPU kind and model, and which days (GET)."""

    cluster = forms.ModelChoiceField(
        queryset=bookable_clusters(), to_field_name="name", required=False, empty_label=None
    )
    gpu_resource = forms.ChoiceField(label="GPU kind", required=False)
    gpu_model = forms.ChoiceField(label="GPU model", required=False)
    start = forms.DateField(label="From", required=False, widget=DateInput())
    end = forms.DateField(
        label="To",
        required=False,
        widget=DateInput(),
        help_text=f"Default: {bookings.DEFAULT_DAYS} days; at most {bookings.MAX_DAYS}.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        name = self.data.get("cluster") if self.is_bound else None
        cluster = (
            bookable_clusters().filter(name=name).first() if name else None
        ) or bookable_clusters().first()
        self.initial.setdefault("cluster", cluster.name if cluster else None)
        self.fields["gpu_resource"].choices = gpu_kind_choices(cluster)
        self.fields["gpu_model"].choices = gpu_model_choices(cluster)
        self.default_cluster = cluster

    def pool(self) -> dict:
        """The chosen cluster, kind and model (the defaults where none was chosen)."""
        data = self.cleaned_data if self.is_bound else {}
        return {
            "cluster": data.get("cluster") or self.default_cluster,
            "gpu_resource": data.get("gpu_resource") or DEFAULT_GPU_RESOURCE,
            "gpu_model": data.get("gpu_model") or "",
        }


class WindowSearchForm(forms.Form):
    """The earliest window for N GPUs for K days (GET, prefixed ``find``)."""

    gpus = forms.IntegerField(label="GPUs", min_value=1, widget=forms.NumberInput(attrs={"min": 1}))
    days = forms.IntegerField(
        label="For how many days",
        min_value=1,
        max_value=bookings.MAX_DAYS,
        widget=forms.NumberInput(attrs={"min": 1, "max": bookings.MAX_DAYS}),
    )


class BookingForm(forms.Form):
    """N GPUs from one day to another for one of the user's teams (POST): a quota request."""

    team = forms.ModelChoiceField(queryset=Team.objects.none(), to_field_name="slug")
    gpus = forms.IntegerField(label="GPUs", widget=forms.NumberInput(attrs={"min": 1}))
    starts_on = forms.DateField(label="From", widget=DateInput())
    ends_on = forms.DateField(label="To (included)", widget=DateInput())
    justification = forms.CharField(
        max_length=MAX_TEXT_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What will the GPUs be used for? An admin reviews every request.",
    )

    def __init__(self, *args, user: User | AnonymousUser, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams_booking_for(user)
