"""MkDocs hooks (mkdocs.yml ``hooks:``) for the documentation site.

Screenshots are taken by the browser tests (``make docs-screenshots`` runs tests/e2e with
``E2E_SCREENSHOT_DIR=docs/screenshots``), not drawn by hand, so they show the pages as the code
renders them. A page shows one with a plain Markdown image, ``![The review queue](
../screenshots/review-queue.png)``. Until that file has been taken, the image is replaced by a
note saying how to take it, so that a fresh clone builds with ``--strict``;
``tests/unit/test_docs.py`` checks that every screenshot a page shows is one a browser test
takes, so a misspelt name cannot hide behind the note.
"""

from __future__ import annotations

import re
from pathlib import Path

SCREENSHOT = re.compile(
    r"!\[(?P<alt>[^\]]*)\]\((?P<path>(?:\.\./)*screenshots/(?P<name>[\w-]+)\.png)\)"
)


def on_page_markdown(markdown: str, *, page, config, files) -> str:
    directory = Path(config["docs_dir"]) / "screenshots"

    def shown(match: re.Match) -> str:
        if (directory / f"{match['name']}.png").exists():
            return match[0]
        return (
            f'!!! note "Screenshot: {match["alt"]}"\n\n'
            f"    Not taken yet: `make docs-screenshots` writes "
            f"`docs/screenshots/{match['name']}.png` from the browser tests.\n"
        )

    return SCREENSHOT.sub(shown, markdown)
