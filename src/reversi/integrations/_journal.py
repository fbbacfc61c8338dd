"""What the framework wrappers share: the journaled name and arguments of a call, and a refusal's text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python


def journaled_name(names: Mapping[str, str], name: str) -> str:
    """The tool name to journal (and look up in the manifests): `names[name]`, else the framework's own."""
    return names.get(name, name)


def plain_arguments(args: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as plain JSON values for the journal (a framework may hand over models or dates)."""
    plain = to_jsonable_python(dict(args), fallback=str)
    assert isinstance(plain, dict)
    return plain


def usable_call_id(call_id: object) -> str | None:
    """A framework's id of a call, when the journal can keep it (1-200 printable characters): it comes
    from a model, and an odd one only costs the pause its continuation (the step stays open)."""
    if isinstance(call_id, str) and 0 < len(call_id) <= 200 and call_id.isprintable():
        return call_id
    return None


def refusal_text(message: str) -> str:
    """What the model reads when Reversi refuses a call: the reason, and that nothing was done."""
    return f"Reversi refused this call, nothing was done: {message}"
