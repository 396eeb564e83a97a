"""The pages' forms: a lead's layout request, and an admin's note on a decision."""

from django import forms

from core.validators import MAX_NOTE_LENGTH, MAX_TEXT_LENGTH
from sharing.layouts import MIG, REPLICAS, profile_choices
from sharing.models import LayoutRequest
from tenants.forms import DateInput
from tenants.models import QuotaGrant


class GrantChoice(forms.ModelChoiceField):
    def label_from_instance(self, grant: QuotaGrant) -> str:
        until = grant.ends_on.isoformat() if grant.ends_on else "open-ended"
        return f"#{grant.pk}: {grant.gpus} × {grant.gpu_model} on {grant.cluster.name} ({until})"


class LayoutForm(forms.Form):
    """Shapes only: ``services.layout_create`` checks the rules and names the bad fields."""

    source_grant = GrantChoice(
        queryset=QuotaGrant.objects.none(),
        label="From grant",
        help_text="An active grant of the team's whole GPUs of one model.",
    )
    gpus = forms.IntegerField(
        label="Whole GPUs to convert", min_value=1, widget=forms.NumberInput(attrs={"min": 1})
    )
    kind = forms.ChoiceField(choices=LayoutRequest.Kind.choices, initial=MIG)
    mig_profile = forms.ChoiceField(
        label="MIG profile", required=False, help_text="MIG only: the slice each GPU is cut into."
    )
    replicas = forms.TypedChoiceField(
        label="Replicas per GPU",
        required=False,
        coerce=int,
        empty_value=None,
        choices=[("", "—"), *((n, str(n)) for n in REPLICAS)],
        help_text="Shared only: pods that share each GPU (no memory isolation).",
    )
    ends_on = forms.DateField(
        label="Until", widget=DateInput(), help_text="The last day; the GPUs are whole again after."
    )
    justification = forms.CharField(
        max_length=MAX_TEXT_LENGTH, widget=forms.Textarea(attrs={"rows": 3})
    )

    def __init__(self, *args, grants, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["source_grant"].queryset = grants
        models = sorted({grant.gpu_model for grant in grants})
        profiles: dict[str, str] = {}
        for model in models:
            for profile, label in profile_choices(model):
                profiles.setdefault(profile, label if len(models) == 1 else profile)
        self.fields["mig_profile"].choices = [("", "—"), *profiles.items()]


class NoteForm(forms.Form):
    note = forms.CharField(
        required=False,
        max_length=MAX_NOTE_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
    )
