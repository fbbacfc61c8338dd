"""Calling a REST API for a connector: base URL and credentials from the environment, errors that
name the status and the API's own message.

A rate limit (429, with its `Retry-After`) and a server error (5xx) are `DownstreamError`s like any
refusal: the rollback's retries, with their one idempotency key, take over from there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import httpx

from reversi.connectors._base import Setting
from reversi.core.json_values import LooseJSON
from reversi.errors import ConnectorError, DownstreamError

__all__ = ["Answer", "Service", "form_encode"]

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Answer:
    """An API's answer: its status and its body as JSON (None when empty or not JSON)."""

    status: int
    body: LooseJSON


@dataclass(frozen=True)
class Service:
    """One REST API: where it is, how to sign in, how its errors say what went wrong."""

    name: str
    base: Setting
    token: Setting | None
    message: Callable[[LooseJSON], str | None]
    auth_scheme: str = "Bearer"
    extra_headers: tuple[tuple[str, str], ...] = ()

    @property
    def settings(self) -> tuple[Setting, ...]:
        return (self.base, self.token) if self.token else (self.base,)

    def base_url(self) -> str:
        return ((os.environ.get(self.base.name) if self.base.name else None) or self.base.default).rstrip("/")

    def headers(self) -> dict[str, str]:
        token = os.environ.get(self.token.name) if self.token else None
        if self.token and not token:
            raise ConnectorError(f"{self.token.name} is not set: {self.name} needs it")
        signed = {"Authorization": f"{self.auth_scheme} {token}"} if token else {}
        return {**dict(self.extra_headers), **signed, "User-Agent": "reversi-connectors"}

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, LooseJSON] | None = None,
        data: Mapping[str, LooseJSON] | None = None,
        json: LooseJSON = None,
        headers: Mapping[str, str] | None = None,
        tolerate: Collection[int] = (),
    ) -> Answer:
        """Send one request; a status of 400 or more raises unless it is in `tolerate`.

        Raises:
            DownstreamError: no answer, or an error status (429 and 5xx included), with the API's message.
        """
        url = path if "://" in path else f"{self.base_url()}{path}"
        try:
            response = httpx.request(method, url, params=params, data=data, json=json, timeout=TIMEOUT_S,
                                     headers={**self.headers(), **(headers or {})})
        except httpx.HTTPError as exc:
            raise DownstreamError(f"{self.name}: no answer from {method} {url}: {exc}") from exc
        answer = Answer(response.status_code, _body(response))
        if answer.status >= 400 and answer.status not in tolerate:
            raise DownstreamError(self._failure(method, path, response, answer), answer.status)
        return answer

    def _failure(self, method: str, path: str, response: httpx.Response, answer: Answer) -> str:
        said = self.message(answer.body) or response.reason_phrase or "no message"
        status = f"HTTP {answer.status}"
        if answer.status == 429:
            wait = response.headers.get("retry-after")
            status += f" (rate limited{f', retry after {wait} s' if wait else ''})"
        return f"{self.name} {method} {path}: {status}: {said}"


def _body(response: httpx.Response) -> LooseJSON:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def form_encode(values: Mapping[str, LooseJSON], prefix: str = "") -> dict[str, str]:
    """Nested values as form fields the way Stripe reads them: `metadata[order]=7`, `items[0][price]=...`."""
    fields: dict[str, str] = {}
    for key, value in values.items():
        name = f"{prefix}[{key}]" if prefix else str(key)
        if value is None:
            continue
        if isinstance(value, Mapping):
            fields.update(form_encode(value, name))
        elif isinstance(value, list):
            fields.update(form_encode({str(i): item for i, item in enumerate(value)}, name))
        elif isinstance(value, bool):
            fields[name] = "true" if value else "false"
        else:
            fields[name] = str(value)
    return fields
