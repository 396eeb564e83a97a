"""Single sign-on test helpers: signing in through Keycloak's own login form with a plain HTTP
client that follows redirects, as a browser without JavaScript would."""

import html
import re

import requests

LOGIN_FORM = re.compile(r"<form\b[^>]*\bid=\"kc-form-login\"[^>]*>", re.S)
ACTION = re.compile(r"\baction=\"([^\"]+)\"")


LOOPBACK = ("127.0.0.1", "localhost")


def _send_secure_cookies_over_loopback(session: requests.Session) -> None:
    """Keycloak marks its login-session cookies ``Secure``; browsers send those to loopback
    addresses over plain HTTP (they count localhost as a secure context), requests does not."""
    for cookie in session.cookies:
        if cookie.domain.lstrip(".") in LOOPBACK:
            cookie.secure = False


def keycloak_sign_in(
    base_url: str, username: str, password: str, *, next_path: str = "/"
) -> requests.Response:
    """Start single sign-on at the portal, post Keycloak's login form, follow the redirects
    back; the last answer (the portal's page, or Keycloak's if it refused)."""
    session = requests.Session()
    start = session.get(f"{base_url}/oidc/authenticate/?next={next_path}", timeout=60)
    start.raise_for_status()
    _send_secure_cookies_over_loopback(session)
    form = LOGIN_FORM.search(start.text)
    assert form, f"no Keycloak login form at {start.url}:\n{start.text[:2000]}"
    action = html.unescape(ACTION.search(form.group(0)).group(1))
    answer = session.post(
        action, data={"username": username, "password": password, "credentialId": ""}, timeout=60
    )
    answer.raise_for_status()
    answer.session = session
    return answer
