"""What the framework wrappers share: the journaled name and arguments of a call, and a refusal's text."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic_core import to_jsonable_python

from reversi.core.json_values import JSONObject
from reversi.core.models import is_call_id


def journaled_name(names: Mapping[str, str], name: str) -> str:
    """The tool name to journal (and look up in the manifests): `names[name]`, else the framework's own."""
    return names.get(name, name)


def plain_arguments(args: Mapping[str, object]) -> JSONObject:
    """A call's arguments as plain JSON values for the journal (a framework may hand over models or dates)."""
    plain = to_jsonable_python(dict(args), fallback=str)
    assert isinstance(plain, dict)
    return plain


def usable_call_id(call_id: object) -> str | None:
    """A framework's id of a call, when the journal can keep it (`is_call_id`); else None: an odd id from
    a model only costs a pause its continuation (the step stays open), never the call."""
    return call_id if isinstance(call_id, str) and is_call_id(call_id) else None


def refusal_text(message: str) -> str:
    """What the model reads when Reversi refuses a call: the reason, and that nothing was done."""
    return f"Reversi refused this call, nothing was done: {message}"
