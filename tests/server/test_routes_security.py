"""Every route of the server (API and console) and of the gateway's HTTP app, read from the apps' own
route tables and classified here: a route nobody classified fails the first test. Then, route by
route: another principal's run, step, approval, halt or key is refused and nothing of it leaks or
changes; a listing shows only what the asker may see; every console form needs its own session's
CSRF token; and without keys, a page of another site (its Origin) or a rebound name (its Host) is
never served as the machine's own admin."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from starlette.routing import Mount, Route
from tests.hostile.store_state import store_state
from tests.server.conftest import Site
from tests.server.test_access import SAMPLES, csrf_of, gateway, sign_in

import reversi
from reversi.core.scopes import Selection
from reversi.engine.access import NO_KEYS_REMOTE
from reversi.engine.scope_jobs import submit_scope_rollback
from reversi.gateway.operator import TOOLS as OPERATOR_TOOLS
from reversi.server import create_app
from reversi.server.api import ENDPOINTS

PUBLIC = "public"  # no principal needed: health, metrics, the document, signing in and out, static files
OWN = "own"  # acts for the asker only: opens its own run, adds a halt or a key within its reach
LISTING = "listing"  # shows what the asker may see of many things
SCOPED = "scoped"  # names one run, step, approval, halt or key: another principal's is refused
GUARDED = "guarded"  # a gateway endpoint: a role, and the run its Reversi-Run-Id names (tests/server/test_access.py)

ROUTES: dict[tuple[str, str], str] = {
    ("GET", "/healthz"): PUBLIC, ("GET", "/metrics"): PUBLIC, ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/login"): PUBLIC, ("POST", "/login"): PUBLIC, ("POST", "/logout"): PUBLIC,
    ("GET", "/favicon.ico"): PUBLIC, ("GET", "/static/{path}"): PUBLIC,
    # the API
    ("POST", "/v1/runs"): OWN, ("GET", "/v1/runs"): LISTING, ("GET", "/v1/runs/{run_id}"): SCOPED,
    ("POST", "/v1/runs/{run_id}/steps"): SCOPED, ("POST", "/v1/runs/{run_id}/steps/{step}/outcome"): SCOPED,
    ("GET", "/v1/runs/{run_id}/plan"): SCOPED, ("POST", "/v1/runs/{run_id}/rollback"): SCOPED,
    ("GET", "/v1/runs/{run_id}/rollback"): SCOPED, ("POST", "/v1/runs/{run_id}/steps/{step}/resolve"): SCOPED,
    ("GET", "/v1/runs/{run_id}/events"): SCOPED, ("GET", "/v1/approvals"): LISTING,
    ("GET", "/v1/runs/{run_id}/follow-ups"): SCOPED, ("POST", "/v1/runs/{run_id}/steps/{step}/follow-up/close"): SCOPED,
    ("POST", "/v1/runs/{run_id}/reconcile"): SCOPED,
    ("POST", "/v1/runs/{run_id}/checkpoints"): SCOPED, ("GET", "/v1/runs/{run_id}/checkpoints"): SCOPED,
    ("POST", "/v1/approvals/{approval_id}/approve"): SCOPED, ("POST", "/v1/approvals/{approval_id}/deny"): SCOPED,
    ("POST", "/v1/halt"): OWN, ("POST", "/v1/resume"): SCOPED, ("GET", "/v1/halts"): LISTING,
    ("POST", "/v1/erase"): OWN, ("POST", "/v1/scopes/plan"): LISTING, ("POST", "/v1/scopes/rollback"): LISTING,
    ("GET", "/v1/scopes/rollback/{job_id}"): SCOPED,
    ("POST", "/v1/keys"): OWN, ("GET", "/v1/keys"): LISTING, ("DELETE", "/v1/keys/{key_id}"): SCOPED,
    # the console
    ("GET", "/"): LISTING, ("GET", "/runs/{run_id}"): SCOPED, ("POST", "/runs/{run_id}/rollback"): SCOPED,
    ("GET", "/runs/{run_id}/rollback"): SCOPED, ("GET", "/runs/{run_id}/job"): SCOPED,
    ("GET", "/runs/{run_id}/rollback.json"): SCOPED, ("POST", "/runs/{run_id}/steps/{step:int}/resolve"): SCOPED,
    ("POST", "/runs/{run_id}/steps/{step}/follow-up/close"): SCOPED, ("POST", "/runs/{run_id}/reconcile"): SCOPED,
    ("GET", "/runs/{run_id}/journal.jsonl"): SCOPED, ("GET", "/approvals"): LISTING,
    ("POST", "/approvals/{approval_id}/approve"): SCOPED, ("POST", "/approvals/{approval_id}/deny"): SCOPED,
    ("GET", "/halts"): LISTING, ("POST", "/halts"): OWN,
    ("GET", "/scopes"): LISTING, ("POST", "/scopes/rollback"): OWN, ("GET", "/scopes/jobs/{job_id}"): SCOPED,
    ("POST", "/halts/{halt_id}/lift"): SCOPED,
}
GATEWAY_ROUTES = {"/healthz": PUBLIC, "/metrics": PUBLIC, "/mcp": GUARDED, "/operator/mcp": GUARDED}
# The operator tools over MCP: those naming a run are refused another tenant's (tests/server/test_access.py).
OPERATOR = {"reversi.plan_rollback": SCOPED, "reversi.execute_rollback": SCOPED, "reversi.resolve_step": SCOPED,
            "reversi.plan_scope": LISTING, "reversi.rollback_scope": LISTING,
            "reversi.list_runs": LISTING, "reversi.halt": OWN, "reversi.resume": OWN, "reversi.reconcile": SCOPED,
            "reversi.follow_ups": SCOPED, "reversi.close_follow_up": SCOPED}
# Principals with no claim on the victim's things: an agent of the same tenant, and each role of another.
INTRUDERS = ["agent2", "outsider", "other-operator", "other-admin"]
MARKER = "victim-marker-8d1c"
HALT_MARKER = "halt-marker-51e0"  # a halt of tenant acme applies to (and is shown to) all of acme


def routes_of(app: Any) -> set[tuple[str, str]]:
    found = set()
    for route in app.routes:
        if isinstance(route, Route):
            found |= {(method, route.path) for method in route.methods or () if method != "HEAD"}
        elif isinstance(route, Mount):
            found.add(("GET", f"{route.path}/{{path}}"))
    return found


def test_every_route_and_operator_tool_is_classified(tmp_path: Path) -> None:
    with reversi.open(f"sqlite:///{tmp_path}/routes.db") as ledger:
        assert routes_of(create_app(ledger, run_jobs=False)) == set(ROUTES)
        gateway_app = gateway(Site("", ledger))
    assert {route.path for route in gateway_app.routes if isinstance(route, Route)} == set(GATEWAY_ROUTES)
    assert {tool.name for tool in OPERATOR_TOOLS} == set(OPERATOR)
    assert {name for name, kind in OPERATOR.items() if kind == SCOPED} == {
        tool.name for tool in OPERATOR_TOOLS if "run_id" in tool.input_schema["properties"]}


class Victim:
    """What the agent `agent` of tenant acme (and its tenant's admin) own: a run with a step that stands
    and one still intended, an approval waiting, a halt and a key."""

    def __init__(self, site: Site) -> None:
        site.add_key("acme-admin", "admin", "acme")
        site.add_key("other-admin", "admin", "other")
        agent = site.client("agent")
        self.run_id = agent.post("/v1/runs", json={}).json()["run_id"]
        steps = f"/v1/runs/{self.run_id}/steps"
        agent.post(steps, json={"tool": "stripe.create_charge", "args": {"memo": MARKER}})
        agent.post(f"{steps}/0/outcome", json={"status": "succeeded", "result": {"id": "ch_1"}})
        agent.post(steps, json={"tool": "stripe.create_charge", "args": {"memo": MARKER}})
        asked = agent.post(steps, json={"tool": "payments.wire", "args": {"memo": MARKER}})
        self.approval_id = asked.json()["approval"]["approval_id"]
        admin = site.client("acme-admin")
        halt = {"reason": HALT_MARKER, "scope": {"tool": "nothing.*"}}
        self.halt_id = admin.post("/v1/halt", json=halt).json()["halt_id"]
        key = {"name": "victim-key", "role": "agent", "tenant": "acme"}
        self.key_id = admin.post("/v1/keys", json=key).json()["id"]
        job = submit_scope_rollback(site.ledger, Selection(key="agent"), actor="acme-admin", principal="acme-admin",
                                    within="acme", approve_compensations=False, attempts=1, contained=[])
        self.values = {"run_id": self.run_id, "step": "1", "approval_id": self.approval_id, "halt_id": self.halt_id,
                       "key_id": self.key_id, "job_id": job.job_id}

    def path(self, template: str) -> str:
        return re.sub(r"{(\w+)(:\w+)?}", lambda m: self.values[m.group(1)], template)


class Session:
    """A principal's API client, and its console session with the session's CSRF token."""

    def __init__(self, site: Site, name: str) -> None:
        self.api = site.client(name)
        self.browser = httpx.Client(base_url=site.url)
        site.clients.append(self.browser)
        assert sign_in(self.browser, site.keys[name]).status_code == 303
        self.token = csrf_of(self.browser.get("/halts").text)


def browsers(site: Site, who: list[str]) -> dict[str, Session]:
    return {name: Session(site, name) for name in who}


def ask(victim: Victim, who: str, method: str, template: str, sessions: dict[str, Session]) -> httpx.Response:
    path = victim.path(template)
    if template.startswith("/v1/"):
        endpoint = next(ep for ep in ENDPOINTS if (ep.method, ep.path) == (method, template))
        body = {"halt_id": victim.halt_id} if template == "/v1/resume" else SAMPLES.get(endpoint.handler.__name__)
        return sessions[who].api.request(method, path, json=body if endpoint.body is not None else None)
    browser, token = sessions[who].browser, sessions[who].token
    if method == "GET":
        return browser.get(path)
    return browser.post(path, data={"csrf": token, "status": "failed", "note": "mine now"})


def test_another_principals_ids_are_refused_on_every_scoped_route_and_change_nothing(site: Site) -> None:
    victim = Victim(site)
    sessions = browsers(site, INTRUDERS)
    scoped = [route for route, kind in ROUTES.items() if kind == SCOPED]
    assert len(scoped) >= 20
    for method, template in scoped:
        before = store_state(site.ledger)
        for who in INTRUDERS:
            answer = ask(victim, who, method, template, sessions)
            where = (who, method, template, answer.status_code, answer.text[:300])
            if template.startswith("/v1/") or method == "GET":
                assert answer.status_code in (401, 403, 404), where
            assert MARKER not in answer.text, where
        assert store_state(site.ledger) == before, (method, template)


def test_listings_show_another_tenant_or_principal_nothing_of_the_victims(site: Site) -> None:
    victim = Victim(site)
    sessions = browsers(site, INTRUDERS)
    secrets = [MARKER, victim.run_id, victim.approval_id, victim.key_id]
    for method, template in (route for route, kind in ROUTES.items() if kind == LISTING):
        for who in INTRUDERS:
            answer = ask(victim, who, method, template, sessions)
            hidden = secrets + ([victim.halt_id, HALT_MARKER] if who != "agent2" else [])
            assert not [s for s in hidden if s in answer.text], (who, method, template, answer.text[:500])


def test_every_console_form_needs_its_own_sessions_csrf_token(site: Site) -> None:
    victim = Victim(site)
    sessions = browsers(site, ["admin", "operator"])
    browser, others_token = sessions["admin"].browser, sessions["operator"].token
    forms = [path for (method, path) in ROUTES if method == "POST" and not path.startswith("/v1/")]
    assert len(forms) >= 7
    for template in forms:
        before = store_state(site.ledger)
        for token in (None, "", others_token, "x" * 40):
            data = {"reason": "halt it", "key": site.keys["admin"], "status": "failed", "note": "n", "everything": "on"}
            answer = browser.post(victim.path(template), data=data | ({"csrf": token} if token is not None else {}))
            assert answer.status_code == 403 and "this form has expired" in answer.text, (template, token)
        assert store_state(site.ledger) == before, template


FOREIGN: list[dict[str, str]] = [{"Origin": "http://evil.example"}, {"Origin": "null"},
                                 {"Host": "attacker.example:8080"}, {"Origin": "http://127.0.0.1.evil.example"}]


def test_without_keys_no_route_serves_another_sites_page_or_a_rebound_name_as_the_admin(
    make_site: Callable[..., Site],
) -> None:
    site = make_site()
    local = site.client()
    run_id = local.post("/v1/runs", json={}).json()["run_id"]
    values = {"run_id": run_id, "step": "0", "approval_id": "apr_" + "0" * 32, "halt_id": "halt_x", "key_id": "k" * 12,
              "path": "console.css", "job_id": "scopejob_x"}
    clients = [httpx.Client(base_url=site.url, headers=headers) for headers in FOREIGN]
    site.clients += clients
    for (method, template), kind in ROUTES.items():
        if kind == PUBLIC:
            continue
        before = store_state(site.ledger)
        for headers, client in zip(FOREIGN, clients, strict=True):
            path = re.sub(r"{(\w+)(:\w+)?}", lambda m: values[m.group(1)], template)
            answer = client.request(method, path, json={} if method != "GET" else None, follow_redirects=False)
            where = (headers, method, template, answer.status_code)
            if template.startswith("/v1/"):
                assert answer.status_code == 401 and answer.json()["error"]["message"] == NO_KEYS_REMOTE, where
            else:
                assert answer.status_code in (303, 401, 403), where  # 401: a page's script asking (JSON, fragments)
                assert answer.status_code != 303 or answer.headers["location"].startswith("/login"), where
        assert store_state(site.ledger) == before, (method, template)


def test_public_routes_need_no_key_and_give_nothing_of_a_run(site: Site) -> None:
    victim = Victim(site)
    anonymous = site.client()
    for (method, template), classified in ROUTES.items():
        if classified == PUBLIC and method == "GET":
            path = victim.path(template) if "{path}" not in template else "/static/console.css"
            answer = anonymous.get(path)
            assert answer.status_code == 200, (template, answer.status_code)
            assert MARKER not in answer.text and victim.run_id not in answer.text, template
