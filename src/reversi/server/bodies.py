"""The JSON bodies the API accepts, checked strictly: a wrong type or an unknown field is a 400 naming it."""

from __future__ import annotations

import json
import math
from typing import Annotated, Literal, NoReturn, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from reversi.core.json_values import JSON, JSONObject, LooseJSON, has_lone_surrogate, parse_json
from reversi.core.surfaces import Surface
from reversi.engine.rollback import MAX_CONCURRENCY
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
    args: dict[str, LooseJSON] | None = Field(default_factory=dict)  # a call's arguments are named, as in MCP
    depends_on: list[StepNumber] = Field(default_factory=list)
    before: LooseJSON = None  # what the caller's capture read before the call (`$before`); only when sent
    call_id: str | None = None  # the framework's id of the call (a model's tool call id), journaled with it


class ReportOutcome(Body):
    status: Literal["succeeded", "failed", "uncertain"]
    result: LooseJSON = None
    error: str | None = None

    @field_validator("result")
    @classmethod
    def _result_of_a_success(cls, value: LooseJSON, info: ValidationInfo) -> LooseJSON:
        if value is not None and info.data.get("status", "succeeded") != "succeeded":
            raise PydanticCustomError("outcome", "only a succeeded outcome has a result")
        return value

    @field_validator("error")
    @classmethod
    def _error_of_a_failure(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("status") == "succeeded":
            raise PydanticCustomError("outcome", "a succeeded outcome has no error")
        return value


class Resolve(Body):
    status: Literal["succeeded", "failed"]
    note: NonEmpty
    result: LooseJSON = None
    actor: str | None = None


class CloseFollowUp(Body):
    note: NonEmpty
    actor: str | None = None


class Rollback(Body):
    confirm: bool = False
    approve_compensations: bool = False
    attempts: Annotated[int, Field(ge=1, le=10, alias="retries")] = Surface.API.attempts  # per compensation
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = 1  # independent steps undone at once
    actor: str | None = None
    to: str | None = None  # a checkpoint's name: only the steps after it (the engine checks the name)
    after_step: int | None = None  # or a step number: only the steps after it


class ScopeOfRuns(Body):
    """The runs and steps a rollback of many runs covers (`reversi.core.scopes.Selection`)."""

    actor: str | None = None
    key: str | None = None
    tenant: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    tool: str | None = None
    since: str | None = None  # 30m, 2h, 7d or a date
    until: str | None = None


class ScopeRollback(ScopeOfRuns):
    confirm: bool = False
    contain: bool = False
    reason: str | None = None
    approve_compensations: bool = False
    attempts: Annotated[int, Field(ge=1, le=10, alias="retries")] = Surface.API.attempts  # per compensation
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = 1  # independent steps of each run at once
    actor_name: str | None = Field(default=None, alias="by")


class NewCheckpoint(Body):
    name: str  # its form (1-200 printable characters) is checked by the engine, with the CLI's message


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


class Erase(Body):
    tenant: str | None = None
    actor: str | None = None
    run_id: str | None = None
    actor_name: str | None = Field(default=None, alias="by")
    confirm: bool = False


class CreateKey(Body):
    name: NonEmpty
    role: Literal["viewer", "agent", "operator", "admin"]
    tenant: str | None = None


B = TypeVar("B", bound=Body)
_MAX_DIGITS = 4300  # Python's own bound on turning digits into an int and back


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text[:20]} is too large for a number")
    return value


def _int(text: str) -> int:
    if len(text) > _MAX_DIGITS:
        raise ValueError(f"a number of {len(text):,} digits is longer than the {_MAX_DIGITS:,} allowed")
    return int(text)


def _object(pairs: list[tuple[str, JSON]]) -> JSONObject:
    """An object, unless it names one key twice: JSON leaves which one counts to the reader, so we refuse
    it (a proxy that reads the first `status` and a journal that keeps the last would disagree)."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise BadInput(f"the body has the key {key[:40]!r} twice in one object")
            seen.add(key)
    return found


_STRICT_JSON = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite, parse_int=_int,
                                object_pairs_hook=_object)


def parse_body(raw: bytes, model: type[B]) -> B:
    """The body as `model`; an empty body is `{}`.

    Raises:
        BadInput: not JSON, not an object, or a field missing, unknown or of the wrong type.
    """
    if raw.strip():
        try:
            text = raw.decode("utf-8-sig")  # JSON over HTTP is UTF-8 (RFC 8259); a BOM is tolerated
        except UnicodeDecodeError as exc:
            raise BadInput(f"the body is not JSON: {exc}") from None
        data = parse_json(text, "the body", _STRICT_JSON)
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
        message = "Input should be an object" if first["type"] == "model_type" else first["msg"]
        raise BadInput(f"field `{where}`: {message}") from None
