"""A thin client of the portal's REST API (``/api/v1/``): JSON in, JSON out, and every failure
as an ``ApiError`` that carries the exit code the command ends with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from gpuportal import exits

API_PREFIX = "/api/v1/"
TIMEOUT = httpx.Timeout(30.0)
USER_AGENT = "gpuportal-cli/0.1"


class ApiError(Exception):
    """A request that did not succeed. ``exit_code`` is one of ``gpuportal.exits``; ``status``
    the HTTP status (None when the server could not be reached); ``body`` the JSON answer."""

    def __init__(self, message: str, *, exit_code: int, status: int | None = None, body=None):
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status
        self.body = body


def exit_code_for(status: int) -> int:
    if status in (401, 403):
        return exits.AUTH
    if status == 404:
        return exits.NOT_FOUND
    if status == 409:
        return exits.CONFLICT
    if status == 429 or status >= 500:
        return exits.SERVER
    return exits.BAD_INPUT


def describe_errors(body: Any) -> list[str]:
    """The API's error answer as lines: ``field: message`` for each field's messages (nested
    fields joined with dots), or its ``detail``."""
    if isinstance(body, dict):
        if set(body) <= {"detail", "state"} and "detail" in body:
            return [str(body["detail"])]
        lines = []
        for field, messages in body.items():
            prefix = "" if field in ("non_field_errors", "detail") else f"{field}: "
            for message in _messages(messages):
                lines.append(f"{prefix}{message}")
        return lines
    if isinstance(body, list):
        return [str(item) for item in body]
    return [str(body)] if body else []


def _messages(value: Any, path: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _messages(inner, f"{path}{key}: ")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            if isinstance(inner, dict | list):
                yield from _messages(inner, f"{path}[{index}] ")
            else:
                yield f"{path}{inner}"
    else:
        yield f"{path}{value}"


def results(body) -> list:
    """A list answer's rows, paginated (``{"results": [...]}``) or not."""
    if isinstance(body, dict) and "results" in body:
        return body["results"]
    return body


class Client:
    """The API at ``base_url`` (the portal's URL), as the holder of ``token`` (or anonymous)."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout=TIMEOUT):
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if token:
            headers["Authorization"] = f"Token {token}"
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._http = httpx.Client(
            base_url=self.base_url + API_PREFIX, headers=headers, timeout=timeout
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- requests ----------------------------------------------------------------------------

    def request(self, method: str, path: str, *, params=None, json=None) -> Any:
        try:
            try:
                response = self._http.request(method, path, params=_params(params), json=json)
            except httpx.RemoteProtocolError:
                # A kept-alive connection the server closed just as this request went out on it
                # (gunicorn closes idle ones after a few seconds). A GET is asked again, once, on
                # a new connection; anything else could have been done already, so it is not.
                if method != "GET":
                    raise
                response = self._http.request(method, path, params=_params(params), json=json)
        except httpx.HTTPError as error:
            raise self._unreachable(error) from None
        return self._answer(response)

    def get(self, path: str, **params) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: dict | None = None) -> Any:
        return self.request("POST", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    @contextmanager
    def stream_lines(self, path: str, *, params=None, read_timeout: float | None = None):
        """A streamed text answer: yields ``(response, lines)``, ``lines`` an iterator of its
        lines (without line ends) as they arrive. An error status raises ``ApiError``."""
        timeout = httpx.Timeout(TIMEOUT.connect, read=read_timeout)
        try:
            with self._http.stream(
                "GET",
                path,
                params=_params(params),
                headers={"Accept": "text/plain"},
                timeout=timeout,
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    self._answer(response)
                yield response, response.iter_lines()
        except httpx.HTTPError as error:
            raise self._unreachable(error) from None

    # --- answers -----------------------------------------------------------------------------

    def _unreachable(self, error: httpx.HTTPError) -> ApiError:
        reason = str(error) or type(error).__name__
        return ApiError(
            f"cannot reach the portal at {self.base_url}: {reason}", exit_code=exits.SERVER
        )

    def _answer(self, response: httpx.Response) -> Any:
        body = _json_or_text(response)
        if response.status_code < 400:
            return body
        status = response.status_code
        lines = describe_errors(body) if isinstance(body, dict | list) else []
        if not lines:
            lines = [f"HTTP {status} {response.reason_phrase}"]
        message = "\n".join(lines)
        retry = response.headers.get("Retry-After")
        if retry and status in (429, 503):
            message += f"\n(try again in {retry} s)"
        raise ApiError(message, exit_code=exit_code_for(status), status=status, body=body)


def _json_or_text(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    if "json" in response.headers.get("Content-Type", ""):
        try:
            return response.json()
        except ValueError:
            pass
    return response.text


def _params(params: dict | None) -> dict | None:
    """Query parameters without the options left out (None)."""
    if not params:
        return None
    return {key: value for key, value in params.items() if value is not None}
