"""What a connector is: its tools (forward, compensation, read), the settings it reads, its manifest.

Its errors (`ConnectorError` and below) are in `reversi.errors`, with every other one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.resources import files
from pathlib import Path
from typing import Any

from reversi.core.calls import undoing
from reversi.core.json_values import JSONObject, LooseJSON, LooseJSONObject
from reversi.errors import BadArgument, UnknownTool


class ToolKind(StrEnum):
    """What a tool is for."""

    FORWARD = "forward"
    COMPENSATION = "compensation"
    READ = "read"


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


@dataclass(frozen=True)
class Param:
    """One argument of a tool: its JSON type (`any` for no constraint), whether it may be left out."""

    name: str
    type: str
    description: str
    required: bool = True
    nullable: bool = False

    def check(self, value: object) -> None:
        """Raises `BadArgument` when `value` is not of this parameter's type."""
        if (value is None and self.nullable) or self.type == "any":
            return
        wanted = _JSON_TYPES[self.type]
        if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
            article = "an" if self.type[0] in "aeiou" else "a"
            raise BadArgument(self.name, f"expected {article} {self.type}, got {type(value).__name__}")

    def schema(self) -> JSONObject:
        """This parameter as a JSON Schema property."""
        prop: JSONObject = {"description": self.description}
        if self.type != "any":
            prop["type"] = [self.type, "null"] if self.nullable else self.type
        return prop


STEP = Param("step", "integer", "the step being undone, named in errors", required=False)


def sealed_result(*forward: str) -> Param:
    """A compensation's `result`: the whole sealed result of the forward call it undoes (`$result`)."""
    return Param("result", "object", f"the sealed result of {' or '.join(forward)} ($result)")


@dataclass(frozen=True)
class Tool:
    """One tool of a connector: a plain function taking the arguments as keywords, returning JSON.

    A function that declares a keyword-only `idempotency_key` gets the compensation's key.
    """

    name: str
    kind: ToolKind
    fn: Callable[..., Any]
    description: str
    params: tuple[Param, ...]
    destructive: bool = False
    idempotent: bool = False

    @property
    def takes_idempotency_key(self) -> bool:
        return "idempotency_key" in inspect.signature(self.fn).parameters

    def input_schema(self) -> LooseJSONObject:
        """The tool's arguments as a JSON Schema object (for MCP `tools/list`)."""
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }

    def check(self, arguments: object) -> LooseJSONObject:
        """The arguments, checked against the parameters.

        Raises:
            BadArgument: not an object, an unexpected or missing argument, or one of the wrong type.
        """
        if not isinstance(arguments, Mapping):
            raise BadArgument("arguments", f"expected an object, got {type(arguments).__name__}")
        known = {p.name: p for p in self.params}
        for name in arguments:
            if name not in known:
                raise BadArgument(str(name), f"{self.name} takes no such argument")
        for param in self.params:
            if param.name in arguments:
                param.check(arguments[param.name])
            elif param.required:
                raise BadArgument(param.name, "required")
        return dict(arguments)

    def invoke(self, arguments: object, *, idempotency_key: str | None = None, journaled_as: str | None = None
               ) -> LooseJSON:
        """Check the arguments and call the tool's function with them; with `idempotency_key`, as the undo
        of a step, journaled as `journaled_as` (default: the tool's own name).

        Raises:
            ConnectorError: a bad argument, or whatever the tool itself raises.
        """
        kwargs = self.check(arguments)
        if idempotency_key is None:
            return self.fn(**kwargs)
        if self.takes_idempotency_key:
            kwargs["idempotency_key"] = idempotency_key
        with undoing(journaled_as or self.name, idempotency_key):
            return self.fn(**kwargs)


@dataclass(frozen=True)
class Setting:
    """An environment variable a connector reads, and what it falls back to."""

    name: str
    description: str
    default: str


@dataclass(frozen=True)
class Connector:
    """A set of tools for one external system, the settings they read and the manifest tying them."""

    name: str
    description: str
    tools: tuple[Tool, ...]
    settings: tuple[Setting, ...] = ()
    manifest_file: str = ""
    manifest_yaml: str | None = None  # a manifest made at run time (the http connector's), else the shipped file
    _by_name: dict[str, Tool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {tool.name: tool for tool in self.tools})

    def tool(self, name: str) -> Tool:
        """The tool called `name`.

        Raises:
            UnknownTool: this connector has no such tool.
        """
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownTool(name) from None

    def of_kind(self, kind: ToolKind) -> list[Tool]:
        return [tool for tool in self.tools if tool.kind is kind]

    def manifest_text(self) -> str:
        """The manifest's YAML."""
        return self.manifest_yaml if self.manifest_yaml is not None else self.manifest_path().read_text()

    def manifest_path(self) -> Path:
        """The manifest shipped in the package for this connector."""
        return Path(str(files("reversi.connectors") / "manifests" / (self.manifest_file or f"{self.name}.yaml")))
