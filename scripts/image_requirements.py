"""Write requirements-image.txt: the pins the portal's container image installs.

They are requirements.txt's pins of the direct dependencies above requirements.in's development
line and of everything those pull in (read from the installed packages' metadata, markers
evaluated for each Python the image may run on), so the image carries no test runner, linter or
documentation builder, and the same versions as the virtualenv the tests run in.

    .venv/bin/python scripts/image_requirements.py           # write it
    .venv/bin/python scripts/image_requirements.py --check   # exit 1 when it is out of date
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
# The Pythons the image may run on: Debian bookworm's (the tests' base) and this one (the public
# Python image's 3.11 is as new as the virtualenv's or newer). A dependency any of them needs is in.
IMAGE_PYTHONS = ("3.11.2", platform.python_version())
DEVELOPMENT_LINE = "# --- development and tests only"
HEADER = (
    "# The portal image's packages (Dockerfile): requirements.txt's pins of the runtime part of\n"
    "# requirements.in and what it pulls in. Written by scripts/image_requirements.py: do not\n"
    "# edit.\n"
)


def runtime_requirements(requirements_in: str) -> list[Requirement]:
    """The direct dependencies above the development line."""
    found = []
    for line in requirements_in.splitlines():
        if line.startswith(DEVELOPMENT_LINE):
            break
        line = line.strip()
        if line and not line.startswith("#"):
            found.append(Requirement(line))
    return found


def closure(direct: list[Requirement]) -> set[str]:
    """The canonical names of ``direct`` and of every package they need, with their extras."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    waiting = [(canonicalize_name(r.name), frozenset(r.extras)) for r in direct]
    while waiting:
        name, extras = waiting.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        names.add(name)
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            wanted = [
                {"extra": extra, "python_full_version": python}
                for extra in (extras or {""})
                for python in IMAGE_PYTHONS
            ]
            if requirement.marker is None or any(requirement.marker.evaluate(e) for e in wanted):
                waiting.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return names


def pins(requirements_txt: str) -> dict[str, str]:
    """requirements.txt's lines by canonical package name."""
    return {
        canonicalize_name(line.split("==")[0].split("[")[0]): line.strip()
        for line in requirements_txt.splitlines()
        if "==" in line and not line.startswith("#")
    }


def image_requirements(requirements_in: str, requirements_txt: str) -> str:
    pinned = pins(requirements_txt)
    needed = closure(runtime_requirements(requirements_in))
    unpinned = sorted(needed - set(pinned))
    if unpinned:
        raise SystemExit(f"not pinned in requirements.txt: {', '.join(unpinned)}")
    return HEADER + "".join(f"{pinned[name]}\n" for name in sorted(needed))


def main(argv: list[str]) -> int:
    target = REPO / "requirements-image.txt"
    text = image_requirements(
        (REPO / "requirements.in").read_text(), (REPO / "requirements.txt").read_text()
    )
    if "--check" in argv:
        if not target.exists() or target.read_text() != text:
            print(f"{target.name} is out of date: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
