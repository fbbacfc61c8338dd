"""Checking a manifest's templates, `expect` and conditions where they are written. Pure: no I/O.

Each problem is reported at its node's line: a bad reference, a reference to something the template
cannot know (`$result` in a capture, `$before` in an entry without one, `$item` outside `$each`), a
malformed `$each` or `$search` form, and a misused operator (`$exists`, `$error`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reversi.core.expect import ANY, COMPARISONS, ERROR, EXISTS, MATCHES, NOT, TEXT_MATCHERS
from reversi.core.json_values import quoted
from reversi.core.patterns import check_pattern
from reversi.core.references import (
    EACH,
    FORMAT,
    OPTIONAL,
    QUOTES,
    SEARCH,
    bad_references,
    format_names,
    is_reference,
    reference_roots,
)
from reversi.core.yaml_nodes import describe, is_bool, is_null, scalar

__all__ = ["AFTER_CALL", "BEFORE_CALL", "Templates"]

BEFORE_CALL = frozenset({"args", "run"})
"""What a capture's arguments may name: it runs before the call, which has no step number or result yet."""
AFTER_CALL = frozenset({"args", "result", "result_text", "run", "step"})
"""What the other templates may name (and `before`, in an entry with a capture)."""

Report = Callable[[Node, str], None]
Pairs = Callable[[MappingNode], list[tuple[str, Node, Node]]]

_WHY_NOT = {
    "before": "$before needs a capture in this entry",
    "before_text": "$before_text needs a capture in this entry",
    "item": "$item is only known inside the \"as\" of a $each",
    "result": "{early} before the call: only $args and $run are known then",
    "step": "{early} before the call: only $args and $run are known then",
}


@dataclass
class Templates:
    """Checks templates for one manifest file, reporting through `report`; `pairs` reads a mapping's
    entries (reporting duplicate and non-text keys)."""

    report: Report
    pairs: Pairs
    early: str = "a capture runs"
    """What is checked when only `BEFORE_CALL` is known, as the messages say it."""

    def template(self, node: Node, roots: frozenset[str], operators: bool = False) -> None:
        """A template: its references, `$each` and `$search` forms, and (`operators`) `$exists`."""
        if isinstance(node, ScalarNode):
            self._scalar(node, roots)
        elif isinstance(node, SequenceNode):
            for item in node.value:
                self.template(item, roots, operators)
        elif isinstance(node, MappingNode):
            fields = self.pairs(node)
            names = [name for name, _, _ in fields]
            if EACH in names:
                self._each(node, fields, roots, operators)
            elif SEARCH in names:
                self._search(node, fields, roots)
            elif OPTIONAL in names:
                self._optional(node, fields, roots, operators)
            elif FORMAT in names:
                self._format(node, fields, roots, operators)
            elif quote := next((name for name in names if name in QUOTES), None):
                self._quote(quote, fields, roots, operators)
            elif operators and any(name.startswith("$") for name in names):
                self._operator(node, fields, roots)
            else:
                for _, _, value in fields:
                    self.template(value, roots, operators)

    def expect(self, node: Node, roots: frozenset[str]) -> None:
        """`verification.expect`: a template with operators, or `{$error: true | TEXT}` alone."""
        fields = self.pairs(node) if isinstance(node, MappingNode) else []
        if len(fields) == 1 and fields[0][0] == ANY and isinstance(fields[0][2], SequenceNode) and fields[0][2].value:
            for choice in fields[0][2].value:  # alternatives of a whole expect: each may be an `$error` one
                self.expect(choice, roots)
            return
        if any(name == ERROR for name, _, _ in fields):
            if len(fields) != 1:
                self.report(node, f"{ERROR} stands alone: expect {{{ERROR}: true}} or {{{ERROR}: TEXT}}")
            elif not (is_bool(value := fields[0][2]) and scalar(value) is True) and not _is_text(value):
                self.report(value, f"{ERROR}: expected true or a text the error contains, got {describe(value)}")
            return
        self.template(node, roots, operators=True)

    def conditions(self, node: Node, roots: frozenset[str], label: str) -> None:
        """A mapping from a reference (its key) to the value it must match."""
        if not isinstance(node, MappingNode) or not node.value:
            self.report(node, f"{label}: expected a mapping from references to values, got {describe(node)}")
            return
        for name, key, value in self.pairs(node):
            if not is_reference(name):
                self.report(key, f"{label}: {quoted(name)} is not a reference: write e.g. \"$args.dryRun\"")
            elif isinstance(key, ScalarNode):
                self._scalar(key, roots)
            self.template(value, roots, operators=True)

    def _scalar(self, node: ScalarNode, roots: frozenset[str]) -> None:
        value = scalar(node)
        if not isinstance(value, str):
            return
        for bad in bad_references(value):
            self.report(node, f"bad reference {quoted(bad)}")
        for root in sorted(reference_roots(value) - roots):
            early = roots == BEFORE_CALL and root in ("before", "before_text", "result", "result_text", "step")
            why = _WHY_NOT["result" if early else root] if early or root in _WHY_NOT else f"${root} is not known here"
            why = why.format(early=self.early)
            self.report(node, f"{quoted(value)}: {why}")

    def _each(self, node: MappingNode, fields: list[tuple[str, Node, Node]], roots: frozenset[str],
              operators: bool) -> None:
        found = {name: value for name, _, value in fields}
        self._one_reference(found[EACH], EACH, roots, "a list")
        if "as" not in found:
            self.report(node, f'{EACH}: missing "as" (the template for each element, where $item names it)')
        else:
            self.template(found["as"], roots | {"item"}, operators)
        self._no_others(fields, {EACH, "as"})

    def _search(self, node: MappingNode, fields: list[tuple[str, Node, Node]], roots: frozenset[str]) -> None:
        found = {name: value for name, _, value in fields}
        self._one_reference(found[SEARCH], SEARCH, roots, "a text")
        pattern = found.get("pattern")
        if pattern is None:
            self.report(node, f'{SEARCH}: missing "pattern" (a regular expression)')
        elif not _is_text(pattern):
            self.report(pattern, f"{SEARCH}.pattern: expected a regular expression, got {describe(pattern)}")
        else:
            self._pattern(pattern, f"{SEARCH}.pattern")
        number = found.get("number")
        if number is not None and not (isinstance(number, ScalarNode) and isinstance(scalar(number), bool)):
            self.report(number, f"{SEARCH}.number: expected true or false, got {describe(number)}")
        group = found.get("group")
        value = scalar(group) if isinstance(group, ScalarNode) and not is_bool(group) else None
        if group is not None and (not isinstance(value, int) or value < 0):
            self.report(group, f"{SEARCH}.group: expected a group number (0: the whole match), got {describe(group)}")
        self._no_others(fields, {SEARCH, "pattern", "number", "group"})

    def _optional(self, node: MappingNode, fields: list[tuple[str, Node, Node]], roots: frozenset[str],
                  operators: bool) -> None:
        found = {name: value for name, _, value in fields}
        if isinstance(found[OPTIONAL], MappingNode):  # a form that may name nothing: `{$search: ...}`
            self.template(found[OPTIONAL], roots, operators)
        else:
            self._one_reference(found[OPTIONAL], OPTIONAL, roots, "a value (or a form such as $search)")
        if "default" in found:
            self.template(found["default"], roots, operators)
        self._no_others(fields, {OPTIONAL, "default"})

    def _format(self, node: MappingNode, fields: list[tuple[str, Node, Node]], roots: frozenset[str],
                operators: bool) -> None:
        found = {name: (key, value) for name, key, value in fields}
        text = found[FORMAT][1]
        if not _is_text(text):
            self.report(text, f"{FORMAT}: expected a text with {{NAME}} parts, got {describe(text)}")
            return
        used = format_names(str(scalar(text)))  # type: ignore[arg-type]  # a ScalarNode: `_is_text` said so
        for name in dict.fromkeys(used):
            if name not in found or name == FORMAT:
                self.report(text, f"{FORMAT}: {{{name}}} has no template: add {quoted(name)} beside {FORMAT}")
        for name, (key, value) in found.items():
            if name == FORMAT:
                continue
            if name not in used:
                self.report(key, f"{FORMAT}: {quoted(name)} is not used in the text (write {{{name}}} where it goes)")
            self.template(value, roots, operators)

    def _quote(self, name: str, fields: list[tuple[str, Node, Node]], roots: frozenset[str], operators: bool) -> None:
        self.template(next(value for field, _, value in fields if field == name), roots, operators)
        others = ", ".join(field for field, _, _ in fields if field != name)
        if others:
            self.report(fields[0][1], f"{name} stands alone: {{{name}: TEMPLATE}} (beside it: {others})")

    def _pattern(self, node: Node, label: str) -> None:
        text = str(scalar(node))  # type: ignore[arg-type]  # a ScalarNode: `_is_text` said so
        why = check_pattern(text)
        if why is not None:
            self.report(node, f"{label} {quoted(text)}: not a regular expression RE2 runs: {why}")

    def _one_reference(self, node: Node, form: str, roots: frozenset[str], what: str) -> None:
        if isinstance(node, ScalarNode) and isinstance(scalar(node), str) and is_reference(str(scalar(node))):
            self._scalar(node, roots)
        else:
            self.report(node, f"{form}: expected one reference to {what}, got {describe(node)}")

    def _operator(self, node: MappingNode, fields: list[tuple[str, Node, Node]], roots: frozenset[str]) -> None:
        name, key, value = next(field for field in fields if field[0].startswith("$"))
        if name in (NOT, ANY, *COMPARISONS):
            self._logical(node, fields, roots)
        elif name == ERROR:
            self.report(key, f"{ERROR} is only allowed as the whole expect: {{{ERROR}: true}} or {{{ERROR}: TEXT}}")
        elif name in TEXT_MATCHERS:
            what = "RE" if name == MATCHES else "TEXT"
            if len(fields) != 1:
                self.report(node, f"{name} stands alone: {{{name}: {what}}}")
            elif name != MATCHES and isinstance(value, MappingNode):  # a text built: `{$format: ...}`
                self.template(value, roots)
            elif not _is_text(value):
                self.report(value, f"{name}: expected a {'regular expression' if what == 'RE' else 'text'}, "
                                   f"got {describe(value)}")
            elif name == MATCHES and reference_roots(scalar(value)):  # type: ignore[arg-type]  # text, said so
                self.report(value, f"{MATCHES}: a pattern is the manifest's own, with no references in it: "
                                   "match against a value, not with one")
            elif name == MATCHES:
                self._pattern(value, MATCHES)
        elif name != EXISTS:
            known = ", ".join([EXISTS, *TEXT_MATCHERS, NOT, ANY, *COMPARISONS])
            self.report(key, f"unknown operator {quoted(name)} (known: {known}, and {ERROR} in expect)")
        elif len(fields) != 1:
            self.report(node, f"{EXISTS} stands alone: {{{EXISTS}: true}} or {{{EXISTS}: false}}")
        elif not is_bool(value):
            self.report(value, f"{EXISTS}: expected true or false, got {describe(value)}")

    def _logical(self, node: MappingNode, fields: list[tuple[str, Node, Node]], roots: frozenset[str]) -> None:
        """`$not`, `$any` and the comparisons: each alone in its mapping, over what it takes."""
        name, _, value = next(field for field in fields if field[0].startswith("$"))
        if len(fields) != 1:
            self.report(node, f"{name} stands alone: {{{name}: ...}}")
        elif name == NOT:
            self.template(value, roots, operators=True)
        elif name == ANY and (not isinstance(value, SequenceNode) or not value.value):
            got = "an empty list" if isinstance(value, SequenceNode) else describe(value)
            self.report(value, f"{ANY}: expected a list of what may match, got {got}")
        elif name == ANY:
            self.template(value, roots, operators=True)
        else:
            number = scalar(value) if isinstance(value, ScalarNode) and not is_bool(value) else None
            if not isinstance(number, int | float) or isinstance(number, bool):
                self.report(value, f"{name}: expected a number, got {describe(value)}")

    def _no_others(self, fields: list[tuple[str, Node, Node]], allowed: set[str]) -> None:
        names = sorted(allowed)
        beside = f"{', '.join(names[:-1])} and {names[-1]}"
        for name, key, _ in fields:
            if name not in allowed:
                self.report(key, f"unknown key {quoted(name)} beside {beside}")


def _is_text(node: Node) -> bool:
    return isinstance(node, ScalarNode) and not is_null(node) and isinstance(scalar(node), str)
