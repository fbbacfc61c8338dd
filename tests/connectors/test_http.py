"""The http connector: REST tools from a YAML file, against a small fake widgets API."""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tests.connectors.conftest import Done, connectors_cli, reversi_cli
from tests.connectors.fake_server import URL, FakeBase, bearer, served_with

import reversi
from reversi.connectors import ConnectorError, DownstreamError, connector, find_tool

TOOLS = """\
version: 1
base_url: "${WIDGETS_URL}"
headers: {Authorization: "Bearer ${WIDGETS_TOKEN}"}
tools:
  http.create_widget:
    method: POST
    url: /widgets
    params: {name: string, size: "integer?"}
    manifest:
      compensation:
        tool: http.delete_widget
        args: {id: "$result.id", version: "$result.version"}
        kind: inverse
      verification:
        tool: http.get_widget
        args: {id: "$result.id"}
        expect: {found: false}
  http.delete_widget:
    kind: compensation
    method: DELETE
    url: /widgets/{id}
    params: {id: string, version: integer}
    idempotency_header: Idempotency-Key
    done_statuses: [404]
    unchanged: [version]
  http.get_widget:
    kind: read
    url: /widgets/{id}
    params: {id: string}
    done_statuses: [404]
    manifest: {effect: read}
"""


@dataclass
class FakeWidgets(FakeBase):
    widgets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/widgets", self.create, methods=["POST"]),
                                 Route("/widgets/{id}", self.one, methods=["GET", "DELETE"])])

    def edit(self, widget_id: str, **values: Any) -> None:
        """Someone else changes the widget: its version moves on."""
        widget = self.widgets[widget_id]
        widget.update(values, version=widget["version"] + 1)

    async def create(self, request: Request) -> Response:
        if not bearer(request, "tok"):
            return JSONResponse({"error": {"message": "bad token"}}, 401)
        body = await request.json()
        widget = {"id": f"w_{len(self.widgets) + 1}", "name": body["name"], "size": body.get("size"), "version": 1}
        self.widgets[widget["id"]] = widget
        return JSONResponse(widget, 201)

    async def one(self, request: Request) -> Response:
        found = self.widgets.get(request.path_params["id"])
        if found is None:
            return JSONResponse({"error": {"message": "no such widget"}}, 404)
        if request.method == "DELETE":
            self.effects[f"delete {request.headers.get('idempotency-key')}"] += 1
            del self.widgets[found["id"]]
            return Response(status_code=204)
        return JSONResponse(found)


@pytest.fixture
def widgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWidgets]:
    (tmp_path / "tools.yaml").write_text(TOOLS)
    settings = {"REVERSI_HTTP_TOOLS": str(tmp_path / "tools.yaml"), "WIDGETS_URL": URL, "WIDGETS_TOKEN": "tok"}
    with served_with(FakeWidgets(), monkeypatch, **settings) as fake:
        yield fake


def test_tools_from_the_file_roll_back_through_the_cli_with_their_manifest(
    db_url: str, widgets: FakeWidgets, tmp_path: Path, rollback: Callable[..., Done]
) -> None:
    manifest = tmp_path / "http.yaml"
    manifest.write_text(connectors_cli("manifest", "http").out)
    assert reversi_cli("manifest", "check", str(manifest)).code == 0
    widgets.widgets["w_0"] = {"id": "w_0", "name": "from before"}
    create = find_tool("http.create_widget")
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        made = run.call("http.create_widget", {"name": "gear", "size": 3}, create.fn)

    done = rollback(run.id, manifest)

    assert done.code == 0, done.err + done.out
    assert widgets.widgets == {"w_0": {"id": "w_0", "name": "from before"}}
    key = hashlib.sha256(f"{run.id}:0:http.delete_widget".encode()).hexdigest()
    call = {"run_id": run.id, "step": 0, "tool": "http.delete_widget", "original_tool": "http.create_widget",
            "args": {"id": made["id"], "version": 1}, "idempotency_key": key, "attempt": 1}
    again = connectors_cli("compensate", stdin=json.dumps(call))
    assert (again.code, json.loads(again.out)) == (0, {"ok": True})
    assert widgets.effects == {f"delete {key}": 1}


def test_a_widget_edited_since_is_not_deleted_and_the_step_stays_standing(
    db_url: str, widgets: FakeWidgets, tmp_path: Path, rollback: Callable[..., Done]
) -> None:
    manifest = tmp_path / "http.yaml"
    manifest.write_text(connectors_cli("manifest", "http").out)
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        made = run.call("http.create_widget", {"name": "gear"}, find_tool("http.create_widget").fn)
    widgets.edit(made["id"], name="a colleague's gear")

    done = rollback(run.id, manifest)

    assert done.code == 2
    assert done.json()["failed"][0]["error"] == (
        f"changed since step 0: version of /widgets/{made['id']} is 2, the step left 1")
    assert widgets.widgets[made["id"]]["name"] == "a colleague's gear" and not widgets.effects
    plan = json.loads(reversi_cli("--db", db_url, "plan", run.id, "-m", str(manifest), "--json").out)
    assert [a["kind"] for a in plan["actions"]] == ["compensate"]


def test_the_file_is_listed_and_its_tools_get_the_declared_parameters(widgets: FakeWidgets) -> None:
    http = connector("http")
    assert [t.name for t in http.tools] == ["http.create_widget", "http.delete_widget", "http.get_widget"]
    done = connectors_cli("read", stdin=json.dumps({"tool": "http.get_widget", "arguments": {}}))
    assert (done.code, done.err) == (1, "bad argument id: required\n")
    assert find_tool("http.get_widget").invoke({"id": "nope"}) == {"found": False, "status": 404}
    widgets.fail_next("GET /widgets/w_9", 503, {"error": {"message": "try later"}})
    with pytest.raises(DownstreamError, match=r"^http\.get_widget GET /widgets/w_9: HTTP 503: try later$"):
        find_tool("http.get_widget").invoke({"id": "w_9"})


def test_a_missing_setting_and_a_bad_file_are_named(
    widgets: FakeWidgets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WIDGETS_TOKEN")
    with pytest.raises(ConnectorError, match=r"^WIDGETS_TOKEN is not set: http\.create_widget needs it$"):
        find_tool("http.create_widget").invoke({"name": "x"})
    (tmp_path / "tools.yaml").write_text(textwrap.dedent("""\
        tools:
          http.x: {url: /x, verb: GET}
    """))
    done = connectors_cli("list")
    assert (done.code, done.err) == (1, "http.x: unknown key 'verb'\n")
    monkeypatch.delenv("REVERSI_HTTP_TOOLS")
    assert connector("http").tools == ()
