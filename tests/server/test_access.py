"""Principals, roles and tenants on every endpoint of the server and of the gateway over HTTP. The
tests read the route tables, so a new route without a sample body here, or without the isolation
every run-scoped route has, fails."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.routing import Route
from tests.server.conftest import SERVER, WAIT_S, Site, ThreadServer

from reversi.engine.access import NO_KEYS_REMOTE
from reversi.engine.keys import Role, create_key, revoke_key
from reversi.engine.run import run_coroutine
from reversi.gateway.http import GUARDED
from reversi.gateway.http import create_app as gateway_app
from reversi.gateway.operator import TOOLS as OPERATOR_TOOLS
from reversi.gateway.options import GatewayOptions, UpstreamSpec
from reversi.gateway.upstream import UpstreamPool
from reversi.server import create_app
from reversi.server.api import ENDPOINTS
from reversi.server.endpoint import Endpoint

RANK = {Role.AGENT: 0, Role.OPERATOR: 1, Role.ADMIN: 2}

# A body each endpoint accepts, keyed by its handler's name.
SAMPLES: dict[str, dict[str, object]] = {
    "open_run": {"scope": {"actor": "a"}},
    "record_step": {"tool": "github.create_repo", "args": {"name": "x"}},
    "record_outcome": {"status": "failed", "error": "no"},
    "start_rollback": {},
    "resolve_step": {"status": "failed", "note": "checked"},
    "close_follow_up": {"note": "called the customer"},
    "approve": {"note": "fine"},
    "deny": {"note": "not fine"},
    "add_halt": {"reason": "testing", "scope": {"tool": "nothing.*"}},
    "resume": {"halt_id": "halt_none"},
    "create_key": {"name": "extra", "role": "agent", "tenant": "acme"},
    "add_checkpoint": {"name": "checked"},
    "erase": {"tenant": "no-such-tenant"},  # without confirm: refused as bad input, nothing erased
    "plan_scope": {"key": "agent"},
    "start_scope_rollback": {"key": "agent"},  # without confirm: the plan
}


def test_every_endpoint_with_a_body_has_a_sample_here() -> None:
    assert {ep.handler.__name__ for ep in ENDPOINTS if ep.body is not None} <= set(SAMPLES)


def url(ep: Endpoint, **values: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], ep.path)


def call(client: httpx.Client, ep: Endpoint, **values: str) -> httpx.Response:
    body = SAMPLES.get(ep.handler.__name__) if ep.body is not None else None
    return client.request(ep.method, url(ep, **values), json=body)


def setup_run(client: httpx.Client) -> dict[str, str]:
    """A run of the client's principal with one intended step and a pending forward approval."""
    run_id = client.post("/v1/runs", json={}).json()["run_id"]
    assert client.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge"}).status_code == 201
    pending = client.post(f"/v1/runs/{run_id}/steps", json={"tool": "payments.wire", "args": {}})
    return {"run_id": run_id, "step": "0", "approval_id": pending.json()["approval"]["approval_id"]}


@pytest.mark.parametrize("role", ["agent", "operator", "admin"])
def test_each_role_reaches_exactly_the_endpoints_its_role_allows(site: Site, role: str) -> None:
    client = site.client(role)
    spare, _ = create_key(site.ledger.store, "spare", "agent", "acme")
    values = setup_run(client) | {"key_id": spare.key_id, "job_id": "scopejob_none"}
    for ep in ENDPOINTS:
        answer = call(client, ep, **values)
        if RANK[Role(role)] >= RANK[ep.role]:
            assert answer.status_code not in (401, 403), (ep.method, ep.path, answer.text)
        else:
            assert answer.status_code == 403, (ep.method, ep.path, answer.text)
            assert answer.json()["error"]["message"].startswith(f"this needs an {ep.role.value} key")


def test_another_principals_key_is_refused_on_every_run_scoped_route(site: Site) -> None:
    victim = site.client("agent")
    values = setup_run(victim)
    run_id = values["run_id"]
    before = len(site.ledger.get_run(run_id).events())
    scoped = [ep for ep in ENDPOINTS if "{run_id}" in ep.path or "{approval_id}" in ep.path]
    assert len(scoped) >= 10
    for ep in scoped:
        # an intruder with the role the route needs: an agent (same tenant or not), or another tenant's operator
        intruders = ["agent2", "outsider"] if ep.role is Role.AGENT else ["other-operator"]
        for who in intruders:
            answer = call(site.client(who), ep, **values)
            assert answer.status_code == 403, (who, ep.method, ep.path, answer.text)
            owned = values["approval_id"] if "{approval_id}" in ep.path else run_id
            assert answer.json()["error"] == {"code": "forbidden", "message": f"{owned} belongs to another principal"}
    for who in ("agent2", "outsider", "operator"):
        hijack = site.client(who).post("/v1/runs", headers={"Reversi-Run-Id": run_id}, json={})
        assert hijack.status_code == 403
        assert hijack.json()["error"]["message"] == f"{run_id} belongs to another principal"
    assert len(site.ledger.get_run(run_id).events()) == before
    assert site.client("other-operator").get("/v1/runs").json()["items"] == []
    assert site.client("other-operator").get("/v1/approvals").json()["items"] == []
    assert run_id not in {r["run_id"] for r in site.client("agent2").get("/v1/runs").json()["items"]}


def test_an_operator_reads_and_operates_on_its_tenants_runs_but_does_not_record_in_them(site: Site) -> None:
    values = setup_run(site.client("agent"))
    operator = site.client("acme-operator")
    run_id = values["run_id"]
    assert operator.get(f"/v1/runs/{run_id}").status_code == 200
    assert operator.get(f"/v1/runs/{run_id}/plan").status_code == 200
    assert operator.post(f"/v1/runs/{run_id}/steps/0/resolve", json={"status": "failed", "note": "no"}).status_code \
        == 200
    refused = operator.post(f"/v1/runs/{run_id}/steps", json={"tool": "x"})
    assert refused.status_code == 403 and "belongs to another principal" in refused.json()["error"]["message"]
    own = site.client("agent").post(f"/v1/runs/{run_id}/rollback", json={})
    assert own.status_code == 403 and own.json()["error"]["message"].startswith("this needs an operator key")


def test_without_a_valid_key_every_v1_endpoint_answers_401(site: Site) -> None:
    _, revoked = create_key(site.ledger.store, "gone", "admin")
    revoke_key(site.ledger.store, revoked.split("_")[1])
    for headers in ({}, {"Authorization": "Bearer rvk_nope"}, {"Authorization": f"Bearer {revoked}"},
                    {"Authorization": "Basic abc"}):
        client = httpx.Client(base_url=site.url, headers=headers)
        site.clients.append(client)
        for ep in ENDPOINTS:
            answer = call(client, ep, run_id="run_x", step="0", approval_id="apr_x", key_id="k", job_id="j")
            assert answer.status_code == 401, (headers, ep.method, ep.path)
            assert answer.json()["error"]["code"] == "unauthorized"
            assert answer.headers["www-authenticate"] == "Bearer"
    anonymous = site.client()
    assert anonymous.get("/healthz").status_code == 200
    assert anonymous.get("/metrics").status_code == 200
    assert anonymous.get("/openapi.json").status_code == 200


def test_with_no_keys_loopback_requests_act_as_the_admin_local_until_a_key_exists(
    make_site: Callable[..., Site],
) -> None:
    site = make_site()
    client = site.client()
    assert client.post("/v1/runs", json={}).json()["principal"] == "local"
    assert client.get("/v1/halts").status_code == 200
    made = client.post("/v1/keys", json={"name": "first-admin", "role": "admin"})
    assert made.status_code == 201 and made.json()["key"].startswith("rvk_")
    assert client.get("/v1/halts").status_code == 401
    keyed = httpx.Client(base_url=site.url, headers={"Authorization": f"Bearer {made.json()['key']}"})
    site.clients.append(keyed)
    assert [k["name"] for k in keyed.get("/v1/keys").json()["items"]] == ["first-admin"]


def test_a_key_revoked_while_its_agent_is_recording_is_refused_at_once(site: Site) -> None:
    """The recording endpoints keep principals once read; their write looks at the key again."""
    agent = site.client("agent")
    run_id = agent.post("/v1/runs", json={}).json()["run_id"]
    step = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge"})
    assert step.status_code == 201
    revoke_key(site.ledger.store, site.keys["agent"].split("_")[1])
    refused = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge"})
    late = agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "succeeded", "result": {}})
    for answer in (refused, late):
        assert answer.status_code == 401 and answer.json()["error"]["message"] == "unknown or revoked API key"
    assert [e.type for e in site.ledger.get_run(run_id).events()] == ["run_opened", "intended"]  # nothing more


def test_once_a_key_exists_the_loopback_admin_can_no_longer_record(make_site: Callable[..., Site]) -> None:
    site = make_site()
    local = site.client()
    run_id = local.post("/v1/runs", json={}).json()["run_id"]
    assert local.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge"}).status_code == 201
    create_key(site.ledger.store, "first-admin", "admin")
    refused = local.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "succeeded", "result": {}})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert site.ledger.get_run(run_id).step_state(0).status.value == "intended"


def test_with_no_keys_a_client_that_is_not_on_this_machine_is_refused(db_url: str, manifest: Path) -> None:
    import reversi

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("10.1.2.3", 5555))
        async with httpx.AsyncClient(transport=transport, base_url="http://reversi") as client:
            return await client.get("/v1/runs")

    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        app = create_app(ledger, run_jobs=False)
        answer = run_coroutine(ask())  # in a thread of its own if some loop is running here
    assert answer.status_code == 401 and answer.json()["error"]["message"] == NO_KEYS_REMOTE


def test_the_server_refuses_to_serve_a_public_address_without_keys(db_url: str) -> None:
    done = subprocess.run([str(SERVER), "--host", "0.0.0.0", "--port", "0", "--db", db_url],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(
        "reversi-server: error: the store holds no API keys: refusing to serve 0.0.0.0 without them")


def test_an_admin_confined_to_a_tenant_manages_only_that_tenants_keys(site: Site) -> None:
    key = site.add_key("acme-admin", "admin", "acme")
    assert key
    admin = site.client("acme-admin")
    assert admin.post("/v1/keys", json={"name": "x", "role": "admin"}).status_code == 403
    assert admin.post("/v1/keys", json={"name": "x", "role": "agent", "tenant": "acme"}).status_code == 201
    tenants = {k["tenant"] for k in admin.get("/v1/keys").json()["items"]}
    assert tenants == {"acme"}
    unconfined = next(k for k in site.client("admin").get("/v1/keys").json()["items"] if k["name"] == "operator")
    assert admin.delete(f"/v1/keys/{unconfined['id']}").status_code == 404


def test_an_admin_confined_to_a_tenant_halts_lists_and_lifts_only_that_tenant(site: Site) -> None:
    site.add_key("acme-admin", "admin", "acme")
    acme, admin = site.client("acme-admin"), site.client("admin")
    other = admin.post("/v1/halt", json={"reason": "other's", "scope": {"tenant": "other"}}).json()
    everyone = admin.post("/v1/halt", json={"reason": "everyone"}).json()

    refused = acme.post("/v1/halt", json={"reason": "x", "scope": {"tenant": "other"}})
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "a key confined to tenant acme can only halt tenant acme"
    own = acme.post("/v1/halt", json={"reason": "acme only"})
    assert own.status_code == 201 and own.json()["scope"] == {"tenant": "acme"}  # not every tenant's calls
    assert [h["halt_id"] for h in acme.get("/v1/halts").json()["items"]] == [own.json()["halt_id"]]
    assert acme.post("/v1/resume", json={"halt_id": other["halt_id"]}).status_code == 404
    assert acme.post("/v1/resume", json={}).json() == {"lifted": 1}
    assert {h["halt_id"] for h in admin.get("/v1/halts").json()["items"]} == {other["halt_id"], everyone["halt_id"]}


def test_a_key_name_is_one_principal_so_another_tenant_cannot_take_it(site: Site) -> None:
    """A tenant admin minting a key named like another tenant's agent would own that agent's runs."""
    site.add_key("acme-admin", "admin", "acme")
    run_id = site.client("outsider").post("/v1/runs", json={}).json()["run_id"]  # outsider: tenant other
    name = "outsider"
    for client, tenant in ((site.client("acme-admin"), "acme"), (site.client("admin"), None)):
        taken = client.post("/v1/keys", json={"name": name, "role": "agent", "tenant": tenant})
        assert taken.status_code == 409, taken.text
        assert taken.json()["error"]["message"] == (
            "the name outsider is a principal of tenant other: a key for it must have the same tenant")
    again = site.client("admin").post("/v1/keys", json={"name": name, "role": "agent", "tenant": "other"})
    assert again.status_code == 201  # a second key for the same principal (to rotate the first)
    assert site.client("acme-admin").get(f"/v1/runs/{run_id}").status_code == 403


def test_revoking_every_key_does_not_reopen_the_no_keys_mode(make_site: Callable[..., Site]) -> None:
    site = make_site()
    only, key = create_key(site.ledger.store, "only-admin", "admin")
    revoke_key(site.ledger.store, only.key_id, last_admin=True)
    for client in (site.client(), httpx.Client(base_url=site.url, headers={"Authorization": f"Bearer {key}"})):
        site.clients.append(client)
        answer = client.post("/v1/halt", json={"reason": "who is this?"})
        assert answer.status_code == 401, answer.text
    assert site.ledger.halts() == []


def test_another_principals_run_is_refused_before_its_body_is_read(site: Site) -> None:
    values = setup_run(site.client("agent"))
    run_id = values["run_id"]
    for answer in (
        site.client("agent2").post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "nonsense"}),
        site.client("agent2").post(f"/v1/runs/{run_id}/steps", json={"tool": 5}),
        site.client("other-operator").post(f"/v1/runs/{run_id}/rollback", json={"confirm": "yes"}),
        site.client("other-operator").post(f"/v1/runs/{run_id}/steps/0/resolve", json={}),
        site.client("other-operator").post(f"/v1/approvals/{values['approval_id']}/deny", json={}),
    ):
        assert answer.status_code == 403, answer.text


def test_a_wrong_method_names_every_method_of_the_path_and_a_trailing_slash_is_no_endpoint(site: Site) -> None:
    agent = site.client("agent")
    wrong = agent.put("/v1/runs")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD, POST"
    assert wrong.json()["error"] == {"code": "method_not_allowed", "message": "PUT is not allowed on /v1/runs"}
    slash = agent.post("/v1/runs/", json={})
    assert slash.status_code == 404 and slash.json()["error"]["code"] == "not_found"


def test_keyless_mode_serves_no_other_sites_page_and_no_rebound_name(make_site: Callable[..., Site]) -> None:
    """Without keys, loopback requests act as the admin: a page of another site in the operator's
    browser (it sends Origin) or a DNS-rebound name (Host) must not."""
    site = make_site()
    for headers in ({"Origin": "http://evil.example"}, {"Host": "attacker.example:8080"}, {"Origin": "null"}):
        client = httpx.Client(base_url=site.url, headers=headers)
        site.clients.append(client)
        refused = client.post("/v1/halt", content=b'{"reason": "from a page"}', headers={"Content-Type": "text/plain"})
        assert refused.status_code == 401 and refused.json()["error"]["message"] == NO_KEYS_REMOTE, headers
        page = client.get("/halts", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"].startswith("/login"), headers
    assert site.ledger.halts() == []
    for headers in ({"Origin": site.url}, {"Host": "localhost"}, {}):
        client = httpx.Client(base_url=site.url, headers=headers)
        site.clients.append(client)
        assert client.get("/v1/halts").status_code == 200, headers


def test_keyless_recording_keeps_refusing_other_sites_after_a_local_request(make_site: Callable[..., Site]) -> None:
    """The recording routes keep the principal they read; one read for a local request must not
    carry over to a page of another site sending the same (absent) key."""
    site = make_site()
    local = httpx.Client(base_url=site.url)
    evil = httpx.Client(base_url=site.url, headers={"Origin": "http://evil.example"})
    site.clients += [local, evil]
    run_id = local.post("/v1/runs", json={}).json()["run_id"]
    assert local.post(f"/v1/runs/{run_id}/steps", json={"tool": "t.unmanifested"}).status_code == 201
    refused = evil.post(f"/v1/runs/{run_id}/steps", json={"tool": "t.unmanifested"})
    assert refused.status_code == 401 and refused.json()["error"]["message"] == NO_KEYS_REMOTE
    assert local.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "succeeded"}).status_code == 200
    assert [s.index for s in site.ledger.get_run(run_id).snapshot().steps] == [0]


def csrf_of(page: str) -> str:
    """The CSRF token a console page's forms carry."""
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def sign_in(browser: httpx.Client, key: str) -> httpx.Response:
    """Sign in to the console with `key`, as its sign-in form does."""
    return browser.post("/login", data={"key": key, "csrf": csrf_of(browser.get("/login").text)})


def test_the_console_keeps_the_apis_limits_on_forms_page_links_and_job_progress(
    make_site: Callable[..., Site],
) -> None:
    site = make_site()
    local = site.client()  # no keys: the loopback admin
    big = local.post("/halts", content=b"reason=x&tool=" + b"a" * (1 << 20),
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert big.status_code == 413 and site.ledger.halts() == []
    deep = local.get("/", params={"after": "[" * 3000 + "]" * 3000})
    assert deep.status_code == 400 and "bad page link" in deep.text
    agent_key = site.add_key("agent", "agent")
    run = site.ledger.acting_as("agent").start_run()  # the agent's own run
    signed_in = httpx.Client(base_url=site.url)
    site.clients.append(signed_in)
    assert sign_in(signed_in, agent_key).status_code in (200, 303)
    assert signed_in.get(f"/runs/{run.id}/rollback.json").status_code == 403  # as GET .../rollback: operators


def test_signing_out_of_the_console_ends_the_session_for_every_copy_of_its_cookie(site: Site) -> None:
    browser = httpx.Client(base_url=site.url)
    site.clients.append(browser)
    assert sign_in(browser, site.keys["admin"]).status_code == 303
    copied = dict(browser.cookies)
    halts = browser.get("/halts")
    assert halts.status_code == 200
    form = csrf_of(halts.text)
    assert browser.post("/logout", data={"csrf": form}).status_code == 303
    replay = httpx.Client(base_url=site.url, cookies=copied)
    site.clients.append(replay)
    assert replay.get("/halts").status_code == 303  # to the sign-in page: the old cookie signs nobody in
    assert replay.post("/halts", data={"reason": "with an old cookie", "csrf": form}).status_code == 303
    assert site.ledger.halts() == []


def test_console_errors_are_shown_where_no_form_is_left_to_show_them(site: Site) -> None:
    """A step settled meanwhile, or an approval out of reach, has no form on the page: the error
    must still be on it."""
    run = site.ledger.acting_as("agent").start_run()
    run.begin("stripe.create_charge", {"amount": 5}).succeeded({"id": "ch_5"})
    browser = httpx.Client(base_url=site.url)
    site.clients.append(browser)
    assert sign_in(browser, site.keys["operator"]).status_code == 303
    form = csrf_of(browser.get(f"/runs/{run.id}").text)
    settled = browser.post(f"/runs/{run.id}/steps/0/resolve",
                           data={"status": "failed", "note": "saw it fail", "csrf": form})
    assert settled.status_code == 303  # to the run page, which shows the error
    assert "only intended or uncertain steps can be resolved" in browser.get(f"/runs/{run.id}").text
    missing = "apr_" + "0" * 32
    unknown = browser.post(f"/approvals/{missing}/approve", data={"csrf": form})
    assert unknown.status_code == 303
    shown = browser.get(unknown.headers["location"]).text
    assert missing in shown and f"no approval {missing}" in shown


def test_a_malformed_origin_is_not_this_machine_and_breaks_nothing(make_site: Callable[..., Site]) -> None:
    site = make_site()
    odd = httpx.Client(base_url=site.url, headers={"Origin": "http://[::1"})
    site.clients.append(odd)
    assert odd.get("/v1/halts").status_code == 401  # keyless: not `local`
    key = site.add_key("agent", "agent")
    keyed = httpx.Client(base_url=site.url, headers={"Origin": "http://[::1", "Authorization": f"Bearer {key}"})
    site.clients.append(keyed)
    assert keyed.post("/v1/runs", json={}).status_code == 201


def test_signing_out_twice_or_without_signing_in_is_harmless(site: Site) -> None:
    with site.ledger.store.write() as q:
        for _ in range(2):
            q.sign_out("a" * 64, "2099-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.000000Z")
    anonymous = httpx.Client(base_url=site.url)
    site.clients.append(anonymous)
    assert anonymous.post("/logout", data={"csrf": csrf_of(anonymous.get("/login").text)}).status_code == 303
    with site.ledger.store.read() as q:
        assert q.execute("SELECT count(*) FROM console_signouts").fetchone()[0] == 1  # only the one above


# -- the gateway's HTTP endpoints: the same keys, roles and runs -----------------------------------

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def gateway(site: Site) -> Starlette:
    """The gateway's HTTP app over the site's ledger, with one upstream that is never started (only
    the guards and the operator tools are under test)."""
    options = GatewayOptions((), db=site.ledger.settings.db, http=("127.0.0.1", 0))
    return gateway_app(options, site.ledger, UpstreamPool((UpstreamSpec("idle", ("true",)),)), 0)


@pytest.fixture
def gateway_url(site: Site) -> Iterator[str]:
    """`gateway(site)` served on a loopback port."""
    served = ThreadServer(gateway(site))
    yield served.url
    served.stop()


def test_every_gateway_route_but_health_and_metrics_is_guarded_by_a_role(site: Site) -> None:
    paths = {route.path for route in gateway(site).routes if isinstance(route, Route)}
    assert paths - {"/healthz", "/metrics"} == {path for path, _ in GUARDED}


@pytest.mark.parametrize("role", ["agent", "operator", "admin"])
def test_each_role_reaches_exactly_the_gateway_endpoints_its_role_allows(site: Site, gateway_url: str,
                                                                        role: str) -> None:
    client = httpx.Client(base_url=gateway_url, headers={"Authorization": f"Bearer {site.keys[role]}"})
    site.clients.append(client)
    for path, needed in GUARDED:
        answer = client.post(path, json=TOOLS_LIST, headers=MCP_HEADERS)
        if RANK[Role(role)] >= RANK[needed]:
            assert answer.status_code not in (401, 403), (path, answer.text)
        else:
            assert answer.status_code == 403, (path, answer.text)
            assert answer.json()["error"]["message"].startswith(f"this needs an {needed.value} key")


def test_without_a_valid_key_every_gateway_endpoint_answers_401(site: Site, gateway_url: str) -> None:
    _, revoked = create_key(site.ledger.store, "gone", "admin")
    revoke_key(site.ledger.store, revoked.split("_")[1])
    for headers in ({}, {"Authorization": "Bearer rvk_nope"}, {"Authorization": f"Bearer {revoked}"},
                    {"Authorization": "Basic abc"}):
        for path, _ in GUARDED:
            answer = httpx.post(f"{gateway_url}{path}", json=TOOLS_LIST, headers={**MCP_HEADERS, **headers})
            assert answer.status_code == 401, (headers, path, answer.text)
            assert answer.json()["error"]["code"] == "unauthorized"
            assert answer.headers["www-authenticate"] == "Bearer"


def test_another_principals_run_is_refused_on_the_gateways_endpoints(site: Site, gateway_url: str) -> None:
    values = setup_run(site.client("agent"))
    run_id = values["run_id"]
    for who in ("agent2", "outsider", "operator"):
        answer = httpx.post(f"{gateway_url}/mcp", json=TOOLS_LIST, headers={
            **MCP_HEADERS, "Authorization": f"Bearer {site.keys[who]}", "Reversi-Run-Id": run_id})
        assert answer.status_code == 403, (who, answer.text)
        assert answer.json()["error"] == {"code": "forbidden", "message": f"{run_id} belongs to another principal"}
    own = httpx.post(f"{gateway_url}/mcp", json=TOOLS_LIST, headers={
        **MCP_HEADERS, "Authorization": f"Bearer {site.keys['agent']}", "Reversi-Run-Id": run_id})
    assert own.status_code not in (401, 403), own.text

    async def operator_tools(who: str) -> dict[str, str]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {site.keys[who]}"}, timeout=WAIT_S) as http,
            Client(streamable_http_client(f"{gateway_url}/operator/mcp", http_client=http), cache=None) as mcp,
        ):
            answers = {}
            for tool in OPERATOR_TOOLS:
                if "run_id" in tool.input_schema["properties"]:
                    more = {"reversi.resolve_step": {"step": 0, "status": "failed", "note": "no"},
                            "reversi.close_follow_up": {"step": 0, "note": "no"}}
                    args = {"run_id": run_id} | more.get(tool.name, {})
                    result = await mcp.call_tool(tool.name, args)
                    answers[tool.name] = result.content[0].text if result.is_error else "ok"  # type: ignore[union-attr]
            return answers

    refused = run_coroutine(operator_tools("other-operator"))
    assert len(refused) == 6 and set(refused.values()) == {f"{run_id} belongs to another principal"}, refused
    assert run_coroutine(operator_tools("acme-operator"))["reversi.plan_rollback"] == "ok"
    assert site.client("other-operator").get(f"/v1/runs/{run_id}").status_code == 403
