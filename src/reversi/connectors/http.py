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

Authority comes from this file, never from a call: the base URL and headers are the file's (and the
environment's), and a `{name}` part of a URL is one percent-encoded path segment (`/`, `?`, `#` and
`%` encoded; empty, `.` and `..` refused: `%2E%2E` would still be a dot-segment to a server that
normalizes). A forward tool's result comes back sealed (`reversi.connectors._seal`), keeping the
arguments its compensation's `args` name. A compensation takes only that sealed result (and `step`):
the connector opens the seal and resolves the arguments it acts on itself, from the forward tool's
`manifest.compensation.args` in this file. `reversi-connectors manifest http` prints the `manifest`
entries as a manifest, each such compensation's args as `{result: "$result", step: "$step"}`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from reversi.connectors._base import STEP, Connector, Param, Setting, Tool, ToolKind, sealed_result
from reversi.connectors._http import Service, form_encode
from reversi.connectors._seal import seal, unseal
from reversi.core.json_values import JSONObject, JSONObjectView, JSONView, LooseJSON, LooseJSONObject
from reversi.core.references import ReferenceContext, RunContext, reference_roots, references_to
from reversi.core.references import resolve as resolve_references
from reversi.errors import BadArgument, ChangedSince, ConnectorError, MissingReference

__all__ = ["TOOLS_FILE", "load"]

TOOLS_FILE = Setting("REVERSI_HTTP_TOOLS", "the YAML file describing the http tools", "none")

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PART = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Where a URL's path begins: `{name}` parts may come only after it, never in the scheme or host.
_PATH_START = re.compile(r"/|[A-Za-z][A-Za-z0-9+.-]*://[^/{}]*/|\$\{[A-Za-z_][A-Za-z0-9_]*\}/")
_DOT_SEGMENT = re.compile(r"(?:^|[/\\])\.{1,2}(?:$|[/\\])")
_TOOL_KEYS = {"kind", "method", "url", "params", "headers", "body", "idempotency_header", "result", "done_statuses",
              "unchanged", "description", "manifest"}
_TYPES = {"string", "integer", "number", "boolean", "object", "array", "any"}
_UNDO_ROOTS = {"args", "result", "step"}  # what a compensation's args may refer to: the sealed forward call
_NO_RUN = RunContext("", "", "", "")  # `$run` is refused in compensation args: a seal does not cover it
UNDO_ARGS = {"result": "$result", "step": "$step"}


def _message(body: LooseJSON) -> str | None:
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


def _segment(name: str, value: object) -> str:
    """`value` as one path segment: percent-encoded, so it cannot leave its place in the path.

    Raises:
        BadArgument: empty, or `.`/`..` (alone or between slashes), which no encoding keeps in place:
            RFC 3986 makes `%2E` the same as `.`, so a normalizing server or proxy would still step up.
    """
    text = json.dumps(value) if isinstance(value, bool) else "" if value is None else str(value)
    if not text or _DOT_SEGMENT.search(text):
        raise BadArgument(name, f"{text!r} cannot be a path parameter: an empty, . or .. segment would move"
                                " the URL's path")
    return quote(text, safe="")


@dataclass(frozen=True)
class _Call:
    """One tool of the file, as it sends its request."""

    name: str
    kind: ToolKind
    spec: Mapping[str, LooseJSON]
    base_url: str
    headers: Mapping[str, LooseJSON]

    def send(self, arguments: Mapping[str, LooseJSON], *, step: int | None = None,
             idempotency_key: str | None = None) -> LooseJSON:
        spec, name = self.spec, self.name
        method = str(spec.get("method", "GET")).upper()
        conditions = [str(field) for field in spec.get("unchanged", ())]
        used = set(_PART.findall(str(spec["url"]))) | set(conditions)
        url = _PART.sub(lambda m: _segment(m[1], arguments.get(m[1])), _environment(str(spec["url"]), name))
        rest = {k: v for k, v in arguments.items() if k not in used}
        headers = {k: _environment(str(v), name) for k, v in {**self.headers, **spec.get("headers", {})}.items()}
        service = Service(name, Setting("", "", _environment(self.base_url, name)), None, _message)
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
            return {"ok": True} if self.kind is ToolKind.COMPENSATION else {"found": False, "status": answer.status}
        if self.kind is ToolKind.COMPENSATION and answer.body is None:
            return {"ok": True}
        picked = spec.get("result")
        if picked and picked != "body":
            return answer.body.get(picked) if isinstance(answer.body, dict) else None
        return answer.body


def _forward(call: _Call, keep: frozenset[str] | None, /, **arguments: LooseJSON) -> JSONObject:
    """Send the call; its answer sealed (an answer that is not an object as `{"result": ANSWER}`),
    keeping the arguments its compensation refers to (all of them when `keep` is None)."""
    answer = call.send(arguments)
    kept = arguments if keep is None else {k: v for k, v in arguments.items() if k in keep}
    return seal(call.name, answer if isinstance(answer, dict) else {"result": answer}, kept)


def _compensate(call: _Call, declared: tuple[Param, ...], undoes: Mapping[str, LooseJSON], /, *, result: LooseJSON,
                step: int | None = None, idempotency_key: str | None = None) -> LooseJSON:
    """Undo the forward call whose sealed result is `result`, with the arguments the forward tool's
    `manifest.compensation.args` make of it.

    Raises:
        UntrustedResult: `result` is not a sealed result of a forward tool this compensation undoes.
        BadArgument: those args name something the sealed result does not hold, or give a wrong type.
    """
    opened = unseal(result, undoes)
    context = ReferenceContext(args=opened.args, result=opened.result, run=_NO_RUN, step=step or 0)
    try:
        resolved = resolve_references(undoes[opened.tool], context)
    except MissingReference as exc:
        raise BadArgument("result", f"{exc.ref} names nothing in the sealed result of {opened.tool}") from None
    arguments = {k: v for k, v in resolved.items() if k != "step"}
    for param in declared:
        if param.name in arguments:
            param.check(arguments[param.name])
        elif param.required:
            raise BadArgument(param.name, f"required, and {opened.tool}'s compensation args do not give it")
    return call.send(arguments, step=step, idempotency_key=idempotency_key)


def _read(call: _Call, /, **arguments: LooseJSON) -> LooseJSON:
    return call.send(arguments)


def _params(name: str, declared: JSONView) -> tuple[Param, ...]:
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


def _kind(name: str, spec: LooseJSON) -> ToolKind:
    if not name.startswith("http.") or not isinstance(spec, Mapping) or "url" not in spec:
        raise ConnectorError(f"{name}: an http tool is named http.NAME and has at least a url")
    unknown = set(spec) - _TOOL_KEYS
    if unknown:
        raise ConnectorError(f"{name}: unknown key {sorted(unknown)[0]!r}")
    try:
        return ToolKind(spec.get("kind", "forward"))
    except ValueError:
        raise ConnectorError(f"{name}: kind must be forward, compensation or read") from None


def _checked_params(name: str, spec: Mapping[str, LooseJSON]) -> tuple[Param, ...]:
    """The declared params, once the URL's `{name}` parts and `unchanged` fields are among them and the
    parts come after the URL's host."""
    params = _params(name, spec.get("params", {}))
    names = {p.name for p in params}
    url = str(spec["url"])
    first = _PART.search(url)
    if first is not None and not _PATH_START.match(url[:first.start()]):
        raise ConnectorError(f"{name}: url {url!r} has a {{name}} part before its path: arguments may fill path"
                             " segments only, never the scheme or host")
    for field in [*_PART.findall(url), *map(str, spec.get("unchanged", ()))]:
        if field not in names:
            raise ConnectorError(f"{name}: {field!r} is in its url or unchanged but not in its params")
    return params


def _undo_template(name: str, spec: Mapping[str, LooseJSON], compensations: Mapping[str, tuple[Param, ...]]
                   ) -> tuple[str, Mapping[str, LooseJSON]] | None:
    """The compensation of this file a forward tool's manifest names, and the args it gives it."""
    entry = spec.get("manifest")
    undo = entry.get("compensation") if isinstance(entry, Mapping) else None
    if not isinstance(undo, Mapping) or undo.get("tool") not in compensations:
        return None
    tool, template = str(undo["tool"]), undo.get("args") or {}
    if not isinstance(template, Mapping):
        raise ConnectorError(f"{name}: manifest.compensation.args must be a mapping")
    roots = reference_roots(template) - _UNDO_ROOTS
    if roots:
        raise ConnectorError(f"{name}: manifest.compensation.args may refer only to $args, $result and $step (the"
                             f" sealed forward call), not ${sorted(roots)[0]}")
    takes = {p.name for p in compensations[tool]} | {"step"}
    for arg in template:
        if arg not in takes:
            raise ConnectorError(f"{name}: manifest.compensation.args gives {arg!r}, which {tool} does not take")
    return tool, template


def _kept(template: JSONObjectView) -> frozenset[str] | None:
    """The forward arguments the compensation's args refer to (None: all of them, for a bare `$args`)."""
    paths = [path for _, path in references_to(template, "args")]
    if any(not path or not isinstance(path[0], str) for path in paths):
        return None
    return frozenset(str(path[0]) for path in paths)


def _tools(document: Mapping[str, LooseJSON]) -> tuple[Tool, ...]:
    defaults = (str(document.get("base_url", "")), dict(document.get("headers") or {}))
    specs = {str(name): spec for name, spec in document["tools"].items()}
    kinds = {name: _kind(name, spec) for name, spec in specs.items()}
    params = {name: _checked_params(name, spec) for name, spec in specs.items()}
    compensations = {name: params[name] for name, kind in kinds.items() if kind is ToolKind.COMPENSATION}
    undoes: dict[str, dict[str, Mapping[str, LooseJSON]]] = {name: {} for name in compensations}
    keep: dict[str, frozenset[str] | None] = {}
    for name, kind in kinds.items():
        found = _undo_template(name, specs[name], compensations) if kind is ToolKind.FORWARD else None
        if found is not None:
            undoes[found[0]][name] = found[1]
            keep[name] = _kept(found[1])
    for name, forwards in undoes.items():
        if not forwards:
            raise ConnectorError(f"{name}: no forward tool of the file names it as its manifest.compensation: a"
                                 " compensation acts only on a sealed forward result")
    return tuple(_tool(name, kinds[name], specs[name], params[name], defaults, undoes.get(name, {}),
                       keep.get(name, frozenset())) for name in specs)


def _tool(name: str, kind: ToolKind, spec: Mapping[str, LooseJSON], params: tuple[Param, ...],
          defaults: tuple[str, LooseJSONObject], undoes: Mapping[str, LooseJSON], keep: frozenset[str] | None) -> Tool:
    method = str(spec.get("method", "GET")).upper()
    call = _Call(name, kind, dict(spec), *defaults)
    if kind is ToolKind.COMPENSATION:
        declared = tuple(p for p in params if p.name != "step")
        fn: Any = partial(_compensate, call, declared, dict(undoes))
        params = (sealed_result(*sorted(undoes)), STEP)
    else:
        fn = partial(_forward, call, keep) if kind is ToolKind.FORWARD else partial(_read, call)
    return Tool(name, kind, fn, str(spec.get("description", f"{method} {spec['url']}")), params,
                destructive=method == "DELETE", idempotent=kind is not ToolKind.FORWARD or method in ("PUT", "DELETE"))


def _manifest(path: str, document: Mapping[str, LooseJSON], tools: tuple[Tool, ...]) -> str:
    """The file's `manifest:` entries, each compensation of this file given the sealed result."""
    ours = {tool.name for tool in tools if tool.kind is ToolKind.COMPENSATION}
    entries: LooseJSONObject = {}
    for name, spec in document["tools"].items():
        entry = spec.get("manifest")
        if not entry:
            continue
        undo = entry.get("compensation") if isinstance(entry, Mapping) else None
        if isinstance(undo, Mapping) and undo.get("tool") in ours:
            entry = {**entry, "compensation": {**undo, "args": dict(UNDO_ARGS)}}
        entries[str(name)] = entry
    return f"# Made from {path} (REVERSI_HTTP_TOOLS).\n" + yaml.safe_dump(
        {"version": 1, "tools": entries}, sort_keys=False, width=120)


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
    tools = _tools(document)
    return Connector("http", f"REST tools described in {path}", tools, (TOOLS_FILE,),
                     manifest_yaml=_manifest(path, document, tools))
