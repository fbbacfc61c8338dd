"""Checking a manifest's templates, `expect` and conditions where they are written. Pure: no I/O.

Each problem is reported at its node's line: a bad reference, a reference to something the template
cannot know (`$result` in a capture, `$before` in an entry without one, `$item` outside `$each`), a
malformed `$each` or `$search` form, and a misused operator (`$exists`, `$error`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reversi.core.expect import ANY, COMPARISONS, ERROR, EXCLUDES, EXISTS, NOT
from reversi.core.json_values import quoted
from reversi.core.patterns import check_pattern
from reversi.core.references import EACH, SEARCH, bad_references, is_reference, reference_roots
from reversi.core.yaml_nodes import describe, is_bool, is_null, scalar

__all__ = ["AFTER_CALL", "BEFORE_CALL", "Templates"]

BEFORE_CALL = frozenset({"args", "run"})
"""What a capture's arguments may name: it runs before the call, which has no step number or result yet."""
AFTER_CALL = frozenset({"args", "result", "run", "step"})
"""What the other templates may name (and `before`, in an entry with a capture)."""

Report = Callable[[Node, str], None]
Pairs = Callable[[MappingNode], list[tuple[str, Node, Node]]]

_WHY_NOT = {
    "before": "$before needs a capture in this entry",
    "item": "$item is only known inside the \"as\" of a $each",
    "result": "a capture runs before the call: only $args and $run are known then",
    "step": "a capture runs before the call: only $args and $run are known then",
}


@dataclass
class Templates:
    """Checks templates for one manifest file, reporting through `report`; `pairs` reads a mapping's
    entries (reporting duplicate and non-text keys)."""

    report: Report
    pairs: Pairs

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
            elif operators and any(name.startswith("$") for name in names):
                self._operator(node, fields, roots)
            else:
                for _, _, value in fields:
                    self.template(value, roots, operators)

    def expect(self, node: Node, roots: frozenset[str]) -> None:
        """`verification.expect`: a template with operators, or `{$error: true | TEXT}` alone."""
        fields = self.pairs(node) if isinstance(node, MappingNode) else []
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
            self.report(node, f"{quoted(value)}: {_WHY_NOT.get(root, f'${root} is not known here')}")

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
            self._pattern(pattern)
        number = found.get("number")
        if number is not None and not (isinstance(number, ScalarNode) and isinstance(scalar(number), bool)):
            self.report(number, f"{SEARCH}.number: expected true or false, got {describe(number)}")
        self._no_others(fields, {SEARCH, "pattern", "number"})

    def _pattern(self, node: Node) -> None:
        text = str(scalar(node))  # type: ignore[arg-type]  # a ScalarNode: `_is_text` said so
        why = check_pattern(text)
        if why is not None:
            self.report(node, f"{SEARCH}.pattern {quoted(text)}: not a regular expression RE2 runs: {why}")

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
        elif name == EXCLUDES:
            if len(fields) != 1:
                self.report(node, f"{EXCLUDES} stands alone: {{{EXCLUDES}: TEXT}}")
            elif not _is_text(value):
                self.report(value, f"{EXCLUDES}: expected a text, got {describe(value)}")
        elif name != EXISTS:
            known = ", ".join([EXISTS, EXCLUDES, NOT, ANY, *COMPARISONS])
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
