"""The console's pages and forms: each handler reads the session, makes one engine call, renders.

Errors from the engine are shown next to what caused them (the form, or the top of the page); a
form without its session's CSRF token is refused with 403 and changes nothing.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from reversi.core.json_values import compact, parse_json
from reversi.engine.access import Access
from reversi.engine.keys import Principal
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.errors import BadInput, BodyTooLarge, CsrfRefused, NoCompensator, NotFound, ReversiError, Unauthorized
from reversi.server.console import views
from reversi.server.console.session import Session, Sessions, check_csrf
from reversi.server.endpoint import MAX_BODY_BYTES, ServerState, is_whole_number

HERE = Path(__file__).parent
TOO_LARGE = BodyTooLarge(MAX_BODY_BYTES).message
Handler = Callable[[Request], Awaitable[Response]]

# Every page: scripts, styles and requests from this server only, and never inside another site's
# frame (a framed console, signed in or keyless on loopback, would let that site steer clicks onto
# its rollback and approval buttons).
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


class Console:
    """The console over one server's state."""

    def __init__(self, state: ServerState, sessions: Sessions) -> None:
        self.state = state
        self.sessions = sessions
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))

    # -- plumbing ----------------------------------------------------------------------------------

    def render(self, request: Request, session: Session, name: str, status: int = 200, **context: Any) -> Response:
        kill = views.kill_switch(self.state.ledger)
        csrf = session.csrf or secrets.token_urlsafe(24)  # first visit: this browser gets its token now
        response = self.templates.TemplateResponse(
            request, name, {"principal": session.principal, "csrf": csrf, "kill_switch": kill, **context},
            status_code=status, headers=PAGE_HEADERS)
        if csrf != session.csrf:
            self.sessions.save(request, response, session.key_id, csrf)
        return response

    def signed_in(self, handler: Callable[[Request, Session, Principal], Awaitable[Response]]) -> Handler:
        async def page(request: Request) -> Response:
            session = await run_in_threadpool(self.sessions.read, request)
            if session.principal is None:
                return RedirectResponse(f"/login?{urlencode({'next': request.url.path})}", status_code=303)
            if request.method == "POST":
                if _too_large(request):
                    return self.render(request, session, "error.html", 413, error=TOO_LARGE)
                form = await request.form()
                try:
                    check_csrf(session, form.get("csrf"))
                except CsrfRefused as exc:
                    return self.render(request, session, "error.html", 403, error=exc.message)
            try:
                return await handler(request, session, session.principal)
            except ReversiError as exc:
                return self.render(request, session, "error.html", exc.http_status, error=exc.message)

        return page

    def ledger_for(self, principal: Principal) -> PrincipalLedger:
        return self.state.ledger.for_principal(principal)

    # -- sign in and out ---------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        session = await run_in_threadpool(self.sessions.read, request)
        target = _safe_next(request.query_params.get("next"))
        if request.method == "GET":
            return self.render(request, session, "login.html", next=target)
        if _too_large(request):
            return self.render(request, session, "login.html", 413, error=TOO_LARGE, next=target)
        form = await request.form()
        try:
            check_csrf(session, form.get("csrf"))
        except CsrfRefused as exc:
            return self.render(request, session, "login.html", 403, error=exc.message, next=target)
        try:
            principal = await run_in_threadpool(
                lambda: self.state.ledger.authenticate(str(form.get("key") or "") or None, local_ok=False))
        except Unauthorized:
            return self.render(request, session, "login.html", 401, error="unknown or revoked key", next=target)
        response = RedirectResponse(target, status_code=303)
        self.sessions.save(request, response, principal.key_id)
        return response

    async def logout(self, request: Request) -> Response:
        session = await run_in_threadpool(self.sessions.read, request)
        if _too_large(request):
            return self.render(request, session, "error.html", 413, error=TOO_LARGE)
        check_csrf(session, (await request.form()).get("csrf"))
        await run_in_threadpool(self.sessions.end, session)
        response = RedirectResponse("/login", status_code=303)
        self.sessions.clear(request, response)
        return response

    # -- runs ----------------------------------------------------------------------------------------

    async def runs(self, request: Request, session: Session, principal: Principal) -> Response:
        q = request.query_params
        filters = {k: (q.get(k) or None) for k in ("status", "actor", "tenant")}
        after = _cursor(q.get("after"))
        rows, following = await run_in_threadpool(views.runs_page, self.ledger_for(principal), filters, after)
        template = "runs_rows.html" if q.get("fragment") == "rows" else "runs.html"
        next_link = f"/?{urlencode({**{k: v for k, v in filters.items() if v}, 'after': json.dumps(following)})}" \
            if following else None
        return self.render(request, session, template, rows=rows, filters=filters, next_link=next_link,
                           active=any(r.active for r in rows))

    async def run(self, request: Request, session: Session, principal: Principal, **errors: Any) -> Response:
        run_id = request.path_params["run_id"]
        view = await run_in_threadpool(views.run_page, self.ledger_for(principal), run_id)
        return self.render(request, session, "run.html", view=view, pretty=views.pretty, age=views.age,
                           can_operate=principal.is_operator, has_compensator=bool(self.state.compensator_cmd),
                           status=errors.pop("status", 200), **errors)

    async def rollback(self, request: Request, session: Session, principal: Principal) -> Response:
        run_id = request.path_params["run_id"]
        form = await request.form()
        try:
            ledger = self.ledger_for(principal)
            await run_in_threadpool(ledger.run_record, run_id, Access.OPERATE)
            if not self.state.compensator_cmd:
                raise NoCompensator()
            await run_in_threadpool(lambda: ledger.submit_rollback(
                run_id, approve_compensations=form.get("approve_compensations") == "on", attempts=3))
        except ReversiError as exc:
            return await self.run(request, session, principal, rollback_error=exc.message, status=exc.http_status)
        self.state.wake_worker()
        return RedirectResponse(f"/runs/{run_id}#rollback", status_code=303)

    async def rollback_progress(self, request: Request, session: Session, principal: Principal) -> Response:
        job = await run_in_threadpool(self.ledger_for(principal).latest_job, request.path_params["run_id"])
        return JSONResponse(job.to_dict())

    async def resolve(self, request: Request, session: Session, principal: Principal) -> Response:
        run_id, step = request.path_params["run_id"], int(request.path_params["step"])
        form = await request.form()
        try:
            ledger = self.ledger_for(principal)
            await run_in_threadpool(ledger.run_record, run_id, Access.OPERATE)
            kwargs = _resolve_arguments(form)
            await run_in_threadpool(lambda: ledger.resolve(run_id, step, **kwargs))
        except ReversiError as exc:
            return await self.run(request, session, principal, resolve_error={step: exc.message},
                                  resolve_form={step: dict(form)}, status=exc.http_status)
        return RedirectResponse(f"/runs/{run_id}#step-{step}", status_code=303)

    async def journal(self, request: Request, session: Session, principal: Principal) -> Response:
        run_id = request.path_params["run_id"]
        events = await run_in_threadpool(self.ledger_for(principal).events, run_id)
        lines = "".join(compact(e.to_dict()) + "\n" for e in events)
        return Response(lines, media_type="application/x-ndjson",
                        headers={"Content-Disposition": f'attachment; filename="{run_id}.jsonl"'})

    # -- approvals and halts -------------------------------------------------------------------------

    async def approvals(self, request: Request, session: Session, principal: Principal, **extra: Any) -> Response:
        found = await run_in_threadpool(lambda: self.ledger_for(principal).approvals(limit=views.APPROVALS_SHOWN))
        return self.render(request, session, "approvals.html", approvals=found, pretty=views.pretty,
                           status=extra.pop("status", 200), **extra)

    async def decide(self, request: Request, session: Session, principal: Principal) -> Response:
        approval_id, verdict = request.path_params["approval_id"], request.path_params["verdict"]
        if verdict not in ("approve", "deny"):
            raise NotFound(f"no such action {verdict!r}: approve or deny")
        form = await request.form()
        back = _safe_next(str(form.get("next") or "/approvals"))
        ledger = self.ledger_for(principal)
        try:
            note = str(form.get("note") or "") or None
            if verdict == "approve":
                await run_in_threadpool(lambda: ledger.approve(approval_id, note=note))
            else:
                await run_in_threadpool(lambda: ledger.deny(approval_id, note=note or ""))
        except ReversiError as exc:
            return await self.approvals(request, session, principal, errors={approval_id: exc.message},
                                        status=exc.http_status)
        return RedirectResponse(back, status_code=303)

    async def halts(self, request: Request, session: Session, principal: Principal, **extra: Any) -> Response:
        found = await run_in_threadpool(self.ledger_for(principal).halts)
        return self.render(request, session, "halts.html", halts=found, can_manage=principal.is_admin,
                           status=extra.pop("status", 200), **extra)

    async def add_halt(self, request: Request, session: Session, principal: Principal) -> Response:
        form = await request.form()
        scope = {k: (str(form.get(k) or "").strip() or None) for k in ("tool", "actor", "tenant", "environment")}
        try:
            ledger = self.ledger_for(principal)
            await run_in_threadpool(lambda: ledger.add_halt(str(form.get("reason") or ""), **scope))
        except ReversiError as exc:
            return await self.halts(request, session, principal, error=exc.message, form=dict(form),
                                    status=exc.http_status)
        return RedirectResponse("/halts", status_code=303)

    async def lift_halt(self, request: Request, session: Session, principal: Principal) -> Response:
        await run_in_threadpool(self.ledger_for(principal).lift_halts, request.path_params["halt_id"])
        return RedirectResponse("/halts", status_code=303)

    # -- the routes ----------------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        s = self.signed_in
        return [
            Route("/", s(self.runs), methods=["GET"]),
            Route("/login", self.login, methods=["GET", "POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/runs/{run_id}", s(self.run), methods=["GET"]),
            Route("/runs/{run_id}/rollback", s(self.rollback), methods=["POST"]),
            Route("/runs/{run_id}/rollback.json", s(self.rollback_progress), methods=["GET"]),
            Route("/runs/{run_id}/steps/{step:int}/resolve", s(self.resolve), methods=["POST"]),
            Route("/runs/{run_id}/journal.jsonl", s(self.journal), methods=["GET"]),
            Route("/approvals", s(self.approvals), methods=["GET"]),
            Route("/approvals/{approval_id}/{verdict:str}", s(self.decide), methods=["POST"]),
            Route("/halts", s(self.halts), methods=["GET"]),
            Route("/halts", s(self.add_halt), methods=["POST"]),
            Route("/halts/{halt_id}/lift", s(self.lift_halt), methods=["POST"]),
            Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ]


def _safe_next(target: str | None) -> str:
    """Only a path on this site: never an address elsewhere (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def _too_large(request: Request) -> bool:
    """A form is a few fields: the API's body limit holds here too (a body of unknown length is refused)."""
    length = request.headers.get("content-length", "")
    return not is_whole_number(length) or int(length) > MAX_BODY_BYTES


def _cursor(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    try:
        value = parse_json(text, "the page link")
    except BadInput:
        raise BadInput("bad page link: start again from the first page") from None
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise BadInput("bad page link: start again from the first page")
    return value[0], value[1]


def _resolve_arguments(form: FormData) -> dict[str, Any]:
    status = str(form.get("status") or "")
    note = str(form.get("note") or "")
    result_text = str(form.get("result") or "").strip()
    kwargs: dict[str, Any] = {"status": status, "note": note}
    if result_text:
        kwargs["result"] = parse_json(result_text, "the result")
    return kwargs
