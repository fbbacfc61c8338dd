"""The JSON bodies the API accepts, checked strictly: a wrong type or an unknown field is a 400 naming it."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reversi.core.json_values import has_lone_surrogate
from reversi.errors import BadInput

NonEmpty = Annotated[str, Field(min_length=1)]
StepNumber = Annotated[int, Field(ge=0)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RunScope(Body):
    actor: str = ""
    tenant: str = ""
    environment: str = ""


class OpenRun(Body):
    mode: Literal["observe", "enforce"] = "observe"
    scope: RunScope = Field(default_factory=RunScope)
    labels: dict[str, str] = Field(default_factory=dict)


class RecordStep(Body):
    tool: NonEmpty
    args: dict[str, Any] | None = Field(default_factory=dict)  # a call's arguments are named, as in MCP
    depends_on: list[StepNumber] = Field(default_factory=list)


class Outcome(Body):
    status: Literal["succeeded", "failed", "uncertain"]
    result: Any = None
    error: str | None = None


class Resolve(Body):
    status: Literal["succeeded", "failed"]
    note: NonEmpty
    result: Any = None
    actor: str | None = None


class Rollback(Body):
    confirm: bool = False
    approve_compensations: bool = False
    retries: Annotated[int, Field(ge=1, le=10)] = 1
    actor: str | None = None


class Approve(Body):
    by: str | None = None
    note: str | None = None


class Deny(Body):
    note: NonEmpty
    by: str | None = None


class HaltScopeBody(Body):
    tool: str | None = None
    actor: str | None = None
    tenant: str | None = None
    environment: str | None = None


class AddHalt(Body):
    reason: NonEmpty
    scope: HaltScopeBody = Field(default_factory=HaltScopeBody)


class Resume(Body):
    halt_id: str | None = None


class CreateKey(Body):
    name: NonEmpty
    role: Literal["agent", "operator", "admin"]
    tenant: str | None = None


B = TypeVar("B", bound=Body)


def parse_body(raw: bytes, model: type[B]) -> B:
    """The body as `model`; an empty body is `{}`.

    Raises:
        BadInput: not JSON, not an object, or a field missing, unknown or of the wrong type.
    """
    if raw.strip():
        try:
            text = raw.decode("utf-8-sig")  # JSON over HTTP is UTF-8 (RFC 8259); a BOM is tolerated
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise BadInput(f"the body is not JSON: {exc}") from None
        if "\\u" in text and has_lone_surrogate(data):
            raise BadInput("the body is not valid Unicode text: it holds a lone surrogate (a \\ud800-\\udfff escape "
                           "without its pair)")
    else:
        data = {}
    if not isinstance(data, dict):
        raise BadInput("the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise BadInput(f"field `{where}`: {first['msg']}") from None
