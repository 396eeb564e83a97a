"""The widgets ``PythonWidgetRenderer`` writes in Python come out exactly as Django's templates
write them, whatever their values and attributes; the others are left to their templates."""

import datetime

import pytest
from django import forms
from django.conf import settings
from django.forms.renderers import DjangoTemplates
from django.utils.safestring import mark_safe

from core import form_rendering
from core.form_rendering import PythonWidgetRenderer

NASTY = "a < b & \"c\" 'd' <script>alert(1)</script> ü 🚀"

CHOICES = [("", "All"), ("a", "Alpha & co"), (1, "One"), ("<b>", NASTY)]
GROUPED = [("Letters", [("a", "A"), ("b", "B <b>")]), ("Numbers", [(1, "1"), (2.5, "2.5")])]


class Everything(forms.Form):
    text = forms.CharField(max_length=20, help_text="Help.")
    optional = forms.CharField(required=False, disabled=True)
    number = forms.IntegerField(min_value=0, max_value=10)
    decimal = forms.DecimalField(max_digits=5, decimal_places=2)
    email = forms.EmailField()
    url = forms.URLField(assume_scheme="https")
    password = forms.CharField(widget=forms.PasswordInput(render_value=True))
    hidden = forms.CharField(widget=forms.HiddenInput)
    day = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))
    moment = forms.DateTimeField()
    flag = forms.BooleanField(required=False)
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "placeholder": NASTY}))
    choice = forms.ChoiceField(choices=CHOICES)
    grouped = forms.ChoiceField(choices=GROUPED)
    several = forms.MultipleChoiceField(choices=CHOICES, required=False)
    odd_attrs = forms.CharField(
        widget=forms.TextInput(attrs={"data-on": True, "data-off": False, "data-zero": 0})
    )
    radio = forms.ChoiceField(choices=CHOICES, widget=forms.RadioSelect)
    ticks = forms.MultipleChoiceField(choices=CHOICES, widget=forms.CheckboxSelectMultiple)
    split = forms.SplitDateTimeField()


VALUES = [
    {},  # unbound: initial values, none
    {
        "text": NASTY,
        "optional": "x",
        "number": "7",
        "decimal": "3.14",
        "email": "a@example.com",
        "url": "example.com/<x>",
        "password": "s3cret&",
        "hidden": NASTY,
        "day": "2026-12-02",
        "moment": "2026-12-02 10:00",
        "flag": "on",
        "note": NASTY + "\nsecond line",
        "choice": "<b>",
        "grouped": "2.5",
        "several": ["a", "1"],
        "odd_attrs": "",
        "radio": "a",
        "ticks": ["a"],
        "split_0": "2026-12-02",
        "split_1": "10:00",
    },
    {"number": "not a number", "several": ["zzz"], "flag": "", "note": ""},
]


def rendered(form: forms.Form, renderer) -> dict[str, str]:
    form.renderer = renderer
    return {name: str(form[name]) for name in form.fields}


@pytest.mark.parametrize("data", VALUES, ids=["unbound", "bound", "invalid"])
def test_each_widget_comes_out_as_its_template_writes_it(data):
    initial = {"day": datetime.date(2026, 1, 2), "text": mark_safe("<em>safe</em>"), "number": 3}
    form = Everything(data or None, initial=initial)

    python = rendered(form, PythonWidgetRenderer())
    templates = rendered(form, DjangoTemplates())

    assert python == templates


def test_the_common_widgets_are_written_in_python_and_the_others_left_to_templates():
    renderer = PythonWidgetRenderer()
    form = Everything()
    form.renderer = renderer
    for name in form.fields:
        str(form[name])

    written = {name for name, writer in renderer._writers.items() if writer is not None}
    assert {
        "django/forms/widgets/text.html",
        "django/forms/widgets/number.html",
        "django/forms/widgets/textarea.html",
        "django/forms/widgets/select.html",
        "django/forms/widgets/checkbox.html",
    } <= written
    assert "django/forms/widgets/radio.html" not in written


def test_a_template_it_does_not_know_is_rendered_as_a_template(monkeypatch):
    renderer = PythonWidgetRenderer()
    monkeypatch.setitem(
        form_rendering.KNOWN_SOURCES, "django/forms/widgets/textarea.html", "something else"
    )
    form = Everything({"note": "x"})
    form.renderer = renderer

    assert str(form["note"]) == str(Everything({"note": "x"})["note"])
    assert renderer._writers["django/forms/widgets/textarea.html"] is None


def test_the_portal_renders_forms_with_it():
    assert settings.FORM_RENDERER == "core.form_rendering.PythonWidgetRenderer"
