"""The notice every page shows at its top: the text of the file ``PORTAL_NOTICE_FILE`` names,
for a word from whoever runs the portal that needs no deploy (maintenance tonight, a cluster
that is not in yet; the demo says there how far the build of its cluster is).

The file is read at each request, so a notice comes and goes as the file does: one open and
one short read, nothing when there is no file. Its text is shown as plain text (the template
escapes it), its whitespace run together, and cut at ``NOTICE_MAX_CHARS``.
"""

from __future__ import annotations

from django.conf import settings

NOTICE_MAX_CHARS = 500


def read_notice(path: str | None = None) -> str:
    """The notice's text, or "" when there is none (no setting, no file, an empty or
    unreadable one)."""
    path = settings.PORTAL_NOTICE_FILE if path is None else path
    if not path:
        return ""
    try:
        with open(path, "rb") as notice:
            raw = notice.read(NOTICE_MAX_CHARS * 4 + 4)  # UTF-8 takes up to 4 bytes a character
    except OSError:  # no file (the usual case), a directory, no permission
        return ""
    text = " ".join(raw.decode("utf-8", errors="replace").split())
    if len(text) > NOTICE_MAX_CHARS:
        text = text[: NOTICE_MAX_CHARS - 1].rstrip() + "…"
    return text
