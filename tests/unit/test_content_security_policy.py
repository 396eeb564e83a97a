"""The Content-Security-Policy (portal/fixed_settings.py) refuses inline script and eval everywhere,
and inline style but for the few plotly.js writes, by their hashes; every template works under
it: no template has an inline <script> (only external ones and
JSON data blocks), an on*= event handler attribute, a javascript: URL, a style= attribute, or an
htmx attribute that htmx would have to eval (hx-on, hx-vars, js: values, trigger filters).
The browser tests (tests/e2e) check the rendered pages for violations too."""

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(
    path
    for pattern in ("templates/**/*.html", "*/templates/**/*.html")
    for path in REPO_ROOT.glob(pattern)
    if ".venv" not in path.parts
)
DATA_SCRIPT_TYPES = {"application/json", "application/ld+json"}


class InlineFinder(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._in_inline_script = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")
            if name == "style":
                self.found.append(f"<{tag} style=...>")
            if (
                name.startswith(("hx-on", "data-hx-on"))
                or name in ("hx-vars", "data-hx-vars")
                or (name.endswith("hx-vals") and (value or "").lstrip().startswith("js:"))
                or (name.endswith("hx-trigger") and "[" in (value or ""))
            ):
                self.found.append(f"<{tag} {name}=... (htmx eval)>")
            if name in ("href", "src", "action") and (value or "").lower().startswith(
                "javascript:"
            ):
                self.found.append(f"<{tag} {name}=javascript:...>")
        is_data = attributes.get("type") in DATA_SCRIPT_TYPES
        if tag == "script" and "src" not in attributes and not is_data:
            self.found.append("<script> without src")
        if tag == "style":
            self.found.append("<style>")


def test_there_are_templates_to_check():
    assert len(TEMPLATES) > 40


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_template_has_no_inline_script_or_style(template):
    # Template tags may sit inside tags; the parser only needs the HTML around them.
    html = re.sub(r"{% comment %}.*?{% endcomment %}", "", template.read_text(), flags=re.S)
    html = re.sub(r"{%.*?%}|{{.*?}}|{#.*?#}", "x", html, flags=re.S)
    finder = InlineFinder()
    finder.feed(html)

    assert finder.found == []


def test_the_checker_finds_what_it_looks_for():
    finder = InlineFinder()
    finder.feed(
        '<script>alert(1)</script><a onclick="x()" href="javascript:x()">a</a>'
        '<p style="color:red"></p><style>p{}</style><script type="application/json">{}</script>'
        '<script src="/static/x.js"></script>'
        '<div hx-trigger="every 1s [ok()]" hx-on:click="x()" hx-vals="js:{a: 1}"></div>'
    )

    assert finder.found == [
        "<script> without src",
        "<a onclick=...>",
        "<a href=javascript:...>",
        "<p style=...>",
        "<style>",
        "<div hx-trigger=... (htmx eval)>",
        "<div hx-on:click=... (htmx eval)>",
        "<div hx-vals=... (htmx eval)>",
    ]


def _directive(name: str) -> list[str]:
    return settings.CONTENT_SECURITY_POLICY["DIRECTIVES"][name]


def test_scripts_come_from_the_portal_only_and_nothing_is_evaluated():
    assert _directive("script-src") == ["'self'"]
    assert _directive("default-src") == ["'self'"]
    assert _directive("object-src") == ["'none'"]


def test_no_inline_style_is_allowed_but_by_hash():
    sources = _directive("style-src")

    assert "'unsafe-inline'" not in sources
    assert all(s in ("'self'", "'unsafe-hashes'") or s.startswith("'sha256-") for s in sources)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_allowed_styles_are_the_ones_the_served_plotly_js_writes():
    plotly_js = Path(finders.find("plotly/plotly.min.js")).read_text()
    bundled_css = re.search(
        r"e\.textContent='((?:[^'\\]|\\.)*)',document\.head\.appendChild\(e\)", plotly_js
    )
    declarations = re.search(r"CSS_DECLARATIONS=(\[\[.*?\]\]);", plotly_js)
    assert bundled_css, "plotly.js no longer adds its map library's stylesheet this way"
    assert declarations, "plotly.js no longer sets image-rendering styles this way"
    image_rendering = "".join(": ".join(d) + "; " for d in json.loads(declarations[1]))

    expected = [_sha256(""), _sha256(bundled_css[1]), _sha256(image_rendering)]
    assert expected == settings.PLOTLY_INLINE_STYLES
