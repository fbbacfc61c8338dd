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
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tests.connectors.conftest import Done, connectors_cli, reversi_cli
from tests.connectors.fake_server import URL, FakeBase, bearer, served_with, serving
from tests.connectors.forged import assert_refused, forgeries

import reversi
from reversi.connectors import ConnectorError, DownstreamError, connector, find_tool
from reversi.connectors._seal import FIELD

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
  http.put_widget:
    method: PUT
    url: /widgets/{id}
    params: {id: string, name: string}
    manifest:
      compensation: {tool: http.delete_widget, args: {id: "$args.id", version: "$result.version"}}
  http.create_gadget:
    method: POST
    url: /widgets
    params: {name: string}
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
                                 Route("/widgets/{id:path}", self.one, methods=["GET", "PUT", "DELETE"])])

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
        if request.method == "PUT":
            widget = {"id": request.path_params["id"], "name": (await request.json())["name"], "version": 1}
            self.widgets[widget["id"]] = widget
            return JSONResponse(widget)
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
            "args": {"result": made, "step": 0}, "idempotency_key": key, "attempt": 1}
    again = connectors_cli("compensate", stdin=json.dumps(call))
    assert (again.code, json.loads(again.out)) == (0, {"ok": True})
    assert widgets.effects == {f"delete {key}": 1}
    loose = connectors_cli("compensate", stdin=json.dumps({**call, "args": {"result": made, "id": "w_0"}}))
    assert (loose.code, loose.err) == (1, "bad argument id: http.delete_widget takes no such argument\n")


def test_the_manifest_gives_each_compensation_the_sealed_result_and_the_connector_resolves_its_args(
    db_url: str, widgets: FakeWidgets, tmp_path: Path, rollback: Callable[..., Done]
) -> None:
    manifest = tmp_path / "http.yaml"
    manifest.write_text(connectors_cli("manifest", "http").out)
    entries = yaml.safe_load(manifest.read_text())["tools"]
    assert [entries[name]["compensation"]["args"] for name in ("http.create_widget", "http.put_widget")] == [
        {"result": "$result", "step": "$step"}] * 2
    put = find_tool("http.put_widget")
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        made = run.call("http.put_widget", {"id": "w_named", "name": "bolt"}, put.fn)
    # what the undo refers to, not the name; and the step that made it
    assert made[FIELD]["args"] == {"id": "w_named", "reversi_call": {"run_id": run.id, "step": 0}}

    done = rollback(run.id, manifest)

    assert done.code == 0, done.err + done.out
    assert widgets.widgets == {}


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
    assert [t.name for t in http.tools] == ["http.create_widget", "http.put_widget", "http.create_gadget",
                                            "http.delete_widget", "http.get_widget"]
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
    wrong = {
        "tools:\n  http.undo: {kind: compensation, url: /x}\n":
            "http.undo: no forward tool of the file names it as its manifest.compensation: a compensation acts only"
            " on a sealed forward result",
        "tools:\n  http.x: {url: /x, manifest: {compensation: {tool: http.undo, args: {a: $run.actor}}}}\n"
        "  http.undo: {kind: compensation, url: /x, params: {a: string}}\n":
            "http.x: manifest.compensation.args may refer only to $args, $result and $step (the sealed forward"
            " call), not $run",
        "tools:\n  http.x: {url: /x, manifest: {compensation: {tool: http.undo, args: {b: $result.b}}}}\n"
        "  http.undo: {kind: compensation, url: /x, params: {a: string}}\n":
            "http.x: manifest.compensation.args gives 'b', which http.undo does not take",
        "tools:\n  http.x: {url: 'http://{host}/x', params: {host: string}}\n":
            "http.x: url 'http://{host}/x' has a {name} part before its path: arguments may fill path segments"
            " only, never the scheme or host",
        "tools:\n  http.x: {url: '{where}', params: {where: string}}\n":
            "http.x: url '{where}' has a {name} part before its path: arguments may fill path segments only,"
            " never the scheme or host",
        "tools:\n  http.x: {url: '/x/{id}'}\n": "http.x: 'id' is in its url or unchanged but not in its params",
    }
    for text, error in wrong.items():
        (tmp_path / "tools.yaml").write_text(text)
        done = connectors_cli("list")
        assert (done.code, done.err) == (1, error + "\n")
    monkeypatch.delenv("REVERSI_HTTP_TOOLS")
    assert connector("http").tools == ()


def test_a_path_parameter_is_one_encoded_segment_under_the_files_base_url(widgets: FakeWidgets) -> None:
    """`/`, `?`, `#` and `%` are percent-encoded, a full URL or `//host` stays a segment under the
    configured base; `.`, `..` and empty are refused, since a server that normalizes (RFC 3986 makes
    `%2E` the same as `.`) would still step up the path."""
    elsewhere = FakeWidgets()
    with serving(elsewhere.app(), elsewhere) as other:
        sent = {"a/b": "/widgets/a%2Fb", "x?y=1#z%41": "/widgets/x%3Fy%3D1%23z%2541", "...": "/widgets/...",
                "//127.0.0.1/steal": "/widgets/%2F%2F127.0.0.1%2Fsteal",
                f"{other}/steal": "/widgets/" + other.replace(":", "%3A").replace("/", "%2F") + "%2Fsteal"}
        for value, raw in sent.items():
            done = connectors_cli("read", stdin=json.dumps({"tool": "http.get_widget", "arguments": {"id": value}}))
            assert (done.code, json.loads(done.out)) == (0, {"found": False, "status": 404}), done.err
            assert widgets.raw_paths[-1] == raw
        for value in ("..", ".", "", "a/../b", "../..", "./x", "a\\..\\b"):
            done = connectors_cli("read", stdin=json.dumps({"tool": "http.get_widget", "arguments": {"id": value}}))
            assert (done.code, done.out) == (1, ""), value
            assert done.err == (f"bad argument id: {value!r} cannot be a path parameter: an empty, . or .. segment"
                                " would move the URL's path\n")
    assert elsewhere.requests == [] and len(widgets.requests) == len(sent)


def test_forged_results_make_no_http_compensation_send_anything(widgets: FakeWidgets) -> None:
    widgets.widgets["w_theirs"] = {"id": "w_theirs", "name": "someone's", "version": 1}
    made = find_tool("http.create_widget").invoke({"name": "mine"})
    put = find_tool("http.put_widget").invoke({"id": "w_put", "name": "mine too"})
    other = find_tool("http.create_gadget").invoke({"name": "gadget"})
    for genuine in (made, put):
        for forged in forgeries(genuine, {"id": "w_theirs"}, other).values():
            assert_refused("http.delete_widget", forged, widgets)
    assert "w_theirs" in widgets.widgets and not widgets.effects
