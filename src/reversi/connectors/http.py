"""The `http` connector: REST tools described in a YAML file named by `REVERSI_HTTP_TOOLS`.

    version: 1
    base_url: "${WIDGETS_URL}"                  # ${VAR}: from the environment, never journaled
    headers: {Authorization: "Bearer ${WIDGETS_TOKEN}"}
    tools:
      http.create_widget:
        method: POST
        url: /widgets                           # {name} parts are filled from the arguments
        params: {name: string, size: "integer?"}  # `?`: may be left out
        manifest:                               # the tool's manifest entry, as in any manifest
          compensation: {tool: http.delete_widget, args: {id: "$result.id", version: "$result.version"}}
      http.delete_widget:
        kind: compensation                      # forward (default) | compensation | read
        method: DELETE
        url: /widgets/{id}
        params: {id: string, version: integer}
        idempotency_header: Idempotency-Key     # the rollback's key goes in this header
        done_statuses: [404]                    # these mean "already undone"
        unchanged: [version]                    # read the URL first: its `version` must still be the argument's

Arguments not used in the URL travel as `body` says: `json` (default for POST, PUT, PATCH), `form`,
or `query` (default for GET and DELETE). The answer is the response's JSON (`result: data` picks a
key of it); a compensation answers `{"ok": true}` when the response has no body or has a status of
`done_statuses`, so its repeat answers as the first did (a read answers such a status as
`{"found": false, "status": N}`). With `unchanged`, a tool first GETs its URL:
a done status there is already undone; a named field that differs from the argument of that name
(what the forward call left, e.g. `version: "$result.version"`) is `changed since step N`.
`reversi-connectors manifest http` prints the `manifest` entries of the file as a manifest.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from reversi.connectors._base import STEP, Connector, Param, Setting, Tool, ToolKind
from reversi.connectors._http import Service, form_encode
from reversi.errors import BadArgument, ChangedSince, ConnectorError

__all__ = ["TOOLS_FILE", "load"]

TOOLS_FILE = Setting("REVERSI_HTTP_TOOLS", "the YAML file describing the http tools", "none")

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PART = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TOOL_KEYS = {"kind", "method", "url", "params", "headers", "body", "idempotency_header", "result", "done_statuses",
              "unchanged", "description", "manifest"}
_TYPES = {"string", "integer", "number", "boolean", "object", "array", "any"}


def _message(body: Any) -> str | None:
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        for key in ("message", "detail", "error_description"):
            if isinstance(error.get(key), str):
                return str(error[key])
    return None


def _environment(text: str, where: str) -> str:
    def value(match: re.Match[str]) -> str:
        found = os.environ.get(match[1])
        if found is None:
            raise ConnectorError(f"{match[1]} is not set: {where} needs it")
        return found

    return _ENV.sub(value, text)


def _invoke(spec: dict[str, Any], defaults: dict[str, Any], name: str, kind: ToolKind, /,
            *, idempotency_key: str | None = None, step: int | None = None, **arguments: Any) -> Any:
    method = str(spec.get("method", "GET")).upper()
    conditions = [str(field) for field in spec.get("unchanged", ())]
    used = set(_PART.findall(str(spec["url"]))) | set(conditions)
    url = _PART.sub(lambda m: quote(str(arguments.get(m[1], "")), safe=""), _environment(str(spec["url"]), name))
    rest = {k: v for k, v in arguments.items() if k not in used}
    headers = {k: _environment(str(v), name) for k, v in {**defaults["headers"], **spec.get("headers", {})}.items()}
    service = Service(name, Setting("", "", _environment(defaults["base_url"], name)), None, _message)
    done = tuple(spec.get("done_statuses", ()))
    if conditions:  # read first: already undone, or changed since the step
        found = service.request("GET", url, headers=headers, tolerate=done)
        if found.status in done:
            return {"ok": True}
        now = found.body if isinstance(found.body, dict) else {}
        for field in conditions:
            if now.get(field) != arguments.get(field):
                raise ChangedSince(step, f"{field} of {url} is {json.dumps(now.get(field))}, the step left"
                                         f" {json.dumps(arguments.get(field))}")
    if idempotency_key and spec.get("idempotency_header"):
        headers[str(spec["idempotency_header"])] = idempotency_key
    body = spec.get("body", "json" if method in ("POST", "PUT", "PATCH") else "query")
    answer = service.request(
        method, url, headers=headers, tolerate=done,
        json=rest if body == "json" else None, data=form_encode(rest) if body == "form" else None,
        params=rest if body == "query" else None,
    )
    if answer.status in done:
        return {"ok": True} if kind is ToolKind.COMPENSATION else {"found": False, "status": answer.status}
    if kind is ToolKind.COMPENSATION and answer.body is None:
        return {"ok": True}
    picked = spec.get("result")
    if picked and picked != "body":
        return answer.body.get(picked) if isinstance(answer.body, dict) else None
    return answer.body


def _params(name: str, declared: Any) -> tuple[Param, ...]:
    if not isinstance(declared, Mapping):
        raise ConnectorError(f"{name}: params must map each argument to its type")
    found = []
    for param, kind in declared.items():
        text = str(kind)
        if text.rstrip("?") not in _TYPES:
            raise ConnectorError(f"{name}: params.{param}: unknown type {text!r}")
        kind = text.rstrip("?")
        found.append(Param(str(param), kind, f"{kind} argument", required=not text.endswith("?")))
    return tuple(found)


def _tool(name: str, spec: Any, defaults: dict[str, Any]) -> Tool:
    if not name.startswith("http.") or not isinstance(spec, Mapping) or "url" not in spec:
        raise ConnectorError(f"{name}: an http tool is named http.NAME and has at least a url")
    unknown = set(spec) - _TOOL_KEYS
    if unknown:
        raise ConnectorError(f"{name}: unknown key {sorted(unknown)[0]!r}")
    try:
        kind = ToolKind(spec.get("kind", "forward"))
    except ValueError:
        raise ConnectorError(f"{name}: kind must be forward, compensation or read") from None
    method = str(spec.get("method", "GET")).upper()
    params = _params(name, spec.get("params", {}))
    if kind is ToolKind.COMPENSATION and all(p.name != "step" for p in params):
        params = (*params, STEP)
    for field in spec.get("unchanged", ()):
        if all(p.name != field for p in params):
            raise ConnectorError(f"{name}: unchanged names {field!r}, which is not one of its params")
    return Tool(name, kind, partial(_invoke, dict(spec), defaults, name, kind),
                str(spec.get("description", f"{method} {spec['url']}")), params,
                destructive=method == "DELETE", idempotent=kind is not ToolKind.FORWARD or method in ("PUT", "DELETE"))


def load() -> Connector:
    """The http connector of the file REVERSI_HTTP_TOOLS names (no tools when it names none).

    Raises:
        ConnectorError: the file cannot be read or describes a tool wrongly.
    """
    path = os.environ.get(TOOLS_FILE.name)
    if not path:
        return Connector("http", "REST tools described in a YAML file", (), (TOOLS_FILE,),
                         manifest_yaml="version: 1\ntools: {}\n")
    try:
        document = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConnectorError(f"{TOOLS_FILE.name}: cannot read {path}: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("tools"), dict):
        raise BadArgument(TOOLS_FILE.name, f"{path} has no `tools:` mapping")
    defaults = {"base_url": str(document.get("base_url", "")), "headers": dict(document.get("headers") or {})}
    tools = tuple(_tool(str(name), spec, defaults) for name, spec in document["tools"].items())
    entries = {str(name): spec["manifest"] for name, spec in document["tools"].items() if spec.get("manifest")}
    manifest = f"# Made from {path} (REVERSI_HTTP_TOOLS).\n" + yaml.safe_dump(
        {"version": 1, "tools": entries}, sort_keys=False, width=120)
    return Connector("http", f"REST tools described in {path}", tools, (TOOLS_FILE,), manifest_yaml=manifest)
