"""Whether manifests fit a server's tools: the checks of `reversi manifest check --upstream` and of the
gateway at start. Pure: a manifest set and a tool listing in, problems out.

What is checked:
* every tool the server may write with (by its annotations) has an entry;
* every tool an entry calls (its compensation, its verification, its capture) is one the server
  offers, and the arguments written for it fit that tool's input schema (none of its required ones missing, no key
  it forbids; a key it does not declare is a warning);
* every `$args.PATH` names something the forward tool's input schema declares, and every
  `$result.PATH` is possible under its output schema, when it declares one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reversi.core.expect import first_mismatch
from reversi.core.json_values import JSONObjectView, JSONView
from reversi.core.manifest import Effect, ManifestSet, Problem, ToolEntry, Verification
from reversi.core.references import NOTHING, references_to
from reversi.core.server_undo import listing_undos
from reversi.core.tool_listing import Fit, ListedTool, Listing, arguments_fit, optional_in, path_fit

__all__ = ["KeyLines", "fit_problems", "key_lines", "label", "tools_called"]

KeyLines = Mapping[str, Mapping[tuple[str, ...], int]]
"""For each manifest file, the line of each key path (`("tools", NAME, "compensation", "tool")`)."""


class Called(Protocol):
    """A call an entry makes on the server: a tool and its argument template."""

    @property
    def tool(self) -> str: ...

    @property
    def args(self) -> JSONObjectView: ...


def tools_called(entry: ToolEntry) -> list[tuple[tuple[str, ...], Called]]:
    """The calls an entry makes besides the forward one, by the path of the key that declares each
    (`("compensation",)`, or `("compensation", "1")` for the second of its alternatives)."""
    several = len(entry.compensations) > 1
    calls: list[tuple[tuple[str, ...], Called | None]] = []
    for i, comp in enumerate(entry.compensations):
        path = ("compensation", str(i)) if several else ("compensation",)
        calls += [(path, comp), *(((*path, "then", str(j)), then) for j, then in enumerate(comp.then))]
        if comp.verification is not None:
            calls.append(((*path, "verification"), comp.verification))
    calls += [(("verification",), entry.verification), (("capture",), entry.capture)]
    return [(path, call) for path, call in calls if call is not None]


def label(path: Sequence[str]) -> str:
    """A key path as messages write it: `compensation[1].args`."""
    return "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in path).removeprefix(".")


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line (from 1) of every mapping key in a YAML text, by its path; {} when it does not parse."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    found: dict[tuple[str, ...], int] = {}

    def walk(node: Node | None, path: tuple[str, ...], depth: int) -> None:
        if depth > 32:
            return
        if isinstance(node, SequenceNode):  # alternatives: their keys under the index, `("compensation", "1")`
            for i, item in enumerate(node.value):
                found.setdefault((*path, str(i)), item.start_mark.line + 1)
                walk(item, (*path, str(i)), depth + 1)
        if not isinstance(node, MappingNode):
            return
        for key, value in node.value:
            if isinstance(key, ScalarNode):
                found.setdefault((*path, key.value), key.start_mark.line + 1)
                walk(value, (*path, key.value), depth + 1)

    walk(root, (), 0)
    return found


class _Checker:
    def __init__(self, listing: Listing, lines: KeyLines, judged: Callable[[str], bool]) -> None:
        self.listing = listing
        self.lines = lines
        self.judged = judged
        self.problems: list[Problem] = []
        self._said: set[tuple[str, int, str]] = set()

    def say(self, entry: ToolEntry, path: Sequence[str], message: str, *, warning: bool = False) -> None:
        line = self.line(entry, path)
        if (entry.source, line, message) not in self._said:
            self._said.add((entry.source, line, message))
            self.problems.append(Problem(entry.source, line, message, warning))

    def line(self, entry: ToolEntry, path: Sequence[str]) -> int:
        """The line of the deepest key of `path` (under the entry) that the file has, else the entry's."""
        found = self.lines.get(entry.source, {})
        for end in range(len(path), 0, -1):
            line = found.get(("tools", entry.pattern, *path[:end]))
            if line is not None:
                return line
        return entry.line

    def entry(self, entry: ToolEntry, forward: Sequence[ListedTool]) -> None:
        for tool in forward:
            if entry.effect is Effect.READ and tool.read_only_hint is False:
                self.say(entry, ("effect",), f"{tool.name} is declared effect: read, but the server says it is "
                                             "not read-only (readOnlyHint: false)", warning=True)
            elif entry.idempotent and entry.effect is Effect.WRITE and tool.destructive_hint:
                self.say(entry, ("idempotent",), f"{tool.name} is declared idempotent: true, so a rollback skips it, "
                                                 "but the server says it may destroy data (destructiveHint: true)",
                         warning=True)
        for path, call in tools_called(entry):
            self.call(entry, path, call, forward)
        templates: list[tuple[tuple[str, ...], JSONView]] = [
            ((*path, "args", name), value) for path, call in tools_called(entry) for name, value in call.args.items()
        ]
        templates += [((*path, "expect", k), v) for path, call in tools_called(entry)
                      if isinstance(call, Verification) for k, v in call.expect.items()]
        if entry.idempotency_key is not None:
            templates.append((("idempotency", "key"), list(entry.idempotency_key)))
        for path, template in templates:
            guarded = _guarded(entry, path)
            for tool in forward:
                self.references(entry, path, template, tool, guarded)

    def call(self, entry: ToolEntry, path: tuple[str, ...], call: Called, forward: Sequence[ListedTool]) -> None:
        called = self.listing.get(call.tool)
        key = label(path)
        if called is None:
            if self.judged(call.tool):
                self.say(entry, (*path, "tool"), f"{key} tool {call.tool}: the server offers no such tool")
            return
        if path[-1] in ("verification", "capture") and called.read_only_hint is False:
            read = "read-back" if path[-1] == "verification" else key
            self.say(entry, (*path, "tool"), f"{key} tool {call.tool} is not read-only (readOnlyHint: false): "
                                             f"a {read} should change nothing", warning=True)
        missing, unknown, closed = arguments_fit(called.input_schema, list(call.args))
        for name in missing:
            self.say(entry, (*path, "args"), f"{key}.args: {call.tool} requires {_q(name)}, which is not given")
        for name in unknown:
            message = f"{key}.args.{name}: {call.tool} has no argument {_q(name)}"
            if closed:
                self.say(entry, (*path, "args", name), f"{message} (its input schema allows no others)")
            else:
                self.say(entry, (*path, "args", name), f"{message} declared: it may be ignored", warning=True)

    def references(
        self, entry: ToolEntry, path: tuple[str, ...], template: JSONView, tool: ListedTool, guarded: frozenset[str]
    ) -> None:
        required = {ref: steps for ref, steps in references_to(template, "args", optional=False) if ref not in guarded}
        for written, steps in references_to(template, "args"):
            fit, why = path_fit(tool.input_schema, steps)
            name = optional_in(tool.input_schema, steps) if written in required else None
            if fit is not Fit.FITS:
                self.say(entry, path, f"{written}: not in the input schema of {tool.name} ({why})")
            elif name is not None:
                self.say(entry, path, f"{written}: {_q(name)} is optional in the input schema of {tool.name}, and a "
                                      "call without it leaves this reference naming nothing: write {$optional: "
                                      f"{_q(written)}}} (with default: VALUE where one is needed)", warning=True)
        if tool.output_schema is None:
            return
        for written, steps in references_to(template, "result"):
            fit, why = path_fit(tool.output_schema, steps)
            if fit is Fit.IMPOSSIBLE:
                self.say(entry, path, f"{written} cannot resolve under the output schema of {tool.name} ({why})")
            elif fit is Fit.UNDECLARED:
                self.say(entry, path, f"{written}: not in the output schema of {tool.name} ({why})", warning=True)


def fit_problems(
    manifests: ManifestSet,
    listing: Listing,
    *,
    lines: KeyLines | None = None,
    missing_at: tuple[str, int] = ("", 0),
    judged: Callable[[str], bool] | None = None,
) -> list[Problem]:
    """Every way the manifests do not fit the server's tools, errors and warnings.

    Args:
        manifests: The manifests in force.
        listing: The server's tools.
        lines: Where each key is written, for precise lines (`key_lines` of each file).
        missing_at: The file and line to report a tool with no entry at (the first manifest's
            `tools:` key, usually).
        judged: Which tool names the listing speaks for (with several servers, those of the started
            ones); a call of any other tool is not reported. Default: every name.
    """
    in_scope = judged or (lambda name: True)
    checker = _Checker(listing, lines or {}, in_scope)
    forward: dict[int, tuple[ToolEntry, list[ListedTool]]] = {id(e): (e, []) for e in manifests.entries}
    declared, _ = listing_undos(listing)  # with several upstreams in one listing, names are prefixed: none found
    source, line = missing_at
    for tool in listing.tools:
        entry = manifests.written(tool.name)
        if entry is not None:
            forward[id(entry)][1].append(tool)
        elif tool.writes:
            undo = declared.get(tool.name)
            said = f" (its server declares an undo, {undo.tool} by {undo.convention}, which a gateway uses when " \
                   "told to take this server's undos)" if undo is not None else ""
            checker.problems.append(Problem(source, line, f"{tool.name} may write (the server does not mark it "
                                                          f"read-only) and has no entry{said}"))
    for entry, tools in forward.values():
        if not tools and not _is_glob(entry.pattern) and in_scope(entry.pattern):
            checker.say(entry, (), f"the server offers no tool {entry.pattern}", warning=True)
        checker.entry(entry, tools)
    return sorted(checker.problems, key=lambda p: (p.source != missing_at[0], p.source, p.line))


def _guarded(entry: ToolEntry, path: tuple[str, ...]) -> frozenset[str]:
    """The references that cannot name nothing where the template at `path` is used: those the `when` of its
    compensation (or alternative) holds only when they name something (`{"$args.to": {$exists: true}}`)."""
    several = len(entry.compensations) > 1
    for i, comp in enumerate(entry.compensations):
        prefix = ("compensation", str(i)) if several else ("compensation",)
        if path[: len(prefix)] == prefix and comp.when:
            return frozenset(ref for ref, wanted in comp.when.items() if first_mismatch(wanted, NOTHING) is not None)
    return frozenset()


def _is_glob(pattern: str) -> bool:
    return any(char in pattern for char in "*?[")


def _q(name: str) -> str:
    return f'"{name}"'

