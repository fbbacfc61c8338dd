"""The console's pages and forms: each handler reads the session, makes one engine call, renders.

Every form answers with a redirect to a page (post/redirect/get), its errors included: they travel
to that page in a flash (`session.Sessions.flash`) and are shown next to what caused them (the
form, or the top of the page), so reloading a page never sends a form again. A form without its
session's CSRF token, or too large to read, is refused (403, 413) and changes nothing. Errors on a
console path (an unknown page, a GET of a form's address, a bug) are HTML pages (`error_page`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from reversi.core.json_values import JSONView, compact
from reversi.core.models import who_acted
from reversi.core.surfaces import Surface
from reversi.engine.access import Access, require_role
from reversi.engine.commands import command_read_back
from reversi.engine.keys import Principal, Role
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.errors import (
    BodyTooLarge,
    CsrfRefused,
    Forbidden,
    NoReader,
    ReversiError,
    Unauthorized,
)
from reversi.server.console import forms, run_view, views
from reversi.server.console.graph import run_graph
from reversi.server.console.session import Session, Sessions, check_csrf
from reversi.server.endpoint import MAX_BODY_BYTES, ServerState

HERE = Path(__file__).parent
TOO_LARGE = BodyTooLarge(MAX_BODY_BYTES).message
NO_READER = NoReader().message
Handler = Callable[[Request], Awaitable[Response]]

# Every page: scripts, styles and requests from this server only, and never inside another site's
# frame (a framed console, signed in or keyless on loopback, would let that site steer clicks onto
# its rollback and approval buttons).
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",  # pages name runs, steps and keys' holders: keep them out of caches
}
# What the console hands out as data (a job's progress, a run's journal): taken as what it says it is,
# and kept out of caches, as its pages are.
DATA_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
API_PREFIXES = ("/v1/", "/healthz", "/metrics", "/openapi.json")
FAVICON = (HERE / "static" / "favicon.svg").read_bytes()


class Console:
    """The console over one server's state."""

    def __init__(self, state: ServerState, sessions: Sessions) -> None:
        self.state = state
        self.sessions = sessions
        self.manifests = state.ledger.manifests
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals.update(steps=views.step_list, pretty=views.pretty, compact=views.compact,
                                          age=views.age, refresh_ms=views.REFRESH_MS, who=who_acted,
                                          linked_ids=views.linked_ids, clock=views.clock,
                                          closing_within=views.CLOSING_WITHIN,
                                          rollback_attempts=Surface.CONSOLE.attempts)

    # -- plumbing ----------------------------------------------------------------------------------

    def render(self, request: Request, session: Session, name: str, status: int = 200, *, fragment: bool = False,
               **context: Any) -> Response:
        """The template `name` as a page (with what a form's flash left for it) or, `fragment`, a part of one."""
        kill = views.kill_switch(self.state.ledger)
        flash = None if fragment else self.sessions.take_flash(request)
        if not fragment:
            context["badges"] = getattr(request.state, "badges", None)
        csrf = session.csrf or secrets.token_urlsafe(24)  # first visit: this browser gets its token now
        response = self.templates.TemplateResponse(
            request, name, {"principal": session.principal, "csrf": csrf, "kill_switch": kill, **context,
                            **(flash or {})},
            status_code=status, headers=PAGE_HEADERS)
        if csrf != session.csrf:
            self.sessions.save(request, response, session.key_id, csrf)
        if flash is not None:
            self.sessions.clear_flash(request, response)
        return response

    def after(self, request: Request, to: str, fragment: str = "", **flash: JSONView) -> Response:
        """The answer to a form: a redirect to the page at path `to`, which shows `flash` once."""
        response = RedirectResponse(to + (f"#{fragment}" if fragment else ""), status_code=303)
        if flash:
            self.sessions.flash(request, response, to, flash)
        return response

    async def error_page(self, request: Request, status: int, message: str, headers: dict[str, str]) -> Response:
        """An error on a console path as an HTML page (never the API's JSON)."""
        try:
            session = await run_in_threadpool(self.sessions.read, request)
        except Exception:  # the store is down, say: the page still says what happened, signed in or not
            session = Session(None, "")
        if status == 405:
            message += ": this address takes a form, sent from the page it is on"
        response = self.render(request, session, "error.html", status, fragment=True, error=message)
        response.headers.update(headers)
        return response

    @staticmethod
    def serves(path: str) -> bool:
        """Whether `path` is the console's (everything that is not the API's)."""
        return not (path == "/v1" or path.startswith(API_PREFIXES))

    def signed_in(self, handler: Callable[[Request, Session, Principal], Awaitable[Response]]) -> Handler:
        async def page(request: Request) -> Response:
            session = await run_in_threadpool(self.sessions.read, request)
            if session.principal is None:
                if forms.is_fragment(request):  # a page's script asking: it says the session ended, never shows this
                    return Response("signed out", status_code=401, headers=PAGE_HEADERS)
                return RedirectResponse(f"/login?{urlencode({'next': forms.came_from(request)})}", status_code=303)
            if request.method == "POST":
                if forms.too_large(request):
                    return self.render(request, session, "error.html", 413, error=TOO_LARGE)
                form = await request.form()
                try:
                    check_csrf(session, form.get("csrf"))
                except CsrfRefused as exc:
                    return self.render(request, session, "error.html", 403, error=exc.message)
            if request.method == "GET" and not forms.is_fragment(request):
                request.state.badges = await run_in_threadpool(views.nav_badges, self.ledger_for(session.principal))
            try:
                return await handler(request, session, session.principal)
            except ReversiError as exc:
                if request.method == "POST":
                    return self.after(request, forms.back(request), flash_error=exc.message)
                return self.render(request, session, "error.html", exc.http_status, error=exc.message)

        return page

    def ledger_for(self, principal: Principal) -> PrincipalLedger:
        return self.state.ledger.for_principal(principal, Surface.CONSOLE)

    # -- sign in and out ---------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        session = await run_in_threadpool(self.sessions.read, request)
        target = forms.safe_next(request.query_params.get("next"))
        if request.method == "GET":
            return self.render(request, session, "login.html", next=target)
        again = f"/login?{urlencode({'next': target})}"
        if forms.too_large(request):
            return self.render(request, session, "login.html", 413, error=TOO_LARGE, next=target)
        try:
            check_csrf(session, (await request.form()).get("csrf") if session.csrf else None)  # no token: no body read
        except CsrfRefused as exc:
            return self.render(request, session, "login.html", 403, error=exc.message, next=target)
        form = await request.form()
        try:
            principal = await run_in_threadpool(
                lambda: self.state.ledger.authenticate(str(form.get("key") or "") or None, local_ok=False))
        except Unauthorized:
            response = RedirectResponse(again, status_code=303)
            self.sessions.flash(request, response, "/login", {"error": "unknown or revoked key"})
            return response
        response = RedirectResponse(target, status_code=303)
        self.sessions.save(request, response, principal.key_id)
        return response

    async def logout(self, request: Request) -> Response:
        session = await run_in_threadpool(self.sessions.read, request)
        if forms.too_large(request):
            return self.render(request, session, "error.html", 413, error=TOO_LARGE)
        check_csrf(session, (await request.form()).get("csrf") if session.csrf else None)
        await run_in_threadpool(self.sessions.end, session)
        response = RedirectResponse("/login", status_code=303)
        self.sessions.clear(request, response)
        return response

    # -- runs ----------------------------------------------------------------------------------------

    async def runs(self, request: Request, session: Session, principal: Principal) -> Response:
        q = request.query_params
        if "expiring" in q and q.get("fragment") != "rows":
            return await self.closing(request, session, principal)
        filters = views.RunFilters.of(q)
        after = forms.cursor(q.get("after"))
        ledger = self.ledger_for(principal)
        rows, following = await run_in_threadpool(views.runs_page, ledger, filters, after)
        next_link = f"/?{urlencode({**filters.to_dict(), 'after': json.dumps(following)})}" if following else None
        first_link = f"/?{urlencode(filters.to_dict())}" if after is not None else None
        if q.get("fragment") == "rows":
            return self.render(request, session, "runs_rows.html", fragment=True, rows=rows)
        counts = await run_in_threadpool(ledger.attention_counts)
        return self.render(request, session, "runs.html", rows=rows, filters=filters, next_link=next_link,
                           first_link=first_link, active=any(r.active for r in rows), counts=counts)

    async def closing(self, request: Request, session: Session, principal: Principal) -> Response:
        """The runs list's "Closing soon": the runs with undo windows closing within `?expiring=`."""
        ledger = self.ledger_for(principal)
        view = await run_in_threadpool(views.closing_page, ledger, request.query_params.get("expiring") or "")
        counts = await run_in_threadpool(ledger.attention_counts)
        return self.render(request, session, "runs.html", 400 if view.error else 200, rows=[],
                           filters=views.RunFilters(), closing=view, counts=counts)

    async def run(self, request: Request, session: Session, principal: Principal) -> Response:
        run_id = request.path_params["run_id"]
        step = forms.step_param(request.query_params.get("step"))
        view = await run_in_threadpool(run_view.run_page, self.ledger_for(principal), run_id, self.manifests,
                                       None, step)
        return self.render(request, session, "run.html", view=view,
                           graph=run_graph(view.plan, view.dependencies, view.step_href, view.window),
                           can_operate=principal.is_operator,
                           has_compensator=bool(self.state.compensator_cmd))

    async def confirm_rollback(self, request: Request, session: Session, principal: Principal) -> Response:
        """The rollback's confirmation as a page of its own: the Roll back button without JavaScript."""
        ledger = self.ledger_for(principal)
        run_id = request.path_params["run_id"]
        await run_in_threadpool(ledger.run_record, run_id, Access.OPERATE)
        to = request.query_params.get("to") or None  # a rollback after this checkpoint
        at_once = forms.concurrency(request.query_params.get("concurrency"))
        view = await run_in_threadpool(run_view.run_page, ledger, run_id, self.manifests, to)
        return self.render(request, session, "rollback.html", view=view, concurrency=at_once)

    async def job(self, request: Request, session: Session, principal: Principal) -> Response:
        """The rollback panel's job, as the fragment its script polls."""
        job = await run_in_threadpool(run_view.job_page, self.ledger_for(principal), request.path_params["run_id"])
        if job is None:
            return Response("", headers=PAGE_HEADERS)
        return self.render(request, session, "job.html", fragment=True, job=job)

    async def rollback(self, request: Request, session: Session, principal: Principal) -> Response:
        run_id = request.path_params["run_id"]
        form = await request.form()
        try:
            ledger = self.ledger_for(principal)
            to = form.get("to")
            at_once = forms.concurrency(form.get("concurrency"))
            await run_in_threadpool(lambda: ledger.submit_rollback(
                run_id, has_compensator=bool(self.state.compensator_cmd),
                approve_compensations=form.get("approve_compensations") == "on",
                to=to if isinstance(to, str) and to else None, concurrency=at_once))
        except ReversiError as exc:
            return self.after(request, f"/runs/{run_id}", "rollback", rollback_error=exc.message)
        self.state.wake_worker()
        return self.after(request, f"/runs/{run_id}", "rollback")

    async def rollback_progress(self, request: Request, session: Session, principal: Principal) -> Response:
        job = await run_in_threadpool(self.ledger_for(principal).latest_job, request.path_params["run_id"])
        return JSONResponse(job.to_dict(), headers=DATA_HEADERS)

    async def resolve(self, request: Request, session: Session, principal: Principal) -> Response:
        run_id, step = request.path_params["run_id"], int(request.path_params["step"])
        form = await request.form()
        try:
            ledger = self.ledger_for(principal)
            await run_in_threadpool(ledger.run_record, run_id, Access.OPERATE)
            kwargs = forms.resolve_arguments(form)
            if kwargs["status"] == "succeeded" and form.get("accept_missing") != "on":
                missing = await run_in_threadpool(run_view.missing_for_resolve, ledger, run_id, step,
                                                  kwargs.get("result"))
                if missing:
                    return self.after(request, f"/runs/{run_id}", f"step-{step}", form={str(step): forms.typed(form)},
                                      resolve_missing={str(step): missing})
            await run_in_threadpool(lambda: ledger.resolve(run_id, step, **kwargs))
        except ReversiError as exc:
            return self.after(request, f"/runs/{run_id}", f"step-{step}", resolve_error={str(step): exc.message},
                              form={str(step): forms.typed(form)})
        return self.after(request, f"/runs/{run_id}", f"step-{step}")

    async def close_follow_up(self, request: Request, session: Session, principal: Principal) -> Response:
        run_id = request.path_params["run_id"]
        step = forms.step_number(request.path_params["step"])
        form = await request.form()
        note = str(form.get("note") or "").strip() or forms.CLOSED_IN_THE_CONSOLE
        try:
            ledger = self.ledger_for(principal)
            await run_in_threadpool(lambda: ledger.close_follow_up(run_id, step, note))
        except ReversiError as exc:
            return self.after(request, f"/runs/{run_id}", f"follow-up-{step}", follow_up_error={str(step): exc.message},
                              form={f"follow-up-{step}": forms.typed(form)})
        return self.after(request, f"/runs/{run_id}", f"follow-up-{step}")

    async def reconcile(self, request: Request, session: Session, principal: Principal) -> Response:
        """Ask the probes of the run's steps whose outcome is unknown, with the server's reader."""
        run_id = request.path_params["run_id"]
        if not self.state.reader_cmd:
            return self.after(request, f"/runs/{run_id}", "reconcile", reconcile_error=NO_READER)
        try:
            said = await run_in_threadpool(run_view.reconciled, self.ledger_for(principal), run_id,
                                           command_read_back(self.state.reader_cmd))
        except ReversiError as exc:
            return self.after(request, f"/runs/{run_id}", "reconcile", reconcile_error=exc.message)
        return self.after(request, f"/runs/{run_id}", "reconcile", reconciled=said)

    async def journal(self, request: Request, session: Session, principal: Principal) -> Response:
        run_id = request.path_params["run_id"]
        events = await run_in_threadpool(self.ledger_for(principal).events, run_id)
        lines = "".join(compact(e.to_dict()) + "\n" for e in events)
        return Response(lines, media_type="application/x-ndjson",
                        headers={"Content-Disposition": f'attachment; filename="{run_id}.jsonl"', **DATA_HEADERS})

    # -- rollbacks of many runs ----------------------------------------------------------------------

    async def scopes(self, request: Request, session: Session, principal: Principal) -> Response:
        """The scope form; with a scope given, its plan and (for an operator) the confirmation."""
        fields = forms.scope_fields(request.query_params)
        plan, error = None, None
        if any(fields.values()):
            try:
                selection = forms.selection(fields)
                plan = await run_in_threadpool(self.ledger_for(principal).plan_scope, selection)
            except ReversiError as exc:
                error = exc.message
        return self.render(request, session, "scopes.html", fields=fields, plan=plan, error=error,
                           can_operate=principal.is_operator, can_contain=principal.is_admin,
                           has_compensator=bool(self.state.compensator_cmd))

    async def scope_rollback(self, request: Request, session: Session, principal: Principal) -> Response:
        form = await request.form()
        fields = forms.scope_fields(form)
        back = "/scopes?" + urlencode({k: v for k, v in fields.items() if v})
        try:
            selection = forms.selection(fields)
            ledger = self.ledger_for(principal)
            contain = form.get("contain") == "on"
            job = await run_in_threadpool(lambda: ledger.submit_scope_rollback(
                selection, has_compensator=bool(self.state.compensator_cmd), contain=contain,
                reason=str(form.get("reason") or "") or None))
        except ReversiError as exc:
            response = self.after(request, back)
            self.sessions.flash(request, response, "/scopes", {"flash_error": exc.message})  # by path, not query
            return response
        self.state.wake_worker()
        return self.after(request, f"/scopes/jobs/{job.job_id}")

    async def scope_job(self, request: Request, session: Session, principal: Principal) -> Response:
        job = await run_in_threadpool(self.ledger_for(principal).scope_job, request.path_params["job_id"])
        return self.render(request, session, "scope_job.html", job=job.to_dict())

    # -- approvals and halts -------------------------------------------------------------------------

    async def approvals(self, request: Request, session: Session, principal: Principal) -> Response:
        found = await run_in_threadpool(lambda: self.ledger_for(principal).approvals(limit=views.APPROVALS_SHOWN))
        return self.render(request, session, "approvals.html", approvals=found)

    async def decide(self, request: Request, session: Session, principal: Principal) -> Response:
        approval_id, verdict = request.path_params["approval_id"], request.url.path.rsplit("/", 1)[1]
        form = await request.form()
        back = forms.safe_next(str(form.get("next") or "/approvals"))
        ledger = self.ledger_for(principal)
        try:
            note = str(form.get("note") or "") or None
            if verdict == "approve":
                await run_in_threadpool(lambda: ledger.approve(approval_id, note=note))
            else:
                await run_in_threadpool(lambda: ledger.deny(approval_id, note=note or ""))
        except ReversiError as exc:
            return self.after(request, back, approval_id, errors={approval_id: exc.message})
        return self.after(request, back, approval_id)

    async def halts(self, request: Request, session: Session, principal: Principal) -> Response:
        found = await run_in_threadpool(self.ledger_for(principal).halts_in_force)
        return self.render(request, session, "halts.html", halts=found, can_manage=principal.is_admin)

    async def add_halt(self, request: Request, session: Session, principal: Principal) -> Response:
        form = await request.form()
        try:  # first: a key that may not halt is told so on any page, not in a form it is never shown
            require_role(principal, Role.ADMIN)
        except Forbidden as exc:
            return self.after(request, "/halts", flash_error=exc.message)
        scope = {k: (str(form.get(k) or "").strip() or None) for k in ("tool", "actor", "tenant", "environment")}
        if not any(scope.values()) and form.get("everything") != "on":
            everything = f"every new call of tenant {principal.tenant}" if principal.tenant else "every new call"
            return self.after(request, "/halts", error=f"a halt with no scope stops {everything}: tick the box to "
                              "confirm, or give it a scope", form=forms.typed(form), confirm_everything=True)
        try:
            ledger = self.ledger_for(principal)
            await run_in_threadpool(lambda: ledger.add_halt(str(form.get("reason") or ""), **scope))
        except ReversiError as exc:
            return self.after(request, "/halts", error=exc.message, form=forms.typed(form))
        return self.after(request, "/halts")

    async def lift_halt(self, request: Request, session: Session, principal: Principal) -> Response:
        try:
            await run_in_threadpool(self.ledger_for(principal).lift_halts, request.path_params["halt_id"])
        except ReversiError as exc:
            return self.after(request, "/halts", flash_error=exc.message)
        return self.after(request, "/halts")

    async def favicon(self, request: Request) -> Response:
        return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    # -- the routes ----------------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        s = self.signed_in
        return [
            Route("/", s(self.runs), methods=["GET"]),
            Route("/login", self.login, methods=["GET", "POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/runs/{run_id}", s(self.run), methods=["GET"]),
            Route("/runs/{run_id}/rollback", s(self.rollback), methods=["POST"]),
            Route("/runs/{run_id}/rollback", s(self.confirm_rollback), methods=["GET"]),
            Route("/runs/{run_id}/job", s(self.job), methods=["GET"]),
            Route("/runs/{run_id}/rollback.json", s(self.rollback_progress), methods=["GET"]),
            Route("/runs/{run_id}/steps/{step:int}/resolve", s(self.resolve), methods=["POST"]),
            Route("/runs/{run_id}/steps/{step}/follow-up/close", s(self.close_follow_up), methods=["POST"]),
            Route("/runs/{run_id}/reconcile", s(self.reconcile), methods=["POST"]),
            Route("/runs/{run_id}/journal.jsonl", s(self.journal), methods=["GET"]),
            Route("/scopes", s(self.scopes), methods=["GET"]),
            Route("/scopes/rollback", s(self.scope_rollback), methods=["POST"]),
            Route("/scopes/jobs/{job_id}", s(self.scope_job), methods=["GET"]),
            Route("/approvals", s(self.approvals), methods=["GET"]),
            Route("/approvals/{approval_id}/approve", s(self.decide), methods=["POST"]),
            Route("/approvals/{approval_id}/deny", s(self.decide), methods=["POST"]),
            Route("/halts", s(self.halts), methods=["GET"]),
            Route("/halts", s(self.add_halt), methods=["POST"]),
            Route("/halts/{halt_id}/lift", s(self.lift_halt), methods=["POST"]),
            Route("/favicon.ico", self.favicon, methods=["GET"]),
            Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ]
