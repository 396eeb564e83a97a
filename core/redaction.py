"""Secrets kept out of pages, API answers and logs: credentials written into a URL
(``http://user:password@prometheus:9090/``) are shown as ``http://user:***@prometheus:9090/``.

``redact`` masks them in a URL the portal shows or in any sentence that may hold one (an error, a
log line); ``RedactingFilter`` runs every log record through it (portal/settings.py puts it on
the log handlers), so a library that logs a URL it was given cannot leak a password either.
Clients that can take credentials apart from the URL get them so (``without_credentials``), and
then log and report URLs that hold none.
"""

import logging
import re
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"

# scheme://userinfo@ in free text: the userinfo runs to the last "@" before the host's end (a
# slash, "?", "#", a space or a quote), so a password with a bare "@" is masked whole.
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^\s/?#'\"<>]+)@"
)


def _masked(userinfo: str) -> str:
    """``user:password`` -> ``user:***``; a lone ``token`` (a credential itself) -> ``***``."""
    user, colon, _ = userinfo.partition(":")
    return f"{user}:{MASK}" if colon else MASK


def redact(text: str) -> str:
    """The text (a URL, or a sentence) with the credentials of every URL in it masked."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{_masked(m['userinfo'])}@", text)


def without_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """``(url without userinfo, (user, password) or None)``: for a client that takes the
    credentials apart from the URL, so that the URL it logs holds none."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    credentials = (unquote(parts.username or ""), unquote(parts.password or ""))
    return urlunsplit(parts._replace(netloc=host)), credentials


class RedactingFilter(logging.Filter):
    """Masks URL credentials in a log record's message and traceback before any handler
    formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
