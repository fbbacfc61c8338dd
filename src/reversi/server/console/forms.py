"""Reading the console's requests: where a form came from and goes back to, what it carried, its size."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.datastructures import FormData
from starlette.requests import Request

from reversi.core.json_values import LooseJSONObject, parse_json
from reversi.core.scopes import Selection
from reversi.engine.rollback import MAX_CONCURRENCY, check_concurrency
from reversi.errors import BadInput
from reversi.server.endpoint import MAX_BODY_BYTES, is_whole_number


def safe_next(target: str | None) -> str:
    """Only a path on this site: never an address elsewhere (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def is_fragment(request: Request) -> bool:
    """A request from a page's script for a part of a page (rows, a job's progress)."""
    return "fragment" in request.query_params or request.url.path.endswith(".json")


def came_from(request: Request) -> str:
    """Where to go back to after signing in: this page with its query (for a form, the page it was on)."""
    if request.method == "GET":
        return request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return back(request)


def back(request: Request) -> str:
    """The page a form was sent from (its Referer on this site), else the runs list."""
    referer = urlsplit(request.headers.get("referer", ""))
    if referer.netloc and referer.netloc != request.url.netloc:
        return "/"
    return safe_next(referer.path or "/")


def typed(form: FormData) -> dict[str, str]:
    """What a form carried, to show it again (never its CSRF token)."""
    return {k: v for k, v in form.items() if k != "csrf" and isinstance(v, str)}


def too_large(request: Request) -> bool:
    """A form is a few fields: the API's body limit holds here too (a body of unknown length is refused)."""
    length = request.headers.get("content-length", "")
    return not is_whole_number(length) or int(length) > MAX_BODY_BYTES


def cursor(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    try:
        value = parse_json(text, "the page link")
    except BadInput:
        raise BadInput("bad page link: start again from the first page") from None
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise BadInput("bad page link: start again from the first page")
    return value[0], value[1]


CLOSED_IN_THE_CONSOLE = "closed in the console"  # a follow-up's note when the form's box was left empty


def step_param(text: str | None) -> int | None:
    """The `step` of a run page's address: which window of steps to show (None: the newest)."""
    if text is None or text == "":
        return None
    return step_number(text)


def step_number(text: str) -> int:
    """A step number as an address gives it (nine digits at most)."""
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise BadInput(f"step must be a step number, not {text[:40]!r}")
    return int(text)


def concurrency(text: object) -> int:
    """How many steps a rollback undoes at once, as a form or an address gives it (1 when left out)."""
    if text is None or text == "":
        return 1
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 2:
        raise BadInput(f"concurrency must be a whole number from 1 to {MAX_CONCURRENCY}, not {str(text)[:40]!r}")
    return check_concurrency(int(text))


def resolve_arguments(form: FormData) -> LooseJSONObject:
    """The keyword arguments of `resolve` the form gives: status, note, and the result typed, parsed."""
    status = str(form.get("status") or "")
    note = str(form.get("note") or "")
    result_text = str(form.get("result") or "").strip()
    if status == "failed" and result_text == str(form.get("template") or "").strip():
        result_text = ""  # the template the form started from, untouched: no result
    kwargs: LooseJSONObject = {"status": status, "note": note}
    if result_text:
        kwargs["result"] = parse_json(result_text, "the result")
    return kwargs


SCOPE_FIELDS = ("actor", "key", "tenant", "labels", "tool", "since", "until")


def scope_fields(source: Mapping[str, object]) -> dict[str, str]:
    """The scope-of-runs fields of a form or a query, as text (absent ones empty)."""
    return {name: str(source.get(name) or "").strip()[:500] for name in SCOPE_FIELDS}


def selection(fields: Mapping[str, str]) -> Selection:
    """The scope the fields give (`labels`: `K=V` pairs separated by commas).

    Raises:
        BadInput: as `Selection.typed`.
    """
    pairs = [p for p in fields.get("labels", "").split(",") if p.strip()]
    return Selection.typed(actor=fields.get("actor"), key=fields.get("key"), tenant=fields.get("tenant"),
                           labels=Selection.label_pairs(pairs), tool=fields.get("tool"),
                           since=fields.get("since"), until=fields.get("until"))
