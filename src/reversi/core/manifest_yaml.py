"""Parsing one manifest file's YAML into tool entries and problems. No file I/O here.

Parsing walks PyYAML's composed node tree rather than the constructed objects, so every problem
carries the line of the key or value at fault, and YAML 1.1 surprises (`yes` as a boolean) are
refused instead of silently taken.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar, cast

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reversi.core.json_values import JSON, JSONObject, JSONView, canonical, quoted
from reversi.core.manifest import (
    ApprovalRule,
    Call,
    Capture,
    Compensation,
    CompensationKind,
    Effect,
    FollowUp,
    Probe,
    Problem,
    ToolEntry,
    Verification,
)
from reversi.core.manifest_templates import AFTER_CALL, BEFORE_CALL, Templates
from reversi.core.references import EACH
from reversi.core.sensitive import KEPT, SensitivePath, parse_path, sensitive_references
from reversi.core.times import parse_duration
from reversi.core.windows import UndoWindow
from reversi.core.yaml_nodes import INT, STR, describe, is_bool, is_null, plain, scalar
from reversi.errors import BadInput

__all__ = ["parse_manifest"]


def parse_manifest(text: str, source: str) -> tuple[list[ToolEntry], list[Problem]]:
    """Parse one manifest file's text.

    Args:
        text: The YAML text.
        source: The file's name, for entries and problems.

    Returns:
        The valid entries, and every problem and warning in line order. An entry with a problem
        is left out.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        repeated, tagged = _survey(root)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        return [], [Problem(source, mark.line + 1 if mark else 1, f"invalid YAML: {_one_line(error.problem)}")]
    except yaml.YAMLError as error:
        return [], [Problem(source, 1, f"invalid YAML: {_one_line(str(error))}")]
    except RecursionError:
        return [], [Problem(source, 1, _TOO_DEEP)]
    if repeated > ALIAS_BUDGET:
        return [], [Problem(source, 1, f"the manifest's aliases repeat more than {ALIAS_BUDGET} values: "
                            "write the values out instead")]
    if tagged:
        return [], [Problem(source, node.start_mark.line + 1, f"unsupported YAML tag {_shown_tag(node.tag)}: a "
                            "manifest holds plain values") for node in tagged]
    reader = _Reader(source)
    try:
        entries = reader.document(root)
    except RecursionError:
        return [], [Problem(source, 1, _TOO_DEEP)]
    unique = dict.fromkeys(reader.problems)  # a node shared through an alias is read once per use
    return entries, sorted(unique, key=lambda problem: problem.line)


ALIAS_BUDGET = 100_000  # values aliases may repeat in all: plenty for sharing, nothing like a YAML bomb's billions
_TOO_DEEP = "the manifest nests too deeply or refers to itself"


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


_YAML_TAG = "tag:yaml.org,2002:"
# The tags YAML gives plain values on its own; any other (`!!python/object`, `!vendor`) asks for a
# constructor a manifest does not get.
_PLAIN_TAGS = frozenset(_YAML_TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp", "merge", "value",
                                                 "seq", "map"))


def _shown_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_YAML_TAG) if tag.startswith(_YAML_TAG) else tag


def _survey(root: Node | None) -> tuple[int, list[Node]]:
    """How many values the document's aliases add once expanded (each `*name` repeats its anchor's
    whole value), counted without expanding them; and the nodes with a tag that is not plain.

    Raises:
        RecursionError: the document nests too deeply, or an anchor's value holds an alias of itself.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    tagged: list[Node] = []

    def size(node: Node) -> int:  # the node's values, its aliases expanded
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in open_nodes:
            raise RecursionError("an anchor's value holds an alias of itself")
        open_nodes.add(id(node))
        if node.tag not in _PLAIN_TAGS:
            tagged.append(node)
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = node.value
        elif isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        sizes[id(node)] = total = 1 + sum(size(child) for child in children)
        open_nodes.discard(id(node))
        return total

    if root is None:
        return 0, []
    return size(root) - len(sizes), sorted(tagged, key=lambda node: node.start_mark.index)


_TOOL_KEYS = frozenset(
    {"effect", "idempotent", "irreversible", "requires", "requires_approval", "idempotency"}
    | {"compensation", "verification", "capture", "read_when", "sensitive", "resources", "volatile"}
    | {"undo_until", "undo_window", "undo_from", "probe", "follow_up"}
)
_FOLLOW_UP_KEYS = frozenset({"title", "text", "owner", "action"})
_PROBE_KEYS = frozenset({"tool", "args", "took_effect", "not_taken", "result"})
_PROBE_ROOTS = frozenset({"args", "run", "step"})  # what is known of a call whose outcome is not
_COMPENSATION_KEYS = frozenset(
    {"tool", "args", "kind", "requires_approval", "residue", "when", "name", "then", "verification"})
_CALL_KEYS = frozenset({"tool", "args"})
_CAPTURE_KEYS = frozenset({"tool", "args", "absent_on_error"})
_VERIFICATION_KEYS = frozenset({"tool", "args", "expect", "retries", "backoff_ms"})

_T = TypeVar("_T")
_E = TypeVar("_E", bound=StrEnum)
_Fields = dict[str, tuple[Node, Node]]


class _Reader:
    """Reads one file's node tree, collecting its problems."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[Problem] = []
        self.templates = Templates(self.problem, self.pairs)
        self.roots = AFTER_CALL  # what the current entry's templates may name

    def problem(self, node: Node, message: str, *, warning: bool = False) -> None:
        self.problems.append(Problem(self.source, node.start_mark.line + 1, message, warning))

    def document(self, root: Node | None) -> list[ToolEntry]:
        if root is None or is_null(root):
            self.problems.append(Problem(self.source, 1, "the manifest is empty"))
            return []
        if not isinstance(root, MappingNode):
            self.problem(root, f"expected a mapping with version and tools, got {describe(root)}")
            return []
        found = self.fields(root, frozenset({"version", "tools"}), "the manifest") or {}
        version = found.get("version")
        if version is None:
            self.problem(root, 'missing "version"')
        elif not (isinstance(version[1], ScalarNode) and version[1].tag == INT and scalar(version[1]) == 1):
            self.problem(version[1], f"version: expected 1, got {describe(version[1])}")
        tools = found.get("tools")
        if tools is None:
            self.problem(root, 'missing "tools"')
            return []
        if is_null(tools[1]):
            return []
        if not isinstance(tools[1], MappingNode):
            self.problem(tools[1], f"tools: expected a mapping, got {describe(tools[1])}")
            return []
        entries = [self.tool(name, key, value) for name, key, value in self.pairs(tools[1])]
        return [entry for entry in entries if entry is not None]

    def tool(self, pattern: str, key: Node, node: Node) -> ToolEntry | None:
        before = len(self.problems)
        if not pattern:
            self.problem(key, "expected a tool name, got an empty key")
        found = self.fields(node, _TOOL_KEYS, pattern) or {}
        self.roots = AFTER_CALL | ({"before", "before_text"} if "capture" in found else set())
        irreversible = self.get(found, "irreversible", self.irreversible)
        entry = ToolEntry(
            pattern=pattern,
            source=self.source,
            line=key.start_mark.line + 1,
            effect=self.get(found, "effect", self.choice(Effect)) or Effect.WRITE,
            idempotent=self.get(found, "idempotent", self.boolean) or False,
            irreversible=bool(irreversible),
            requires=self.get(found, "requires", self.strings) or (),
            requires_approval=self.approval(found, ""),
            idempotency_key=self.get(found, "idempotency", self.idempotency),
            compensations=self.get(found, "compensation", self.compensations) or (),
            verification=self.get(found, "verification", self.verification),
            irreversible_reason=irreversible if isinstance(irreversible, str) else "",
            capture=self.get(found, "capture", self.capture),
            read_when=self.get(found, "read_when", self.conditions),
            sensitive=self.get(found, "sensitive", self.sensitive) or (),
            resources=self.get(found, "resources", self.resources) or (),
            digest=_digest(plain(node) if not is_null(node) else {}),
            volatile=self.get(found, "volatile", self.strings) or (),
            undo_window=self.undo_window(found, key),
            probe=self.get(found, "probe", self.probe),
            follow_up=self.get(found, "follow_up", self.follow_up),
        )
        if len(self.problems) > before:
            return None
        undo = [*(("compensation", call) for comp in entry.compensations for call in comp.calls),
                ("read-back", entry.verification), *(("read-back", comp.verification) for comp in entry.compensations)]
        needed = {(what, ref): None for what, call in undo if call is not None
                  for ref in sensitive_references(call.args, entry.sensitive)}
        for what, ref in needed:
            self.problem(key, f"{pattern}: its {what} needs {ref}, a sensitive value: {KEPT}", warning=True)
        if entry.irreversible and entry.compensations:
            self.problem(key, f"{pattern} is marked irreversible and declares a compensation: keep one "
                              "(an irreversible call is never undone, so its compensation would never run)")
            return None
        if entry.needs_undo and not entry.compensations and not entry.irreversible:
            message = (
                f"{pattern} has no compensation and is not marked irreversible: "
                'it will plan as unrecoverable ("no compensation declared")'
            )
            self.problem(key, message, warning=True)
        return entry

    def compensations(self, key: Node, node: Node, label: str) -> tuple[Compensation, ...] | None:
        """One compensation (a mapping), or alternatives (a list of them, each with its `when`)."""
        if not isinstance(node, SequenceNode):
            one = self.compensation(key, node, label)
            return None if one is None else (one,)
        if not node.value:
            self.problem(node, f"{label}: expected a compensation or a list of alternatives, got an empty list")
            return None
        found = [self.compensation(item, item, f"{label}[{i}]") for i, item in enumerate(node.value)]
        alternatives = tuple(comp for comp in found if comp is not None)
        if len(alternatives) != len(found):
            return None
        names: set[str] = set()
        for i, (comp, item) in enumerate(zip(alternatives, node.value, strict=True)):
            if comp.name is not None and comp.name in names:
                self.problem(item, f"{label}[{i}]: the name {quoted(comp.name)} is given to two alternatives")
            if comp.name is not None:
                names.add(comp.name)
            if comp.when is None and i < len(alternatives) - 1 and not _has_key(item, "when"):
                self.problem(item, f"{label}[{i}] has no \"when\", so it always fits and the alternatives after "
                                   "it are never used: give it a \"when\" or move it last")
        return alternatives

    def compensation(self, key: Node, node: Node, label: str) -> Compensation | None:
        found = self.fields(node, _COMPENSATION_KEYS, label)
        if found is None:
            return None
        tool = self.required_tool(found, key, label)
        args = self.get(found, "args", self.template_mapping, label) or {}
        kind = self.get(found, "kind", self.choice(CompensationKind), label)
        requires_approval = self.approval(found, label)
        residue = self.get(found, "residue", self.strings, label) or ()
        when = self.get(found, "when", self.conditions, label)
        name = self.get(found, "name", self.text, label)
        then = self.get(found, "then", self.calls, label) or ()
        verification = self.get(found, "verification", self.verification, label)
        if tool is None:
            return None
        return Compensation(tool, args, kind or CompensationKind.COMPENSATION, requires_approval, residue, when, name,
                            then, verification)

    def calls(self, key: Node, node: Node, label: str) -> tuple[Call, ...] | None:
        """`then`: the calls after the first, each `{tool, args}`."""
        if not isinstance(node, SequenceNode) or not node.value:
            got = "an empty list" if isinstance(node, SequenceNode) else describe(node)
            self.problem(node, f"{label}: expected a list of calls ({{tool, args}}), got {got}")
            return None
        calls = []
        for i, item in enumerate(node.value):
            call = self.call(item, item, f"{label}[{i}]")
            if call is not None:
                calls.append(call)
        return tuple(calls) if len(calls) == len(node.value) else None

    def approval(self, found: _Fields, label: str) -> ApprovalRule:
        """The `requires_approval` of an entry or a compensation (`label`); false when not given."""
        rule = cast("ApprovalRule | None", self.get(found, "requires_approval", self.approval_rule, label))
        return False if rule is None else rule

    def approval_rule(self, key: Node, node: Node, label: str) -> ApprovalRule | None:
        """`true`, `false`, or conditions on the call's `$args` and `$run` (decided when the call is made)."""
        if isinstance(node, MappingNode):
            before = len(self.problems)
            self.templates.early = "requires_approval is decided"
            try:
                self.templates.conditions(node, BEFORE_CALL, label)
            finally:
                self.templates.early = "a capture runs"
            value = plain(node)
            return value if isinstance(value, dict) and len(self.problems) == before else None
        if is_bool(node):
            return bool(scalar(node))
        self.problem(node, f"{label}: expected true, false or conditions on $args, got {describe(node)}")
        return None

    def capture(self, key: Node, node: Node, label: str) -> Capture | None:
        found = self.fields(node, _CAPTURE_KEYS, label)
        if found is None:
            return None
        tool = self.required_tool(found, key, label)
        args = self.get(found, "args", self.template_mapping, label, BEFORE_CALL) or {}
        absent_on_error = self.get(found, "absent_on_error", self.text, label)
        return Capture(tool, args, absent_on_error) if tool is not None else None

    def conditions(self, key: Node, node: Node, label: str) -> JSONObject | None:
        before = len(self.problems)
        self.templates.conditions(node, self.roots, label)
        value = plain(node)
        return value if isinstance(value, dict) and len(self.problems) == before else None

    def irreversible(self, key: Node, node: Node, label: str) -> bool | str | None:
        """`true`, `false`, or a sentence saying what stays (which means true)."""
        if isinstance(node, ScalarNode) and node.tag == STR and node.value.strip():
            return str(scalar(node))
        if is_bool(node):
            return bool(scalar(node))
        self.problem(node, f"{label}: expected true, false or a sentence saying what stays, got {describe(node)}")
        return None

    def follow_up(self, key: Node, node: Node, label: str) -> FollowUp | None:
        found = self.fields(node, _FOLLOW_UP_KEYS, label)
        if found is None:
            return None
        if "title" not in found:
            self.problem(key, f'{label}: missing "title", what the person is to do')
            return None
        texts = {}
        for name in ("title", "text"):
            if name in found:
                node = found[name][1]
                if not (isinstance(node, ScalarNode) and node.tag == STR) and not isinstance(node, MappingNode):
                    self.problem(node, f"{label}.{name}: expected a text (with ${{...}} parts) or a form, got "
                                       f"{describe(node)}")
                    return None
                self.templates.template(node, self.roots)
                texts[name] = plain(node)
        owner = self.get(found, "owner", self.text, label) or ""
        action = self.get(found, "action", self.call, label)
        return FollowUp(texts["title"], texts.get("text", ""), owner, action)

    def call(self, key: Node, node: Node, label: str) -> Call | None:
        found = self.fields(node, _CALL_KEYS, label)
        if found is None:
            return None
        tool = self.required_tool(found, key, label)
        args = self.get(found, "args", self.template_mapping, label) or {}
        return Call(tool, args) if tool is not None else None

    def probe(self, key: Node, node: Node, label: str) -> Probe | None:
        found = self.fields(node, _PROBE_KEYS, label)
        if found is None:
            return None
        tool = self.required_tool(found, key, label)
        args = self.get(found, "args", self.template_mapping, label, _PROBE_ROOTS) or {}
        took_effect = self.get(found, "took_effect", self.probe_expect, label)
        not_taken = self.get(found, "not_taken", self.probe_expect, label)
        if "took_effect" not in found and "not_taken" not in found:
            self.problem(key, f"{label}: give took_effect, not_taken or both: what the answer shows when the call "
                              "took effect, and when it did not")
            return None
        result: JSON = "$result"
        if "result" in found:
            self.templates.template(found["result"][1], AFTER_CALL)
            result = plain(found["result"][1])
        return Probe(tool, args, took_effect, not_taken, result) if tool is not None else None

    def probe_expect(self, key: Node, node: Node, label: str) -> JSONObject | None:
        if not isinstance(node, MappingNode):
            self.problem(node, f"{label}: expected a mapping, as a read-back's expect, got {describe(node)}")
            return None
        self.templates.expect(node, _PROBE_ROOTS)
        value = plain(node)
        return value if isinstance(value, dict) else None

    def undo_window(self, found: _Fields, key: Node) -> UndoWindow | None:
        """`undo_until` (a moment), or `undo_window` (a length) counted from `undo_from` or the call."""
        until, length, start = (found.get(name) for name in ("undo_until", "undo_window", "undo_from"))
        if until is not None and (length is not None or start is not None):
            self.problem(until[0], "undo_until: give the moment the undo stops being possible, or undo_window "
                                   "(a length, from undo_from or the call), not both")
            return None
        if start is not None and length is None:
            self.problem(start[0], "undo_from: needs undo_window, the length of the window from there")
            return None
        if until is not None:
            return UndoWindow(until=self.moment_template(until[1], "undo_until"))
        if length is None:
            return None
        text = self.text(length[0], length[1], "undo_window")
        try:
            span = parse_duration(text or "", what="undo_window") if text is not None else None
        except BadInput as bad:
            self.problem(length[1], bad.message)
            return None
        if not span:
            if text is not None:
                self.problem(length[1], "undo_window: expected a length longer than 0, like 180d or 15m")
            return None
        return UndoWindow(length=span, start=self.moment_template(start[1], "undo_from") if start else None)

    def moment_template(self, node: Node, label: str) -> JSON:
        """A template naming a moment (`$result.created`), or a moment written as text."""
        self.templates.template(node, self.roots)
        value = plain(node)
        if not isinstance(value, str | dict):
            self.problem(node, f"{label}: expected a reference naming a time (like \"$result.expires_at\") or an "
                               f"RFC 3339 time in quotes, got {describe(node)}")
        return value

    def text(self, key: Node, node: Node, label: str) -> str | None:
        value = scalar(node) if isinstance(node, ScalarNode) and not is_null(node) else None
        if isinstance(value, str) and value:
            return value
        self.problem(node, f"{label}: expected a text, got {describe(node)}")
        return None

    def verification(self, key: Node, node: Node, label: str) -> Verification | None:
        found = self.fields(node, _VERIFICATION_KEYS, label)
        if found is None:
            return None
        tool = self.required_tool(found, key, label)
        args = self.get(found, "args", self.template_mapping, label) or {}
        expect = self.get(found, "expect", self.expect, label) or {}
        retries = self.get(found, "retries", self.count, label)
        backoff_ms = self.get(found, "backoff_ms", self.count, label)
        if tool is None:
            return None
        return Verification(
            tool, args, expect, 0 if retries is None else retries, 200 if backoff_ms is None else backoff_ms
        )

    def idempotency(self, key: Node, node: Node, label: str) -> tuple[JSON, ...] | None:
        found = self.fields(node, frozenset({"key"}), label)
        if found is None:
            return None
        if "key" not in found:
            self.problem(key, f'{label}: missing "key"')
            return None
        node = found["key"][1]
        if not isinstance(node, SequenceNode) or not node.value:
            self.problem(node, f"{label}.key: expected a non-empty list of references, got {describe(node)}")
            return None
        self.templates.template(node, self.roots)
        return tuple(plain(item) for item in node.value)

    def required_tool(self, found: _Fields, key: Node, label: str) -> str | None:
        if "tool" not in found:
            self.problem(key, f'{label}: missing "tool"')
            return None
        node = found["tool"][1]
        tool = scalar(node) if isinstance(node, ScalarNode) else None
        if not isinstance(tool, str) or not tool:
            self.problem(node, f"{label}.tool: expected a tool name, got {describe(node)}")
            return None
        return tool

    def get(
        self, found: _Fields, name: str, read: Callable[..., _T | None], within: str = "", *more: Any
    ) -> _T | None:
        """Read field `name` when present (`read(key, node, label, *more)`); its label is dotted under `within`."""
        if name not in found:
            return None
        key, node = found[name]
        return read(key, node, f"{within}.{name}" if within else name, *more)

    def fields(self, node: Node, allowed: frozenset[str], label: str) -> _Fields | None:
        """The mapping's allowed fields (null is an empty mapping); None when it is not a mapping."""
        if is_null(node):
            return {}
        if not isinstance(node, MappingNode):
            self.problem(node, f"{label}: expected a mapping, got {describe(node)}")
            return None
        found: _Fields = {}
        for name, key, value in self.pairs(node):
            if name in allowed:
                found[name] = (key, value)
            else:
                self.problem(key, f"unknown key {quoted(name)}")
        return found

    def pairs(self, node: MappingNode) -> list[tuple[str, Node, Node]]:
        """The mapping's entries keyed by text; reports other keys and duplicated ones."""
        seen: set[str] = set()
        pairs: list[tuple[str, Node, Node]] = []
        for key, value in node.value:
            if not isinstance(key, ScalarNode):
                self.problem(key, f"expected a text key, got {describe(key)}")
            elif key.value in seen:
                self.problem(key, f"duplicate key {quoted(key.value)}")
            else:
                seen.add(key.value)
                pairs.append((key.value, key, value))
        return pairs

    def boolean(self, key: Node, node: Node, label: str) -> bool | None:
        if is_bool(node):
            return bool(node.value.lower() == "true")
        self.problem(node, f"{label}: expected true or false, got {describe(node)}")
        return None

    def count(self, key: Node, node: Node, label: str) -> int | None:
        value = scalar(node) if isinstance(node, ScalarNode) and node.tag == INT else None
        if isinstance(value, int) and value >= 0:
            return value
        self.problem(node, f"{label}: expected a whole number >= 0, got {describe(node)}")
        return None

    def choice(self, kind: type[_E]) -> Callable[[Node, Node, str], _E | None]:
        def read(key: Node, node: Node, label: str) -> _E | None:
            value = scalar(node) if isinstance(node, ScalarNode) else None
            if isinstance(value, str) and value in kind._value2member_map_:
                return kind(value)
            options = ", ".join(member.value for member in kind)
            self.problem(node, f"{label}: {describe(node)} is not one of {options}")
            return None

        return read

    def sensitive(self, key: Node, node: Node, label: str) -> tuple[SensitivePath, ...] | None:
        found = self.strings(key, node, label)
        if found is None:
            return None
        paths = []
        for item, text in zip(node.value, found, strict=True):
            try:
                paths.append(parse_path(text))
            except BadInput as exc:
                self.problem(item, f"{label}: {exc.message}")
        return tuple(paths) if len(paths) == len(found) else None

    def resources(self, key: Node, node: Node, label: str) -> tuple[JSON, ...] | None:
        """Templates of text (or `$each` forms that make a list of texts): what a call touches."""
        if not isinstance(node, SequenceNode):
            self.problem(node, f"{label}: expected a list of templates, got {describe(node)}")
            return None
        before = len(self.problems)
        for item in node.value:
            if isinstance(item, MappingNode) and not any(
                    isinstance(k, ScalarNode) and k.value == EACH for k, _ in item.value):
                self.problem(item, f"{label}: expected a text or a $each, got a mapping")
            elif not isinstance(item, ScalarNode | MappingNode) or (
                    isinstance(item, ScalarNode) and not isinstance(scalar(item), str)):
                self.problem(item, f"{label}: expected a text or a $each, got {describe(item)}")
        self.templates.template(node, self.roots)
        value = plain(node)
        return tuple(value) if len(self.problems) == before and isinstance(value, list) else None

    def strings(self, key: Node, node: Node, label: str) -> tuple[str, ...] | None:
        if not isinstance(node, SequenceNode):
            self.problem(node, f"{label}: expected a list of strings, got {describe(node)}")
            return None
        values: list[str] = []
        for item in node.value:
            value = scalar(item) if isinstance(item, ScalarNode) else None
            if isinstance(value, str):
                values.append(value)
            else:
                self.problem(item, f"{label}: expected a string, got {describe(item)}")
        return tuple(values) if len(values) == len(node.value) else None

    def template_mapping(
        self, key: Node, node: Node, label: str, roots: frozenset[str] | None = None
    ) -> JSONObject | None:
        if is_null(node):
            return {}
        if not isinstance(node, MappingNode):
            self.problem(node, f"{label}: expected a mapping, got {describe(node)}")
            return None
        self.templates.template(node, self.roots if roots is None else roots)
        value = plain(node)
        return value if isinstance(value, dict) else None

    def expect(self, key: Node, node: Node, label: str) -> JSONObject | None:
        if is_null(node):
            return {}
        if not isinstance(node, MappingNode):
            self.problem(node, f"{label}: expected a mapping, got {describe(node)}")
            return None
        self.templates.expect(node, self.roots)
        value = plain(node)
        return value if isinstance(value, dict) else None


def _has_key(node: Node, key: str) -> bool:
    return isinstance(node, MappingNode) and any(isinstance(k, ScalarNode) and k.value == key for k, _ in node.value)


def _digest(value: JSONView) -> str:
    return hashlib.sha256(canonical(value, text_fallback=True).encode()).hexdigest()
