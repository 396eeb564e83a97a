"""The documentation site (docs/, mkdocs.yml) builds with --strict (every page in the navigation,
no link to a missing page or anchor) and loads nothing from another host, and the docs stay true
to the code: the configuration reference is what scripts/settings_reference.py writes from
portal/settings.py, every screenshot a page shows is one a browser test takes, and every file of
the repository a page names exists. The README stays a short front page."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        # Material's notice about MkDocs 2.0 on every build, which says nothing about ours.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return out


def test_the_site_builds_with_strict_checks(site):
    built = {path.relative_to(site).with_suffix(".md") for path in site.rglob("*.html")}

    assert {path.relative_to(DOCS) for path in pages()} <= built


class Assets(HTMLParser):
    """Every address a page loads (not the links a reader may follow)."""

    LOADS = {
        "script": ("src",),
        "link": ("href",),
        "img": ("src", "srcset"),
        "iframe": ("src",),
        "source": ("src", "srcset"),
        "video": ("src", "poster"),
        "audio": ("src",),
        "embed": ("src",),
        "object": ("data",),
    }

    def __init__(self):
        super().__init__()
        self.addresses: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value and name in self.LOADS.get(tag, ()):
                self.addresses.append(value)
        style = dict(attrs).get("style") or ""
        self.addresses += re.findall(r"url\(\s*['\"]?([^'\")]+)", style)


def elsewhere(address: str) -> bool:
    return bool(re.match(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", address, re.I))


def test_no_page_loads_anything_from_another_host(site):
    """No CDN, web font or analytics: the site works with no network, as the portal does."""
    found = {}
    for path in site.rglob("*.html"):
        parser = Assets()
        parser.feed(path.read_text())
        remote = [address for address in parser.addresses if elsewhere(address)]
        if remote:
            found[str(path.relative_to(site))] = remote
    for path in site.rglob("*.css"):
        imports = re.findall(
            r"(?:@import|url\()\s*['\"]?((?:https?:)?//[^'\")\s]+)", path.read_text()
        )
        if imports:
            found[str(path.relative_to(site))] = imports

    assert found == {}


def load_settings_reference():
    spec = importlib.util.spec_from_file_location(
        "settings_reference", REPO / "scripts" / "settings_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up by name while they are made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_is_what_the_script_writes():
    reference = load_settings_reference()

    assert reference.PAGE.read_text() == reference.render(reference.SETTINGS.read_text()), (
        "docs/reference/configuration.md is out of date: run "
        ".venv/bin/python scripts/settings_reference.py (or make docs)"
    )


# Records every variable the settings read through portal/env.py while they load.
READS_PROBE = """
import json, sys
import portal.env as env
read = []
original = env.env_raw
def recording(name, *, environ=env.os.environ):
    read.append(name)
    return original(name, environ=environ)
env.env_raw = recording
import portal.settings
print(json.dumps(sorted(set(read))))
"""


def test_the_reference_lists_every_variable_the_settings_read():
    """The script reads the settings' source; this loads them and records what they read, so a
    read the script's parsing missed cannot go unlisted. (Reads behind a condition, such as the
    cache's key prefix without a cache URL, are checked by the source alone.)"""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "PORTAL_", "CELERY_", "OIDC_", "GPUJOBS_"))
        and key != "DATABASE_URL"
    }
    result = subprocess.run(
        [sys.executable, "-c", READS_PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**environ, "DJANGO_CACHE_URL": "redis://127.0.0.1:1/0"},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    read = set(json.loads(result.stdout.splitlines()[-1]))
    listed = set(
        re.findall(
            r"^\| `([A-Z0-9_]+)` \|", (DOCS / "reference" / "configuration.md").read_text(), re.M
        )
    )

    assert read - listed == set()


SHOWN = re.compile(r"\]\((?:\.\./)*(?:docs/)?screenshots/([\w-]+)\.png\)")
TAKEN = re.compile(r"""screenshot\(\s*\w+,\s*["']([\w-]+)["']\s*\)""")


def test_every_screenshot_a_page_shows_is_taken_by_a_browser_test():
    """make docs-screenshots writes docs/screenshots/<name>.png for each screenshot(page,
    "<name>") of tests/e2e: a name no test takes would never appear."""
    shown = {}
    for path in [README, *pages()]:
        for name in SHOWN.findall(path.read_text()):
            shown.setdefault(name, str(path.relative_to(REPO)))
    taken = set()
    for path in (REPO / "tests" / "e2e").glob("*.py"):
        taken |= set(TAKEN.findall(path.read_text()))

    assert shown
    assert {name: page for name, page in shown.items() if name not in taken} == {}


CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
TOP_LEVEL = {path.name for path in REPO.iterdir() if not path.name.startswith(".")}


def named_files(text: str) -> set[str]:
    """Files of the repository a page names in code spans (``tenants/quota.py``): a first part
    that is a top-level entry, then a path to a name with an extension. (Folders are left out:
    an API path, ``billing/prices/``, reads like one.)"""
    found = set()
    for span in CODE_SPAN.findall(text):
        if (
            re.fullmatch(r"[\w.-]+(?:/[\w.-]+)*/[\w-]+\.\w+", span)
            and span.split("/")[0] in TOP_LEVEL
        ):
            found.add(span)
    return found


def exists(name: str) -> bool:
    path = REPO / name
    # A module that became a package of the same name is still where the page says.
    return path.exists() or (name.endswith(".py") and (REPO / name[: -len(".py")]).is_dir())


def test_every_file_a_page_names_exists():
    missing = {}
    for path in [README, *pages()]:
        gone = sorted(name for name in named_files(path.read_text()) if not exists(name))
        if gone:
            missing[str(path.relative_to(REPO))] = gone

    assert missing == {}


# The README's two commands, as they have always read.
COMMANDS = """\
```sh
make demo       # the portal on embedded defaults, with demo data, at http://127.0.0.1:8000/
make test       # the whole test suite, starting every service it needs
make test-fast  # every test that needs no service, on SQLite in memory, in seconds
make test-abuse # the bad-input suites (schemathesis, a corpus of nasty inputs), the same way
```
"""


def test_the_readme_is_a_short_front_page_with_the_two_commands():
    text = README.read_text()

    assert len(text.splitlines()) <= 200
    assert COMMANDS in text
    assert text.index(COMMANDS) < len(text) // 2


def test_every_link_in_the_readme_leads_to_a_file():
    """Screenshots aside: they are taken by make docs-screenshots, and the test above holds
    their names to the browser tests'."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if not elsewhere(link) and not SHOWN.search(f"]({link})")]

    assert local
    assert [link for link in local if not (REPO / link).exists()] == []
