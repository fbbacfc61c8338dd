"""Console sessions: a signed cookie naming the key that signed in, and a CSRF token for every form.

The cookie holds the key's id, never the key; each request checks that key is still active, so a
revocation signs its sessions out at once, and that the session was not signed out (the store
remembers a sign-out until the cookie would have expired, so a copy of the cookie is dead too). It
is HttpOnly and SameSite=Strict. The signing secret is
REVERSI_SESSION_SECRET when set (share it between servers behind one address), else random per
process (a restart signs everyone out).

Every form answers with a redirect to a page (post/redirect/get), so reloading a page never sends a
form again. What that page must show about the form (its error, what was typed) travels in a
*flash*: a second signed cookie, for that page only, read once and then deleted.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from reversi.core.json_values import JSONObjectView, LooseJSONObject
from reversi.core.times import format_time
from reversi.engine.keys import Principal
from reversi.engine.ledger import Ledger
from reversi.errors import CsrfRefused
from reversi.server.endpoint import keyless_ok

COOKIE = "reversi_session"
MAX_AGE_S = 12 * 3600
FLASH_COOKIE = "reversi_flash"
FLASH_MAX_AGE_S = 120
FLASH_MAX_BYTES = 3500  # browsers keep cookies up to about 4 KB: past this, what was typed is dropped


@dataclass(frozen=True)
class Session:
    """Who is signed in (None: nobody yet) and the token their forms must carry."""

    principal: Principal | None
    csrf: str
    key_id: str | None = None


class Sessions:
    """Reads and writes the console's session cookie."""

    def __init__(self, ledger: Ledger, secret: str | None = None) -> None:
        self.ledger = ledger
        key = secret or os.environ.get("REVERSI_SESSION_SECRET") or secrets.token_urlsafe(32)
        self._signer = URLSafeTimedSerializer(key, salt="reversi-console")
        self._flasher = URLSafeTimedSerializer(key, salt="reversi-console-flash")

    def read(self, request: Request) -> Session:
        """The request's session; with no keys in the store, a loopback visitor is the admin `local`."""
        data: dict[str, str | None] = {}
        raw = request.cookies.get(COOKIE)
        if raw:
            try:
                data = self._signer.loads(raw, max_age=MAX_AGE_S)
            except BadSignature:
                data = {}
        csrf = str(data.get("csrf") or "")
        key_id = data.get("key") or None
        principal = self.ledger.session_principal(key_id, csrf, local_ok=keyless_ok(request))
        return Session(principal, csrf, key_id if principal is not None and principal.key_id else None)

    def save(self, request: Request, response: Response, key_id: str | None, csrf: str | None = None) -> None:
        """Set the session cookie; `Secure` when the request came over HTTPS (directly, or through a
        proxy whose forwarded headers uvicorn trusts), so a browser never sends it in the clear."""
        value = self._signer.dumps({"key": key_id, "csrf": csrf or secrets.token_urlsafe(24)})
        response.set_cookie(COOKIE, value, max_age=MAX_AGE_S, httponly=True, samesite="strict", path="/",
                            secure=_https(request))

    def clear(self, request: Request, response: Response) -> None:
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=_https(request))

    def end(self, session: Session) -> None:
        """Sign the session out for good: its cookie, or any copy of it, no longer signs anyone in."""
        if not session.csrf or session.key_id is None:  # nobody signed in: nothing to remember
            return
        self.ledger.sign_out(session.csrf, format_time(datetime.now(UTC) + timedelta(seconds=MAX_AGE_S)))


    def flash(self, request: Request, response: Response, to: str, context: JSONObjectView) -> None:
        """Have the page at path `to` show `context` once (its `form` key, what was typed, is left out
        when it would make the cookie too large)."""
        value = self._flasher.dumps({"to": to, **context})
        if len(value) > FLASH_MAX_BYTES:
            trimmed = {k: v for k, v in context.items() if k != "form"}
            trimmed["flash_error"] = "what you typed was too long to keep: type it again"
            value = self._flasher.dumps({"to": to, **trimmed})
        if len(value) > FLASH_MAX_BYTES:  # an error message that long: say that something went wrong
            value = self._flasher.dumps({"to": to, "flash_error": "that did not work (the error is too long to show)"})
        response.set_cookie(FLASH_COOKIE, value, max_age=FLASH_MAX_AGE_S, httponly=True, samesite="strict",
                            path="/", secure=_https(request))

    def take_flash(self, request: Request) -> LooseJSONObject | None:
        """The flash left for the page at the request's path, if any (the caller deletes the cookie)."""
        raw = request.cookies.get(FLASH_COOKIE)
        if not raw:
            return None
        try:
            data = self._flasher.loads(raw, max_age=FLASH_MAX_AGE_S)
        except (BadSignature, json.JSONDecodeError):
            return None
        if not isinstance(data, dict) or data.pop("to", None) != request.url.path:
            return None
        return data

    def clear_flash(self, request: Request, response: Response) -> None:
        response.delete_cookie(FLASH_COOKIE, path="/", httponly=True, samesite="strict", secure=_https(request))


def check_csrf(session: Session, submitted: object) -> None:
    """Raises CsrfRefused unless the form carried its session's token."""
    if not session.csrf or not isinstance(submitted, str) or not hmac.compare_digest(session.csrf, submitted):
        raise CsrfRefused("this form has expired or did not come from this console: reload the page and try again")


def _https(request: Request) -> bool:
    return request.url.scheme == "https"
