"""Form widgets written in Python rather than through a template each.

Django renders every widget (and every option of a select) by rendering a template: a page of
forms spends more time there than in its queries (the review queue's 25 requests, each with an
approve and a reject form, spent two thirds of its time rendering widgets). The common widgets'
templates are a line or two each; ``PythonWidgetRenderer`` writes the same HTML for them in
Python and leaves every other widget to its template.

It writes only a widget whose template it knows, checked against the template's source when it
first meets it: a template changed by a Django upgrade or overridden by a project is rendered as
a template again. ``tests/unit/portal/test_form_rendering.py`` compares both renderings widget by
widget.
"""

from __future__ import annotations

from collections.abc import Callable

from django.forms.renderers import DjangoTemplates
from django.utils.formats import localize
from django.utils.html import conditional_escape
from django.utils.safestring import SafeData

INPUT = "django/forms/widgets/input.html"
ATTRS = "django/forms/widgets/attrs.html"
SELECT_OPTION = "django/forms/widgets/select_option.html"

# Each template written here, as Django 5.2 ships it.
KNOWN_SOURCES = {
    INPUT: (
        '<input type="{{ widget.type }}" name="{{ widget.name }}"{% if widget.value != None %} '
        "value=\"{{ widget.value|stringformat:'s' }}\"{% endif %}"
        '{% include "django/forms/widgets/attrs.html" %}>\n'
    ),
    ATTRS: (
        "{% for name, value in widget.attrs.items %}{% if value is not False %} {{ name }}"
        "{% if value is not True %}=\"{{ value|stringformat:'s' }}\"{% endif %}{% endif %}"
        "{% endfor %}"
    ),
    "django/forms/widgets/textarea.html": (
        '<textarea name="{{ widget.name }}"{% include "django/forms/widgets/attrs.html" %}>\n'
        "{% if widget.value %}{{ widget.value }}{% endif %}</textarea>\n"
    ),
    "django/forms/widgets/select.html": (
        '<select name="{{ widget.name }}"{% include "django/forms/widgets/attrs.html" %}>'
        "{% for group_name, group_choices, group_index in widget.optgroups %}"
        '{% if group_name %}\n  <optgroup label="{{ group_name }}">{% endif %}'
        "{% for option in group_choices %}\n  {% include option.template_name with "
        "widget=option %}{% endfor %}{% if group_name %}\n  </optgroup>{% endif %}{% endfor %}"
        "\n</select>\n"
    ),
    SELECT_OPTION: (
        "<option value=\"{{ widget.value|stringformat:'s' }}\""
        '{% include "django/forms/widgets/attrs.html" %}>{{ widget.label }}</option>\n'
    ),
}
# Widgets whose template is the input's and nothing else.
INPUT_ALIASES = [
    f"django/forms/widgets/{name}.html"
    for name in (
        "text", "number", "email", "url", "password", "hidden", "date", "datetime", "time",
        "checkbox", "search", "tel", "color",
    )
]  # fmt: skip
INCLUDE_INPUT = '{% include "django/forms/widgets/input.html" %}\n'


def _text(value) -> str:
    """``{{ value }}``: localized, then escaped unless marked safe."""
    return conditional_escape(localize(value))


def _formatted(value) -> str:
    """``{{ value|stringformat:'s' }}``: ``str()``, then escaped unless marked safe."""
    return conditional_escape(value if isinstance(value, SafeData) else str(value))


def _attrs(attrs: dict) -> str:
    return "".join(
        f" {_text(name)}" if value is True else f' {_text(name)}="{_formatted(value)}"'
        for name, value in attrs.items()
        if value is not False
    )


def _input(widget: dict) -> str:
    value = "" if widget["value"] is None else f' value="{_formatted(widget["value"])}"'
    return (
        f'<input type="{_text(widget["type"])}" name="{_text(widget["name"])}"{value}'
        f"{_attrs(widget['attrs'])}>"
    )


def _textarea(widget: dict) -> str:
    value = _text(widget["value"]) if widget["value"] else ""
    return f'<textarea name="{_text(widget["name"])}"{_attrs(widget["attrs"])}>\n{value}</textarea>'


def _option(option: dict) -> str:
    return (
        f'<option value="{_formatted(option["value"])}"{_attrs(option["attrs"])}>'
        f"{_text(option['label'])}</option>"
    )


def _select(widget: dict) -> str | None:
    parts = [f'<select name="{_text(widget["name"])}"{_attrs(widget["attrs"])}>']
    for group_name, group_choices, _index in widget["optgroups"]:
        if group_name:
            parts.append(f'\n  <optgroup label="{_text(group_name)}">')
        for option in group_choices:
            if option["template_name"] != SELECT_OPTION:
                return None  # an option of its own: its template renders it
            parts.append(f"\n  {_option(option)}\n")  # the option's template ends a line
        if group_name:
            parts.append("\n  </optgroup>")
    parts.append("\n</select>")
    return "".join(parts)


WRITERS: dict[str, Callable[[dict], str | None]] = {
    INPUT: _input,
    "django/forms/widgets/textarea.html": _textarea,
    "django/forms/widgets/select.html": _select,
}


class PythonWidgetRenderer(DjangoTemplates):
    """Django's default form renderer, but for the common widgets, written in Python."""

    def __init__(self) -> None:
        super().__init__()
        self._writers: dict[str, Callable[[dict], str | None] | None] = {}

    def _source(self, template_name: str) -> str | None:
        try:
            return self.get_template(template_name).template.source
        except Exception:  # not found, or not a Django template: leave it to the template
            return None

    def _writer(self, template_name: str) -> Callable[[dict], str | None] | None:
        """The Python writer of a widget's template, once its source (and that of the
        templates it includes) is the one the writer copies; None otherwise."""
        if template_name not in self._writers:
            target = template_name
            if template_name in INPUT_ALIASES and self._source(template_name) == INCLUDE_INPUT:
                target = INPUT
            used = [target, ATTRS] + ([SELECT_OPTION] if target.endswith("/select.html") else [])
            fits = target in WRITERS and all(
                self._source(name) == KNOWN_SOURCES[name] for name in used
            )
            self._writers[template_name] = WRITERS[target] if fits else None
        return self._writers[template_name]

    def render(self, template_name, context, request=None):
        writer = self._writer(template_name)
        if writer is not None and "widget" in context:
            written = writer(context["widget"])
            if written is not None:
                return written
        return super().render(template_name, context, request)
