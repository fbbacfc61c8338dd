"""Undos an upstream MCP server declares for its own tools in `tools/list`. Pure: no I/O.

Two shapes are read from a tool's `annotations`:

- `recovery`, as SEP-3172 proposes it (the draft of 2026-07-30, `seps/0000-tool-recovery-metadata.md`
  of modelcontextprotocol PR 3172): `{strategy: compensation, compensatingOperation: {operationId,
  parameters}}`. `operationId` names a tool of the same server; each parameter is an OpenAPI runtime
  expression: `$response.body` or `$response.body#/POINTER` (the call's result), `$request.body` or
  `$request.body#/POINTER` (its arguments), or a constant.
- `x-compensation-pair`, the FastMCP convention: the undo tool's name and nothing more. Each parameter
  the undo tool requires is given the result's field of that name, else the argument of that name.

A declaration is turned into a manifest entry with one compensation, whose arguments are references
(`$result.id`): what cannot be said in references is not guessed at, and the tool gets no declared
undo. As the proposal asks, a reference that names nothing when the step is undone makes the step
unrecoverable rather than send a partial call. What a server declares is not trusted: the gateway
reads it only from an upstream the operator named, a manifest the operator wrote always wins, and the
operator chooses whether each such undo waits for a person's approval (`approve`) or not (`trust`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from reversi.core.json_values import JSONObject, JSONObjectView, JSONView, LooseJSON, canonical, quoted
from reversi.core.manifest import Compensation, ToolEntry
from reversi.core.references import is_reference, references_to
from reversi.core.tool_listing import Listing

__all__ = ["PAIR", "RECOVERY", "SEP_REVISION", "SERVER_UNDO_MODES", "DeclaredUndo", "declared_undos",
           "listing_undos", "recovery_annotation"]

RECOVERY, PAIR = "recovery", "x-compensation-pair"
SEP_REVISION = "SEP-3172, draft of 2026-07-30"
SERVER_UNDO_MODES = ("approve", "trust")
"""How an operator takes the undos an upstream declares: each waits for a person's approval, or not."""

_KEY = re.compile(r"[^.\[\]\s${}]+")  # a key a reference path can name (`reversi.core.references`)
_MAX_PARAMETERS = 64
_MAX_CHARS = 8192


@dataclass(frozen=True)
class DeclaredUndo:
    """A server's undo of one of its tools, as references: what the journal keeps with each step.

    Attributes:
        server: The upstream that declared it.
        convention: `recovery` (SEP-3172) or `x-compensation-pair`.
        tool: The undo tool, as the gateway names it (`NAME.tool` with several upstreams).
        args: The undo's arguments, a template of `$result` and `$args` references.
        approve: Whether each undo needs a person's approval (the operator's `approve`).
    """

    server: str
    convention: str
    tool: str
    args: JSONObjectView
    approve: bool

    @property
    def source(self) -> str:
        """Where the undo came from, as the plan says it: `server shop (recovery)`."""
        return f"server {self.server} ({self.convention})"

    def journal(self) -> JSONObjectView:
        return {"server": self.server, "convention": self.convention, "tool": self.tool,
                "args": dict(self.args), "approve": self.approve}

    @classmethod
    def from_journal(cls, data: JSONView) -> DeclaredUndo | None:
        """The undo a step's `intended` journaled; None when it journaled none (or not this shape)."""
        if not isinstance(data, Mapping):
            return None
        server, convention, tool, args, approve = (data.get(k) for k in ("server", "convention", "tool", "args",
                                                                            "approve"))
        if not (isinstance(server, str) and convention in (RECOVERY, PAIR) and isinstance(tool, str)
                and isinstance(args, Mapping) and isinstance(approve, bool)):
            return None
        return cls(server, str(convention), tool, args, approve)

    def entry(self, pattern: str) -> ToolEntry:
        """The manifest entry this undo makes for the tool `pattern`: a write, undone by `tool`."""
        journal = self.journal()
        digest = hashlib.sha256(canonical({"tool": pattern, **journal}).encode()).hexdigest()
        comp = Compensation(self.tool, self.args, requires_approval=self.approve)
        return ToolEntry(pattern, self.source, 0, compensations=(comp,), digest=digest, declaration=journal)


def declared_undos(
    listing: Sequence[LooseJSON], *, server: str, named: Callable[[str], str], approve: bool
) -> tuple[dict[str, DeclaredUndo], list[str]]:
    """The undos `server`'s tool listing declares, by the gateway's name of each tool.

    Args:
        listing: The tools as the server listed them (JSON objects).
        server: The upstream's name.
        named: The gateway's name of one of the server's tools.
        approve: Whether each undo needs a person's approval.

    Returns:
        The undos, and one warning for each declaration that could not be read (a bad shape, an
        undo tool the server does not list, an expression references cannot say).
    """
    tools = {t["name"]: t for t in listing if isinstance(t, Mapping) and isinstance(t.get("name"), str)}
    found: dict[str, DeclaredUndo] = {}
    warnings: list[str] = []
    for name, tool in tools.items():
        annotations = tool.get("annotations")
        if not isinstance(annotations, Mapping) or not (RECOVERY in annotations or PAIR in annotations):
            continue
        try:
            convention, undo, args = _read(annotations, tools)
            if len(canonical({"tool": undo, "args": args})) > _MAX_CHARS:  # journaled with every step of the tool
                raise _Unreadable(f"the undo and its arguments are longer than {_MAX_CHARS} characters")
        except _Unreadable as why:
            warnings.append(f"upstream {server}: the undo {quoted(name[:80])} declares is not used: {why}")
            continue
        found[named(name)] = DeclaredUndo(server, convention, named(undo), args, approve)
    return found, warnings


def listing_undos(listing: Listing) -> tuple[dict[str, DeclaredUndo], list[str]]:
    """`declared_undos` of a listing read with `reversi.core.tool_listing`, by the server's own tool names."""
    raw = [{"name": t.name, "inputSchema": t.input_schema, "annotations": t.annotations} for t in listing.tools]
    return declared_undos(raw, server=listing.server or "the server", named=str, approve=False)


class _Unreadable(Exception):
    pass


def _read(annotations: Mapping[str, LooseJSON], tools: Mapping[str, LooseJSON]) -> tuple[str, str, JSONObject]:
    """(convention, undo tool, arguments) of a tool's annotations; `recovery` first, the more exact."""
    if RECOVERY in annotations:
        recovery = annotations[RECOVERY]
        if not isinstance(recovery, Mapping) or recovery.get("strategy") != "compensation":
            raise _Unreadable('recovery: expected {strategy: "compensation", compensatingOperation: ...}')
        operation = recovery.get("compensatingOperation")
        if not isinstance(operation, Mapping):
            raise _Unreadable("recovery.compensatingOperation: expected an object")
        undo = _listed(operation.get("operationId"), tools, "recovery.compensatingOperation.operationId")
        parameters = operation.get("parameters", {})
        if not isinstance(parameters, Mapping) or len(parameters) > _MAX_PARAMETERS:
            raise _Unreadable(f"recovery.compensatingOperation.parameters: expected an object of at most "
                              f"{_MAX_PARAMETERS} expressions")
        if any(not isinstance(k, str) or k.startswith("$") for k in parameters):  # `$each`: a template form
            raise _Unreadable("recovery.compensatingOperation.parameters: a parameter's name may not begin with $")
        return RECOVERY, undo, {k: _expression(v, k) for k, v in parameters.items()}
    undo = _listed(annotations[PAIR], tools, PAIR)
    return PAIR, undo, {p: {"$optional": f"$result.{p}", "default": f"$args.{p}"} for p in _required(tools[undo])}


def _listed(name: JSONView, tools: Mapping[str, LooseJSON], where: str) -> str:
    if not isinstance(name, str) or not name:
        raise _Unreadable(f"{where}: expected the name of a tool")
    if name not in tools:
        raise _Unreadable(f"{where}: {quoted(name[:80])} is not a tool the server lists")
    return name


def _required(tool: Mapping[str, LooseJSON]) -> list[str]:
    """The parameters an undo tool requires, each one a key references can name."""
    schema = tool.get("inputSchema")
    required = schema.get("required", []) if isinstance(schema, Mapping) else []
    if not isinstance(required, list) or len(required) > _MAX_PARAMETERS:
        raise _Unreadable("the undo tool's inputSchema.required is not a list of names")
    for name in required:
        if not isinstance(name, str) or not _KEY.fullmatch(name):
            raise _Unreadable(f"the undo tool's parameter {quoted(str(name)[:80])} cannot be given by name")
    return list(required)


def _expression(value: JSONView, parameter: str) -> str:
    """A parameter's runtime expression as a template: a reference, or a constant (`$` written `$$`)."""
    if not isinstance(value, str):
        raise _Unreadable(f"parameter {quoted(parameter[:80])}: expected a runtime expression (a string)")
    if not value.startswith("$"):
        return value.replace("$", "$$")
    for prefix, root in (("$response.body", "result"), ("$request.body", "args")):
        if value == prefix:
            return f"${root}"
        if value.startswith(f"{prefix}#"):
            return f"${root}{_path(value[len(prefix) + 1:], parameter)}"
    raise _Unreadable(f"parameter {quoted(parameter[:80])}: {quoted(value[:80])} is not an expression an MCP "
                      "call can answer ($response.body#/..., $request.body#/...)")


def _path(pointer: str, parameter: str) -> str:
    """A JSON pointer (`/items/0/id`) as a reference path (`.items[0].id`)."""
    if pointer == "":
        return ""
    if not pointer.startswith("/"):
        raise _Unreadable(f"parameter {quoted(parameter[:80])}: {quoted(pointer[:80])} is not a JSON pointer")
    path = ""
    for token in pointer[1:].split("/"):
        key = token.replace("~1", "/").replace("~0", "~")
        if key.isascii() and key.isdigit():  # an index (a reference path cannot name a key of digits)
            if key != str(int(key)):
                raise _Unreadable(f"parameter {quoted(parameter[:80])}: {quoted(key[:80])} is no index (RFC 6901: "
                                  "no leading zeros)")
            path += f"[{int(key)}]"
        elif _KEY.fullmatch(key):
            path += f".{key}"
        else:
            raise _Unreadable(f"parameter {quoted(parameter[:80])}: the key {quoted(key[:80])} cannot be named "
                              "in a reference")
    return path


def recovery_annotation(entry: ToolEntry, required: Collection[str]) -> JSONObject | None:
    """SEP-3172's `recovery` saying `entry`'s undo, for a server to list with its tool; None when the
    entry has no undo the proposal can say: not exactly one, one with conditions or several calls, or
    an argument the undo tool requires that is neither a constant nor a `$result` / `$args` reference.

    Args:
        entry: The tool's manifest entry.
        required: The parameters the undo tool requires; others it cannot say are left out.
    """
    if len(entry.compensations) != 1:
        return None
    comp = entry.compensations[0]
    if comp.when is not None or comp.then:
        return None
    parameters: JSONObject = {}
    for name, template in comp.args.items():
        said = _said(template)
        if said is not None:
            parameters[name] = said
        elif name in required:
            return None
    return {"strategy": "compensation", "compensatingOperation": {"operationId": comp.tool, "parameters": parameters}}


def _said(template: JSONView) -> str | None:
    """A template as a runtime expression: a constant text, or a whole `$result` / `$args` reference."""
    if not isinstance(template, str):
        return None
    if "$" not in template:
        return template
    if not is_reference(template):
        return None
    for root, expression in (("result", "$response.body"), ("args", "$request.body")):
        for _, path in references_to(template, root):
            return None if None in path else expression + _pointer(path)
    return None


def _pointer(path: Sequence[str | int | None]) -> str:
    if not path:
        return ""
    return "#" + "".join(f"/{str(step).replace('~', '~0').replace('/', '~1')}" for step in path)
