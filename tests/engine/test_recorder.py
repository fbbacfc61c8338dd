"""The recorder: every refusal is journaled as `refused` and nothing is called; bad input changes nothing."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.errors import (
    ApprovalDenied,
    ApprovalRequired,
    BadInput,
    Conflict,
    Duplicate,
    Forbidden,
    Halted,
    NoManifestEntry,
    NotFound,
    Refused,
    StoreUnavailable,
)


class Tool:
    """A downstream tool that remembers every call it gets."""

    def __init__(self, result: Any = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.result = {"id": "x_1"} if result is None else result

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.result


def journal(run: reversi.Run) -> list[tuple[str, int | None]]:
    return [(e.type, e.step) for e in run.events()]


def assert_refused(run: reversi.Run, error: type[Refused], tool: str, args: dict[str, Any], reason: str) -> Refused:
    """Make the call, and check it was refused, journaled as `refused`, and not called."""
    fn = Tool()
    before = run.events()
    with pytest.raises(error) as refused:
        run.call(tool, args, fn)
    assert fn.calls == [], "a refused call must not run"
    assert refused.value.message == reason
    new = run.events()[len(before) :]
    assert new[-1].type == "refused" and new[-1].step is None
    assert new[-1].data == {"tool": tool, "args": args, "reason": reason, "code": refused.value.code}
    assert "intended" not in [e.type for e in new]
    assert len(run.steps()) == len([e for e in before if e.type == "intended"])
    return refused.value


@pytest.fixture
def kill_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "KILL"
    monkeypatch.setenv("REVERSI_KILL_FILE", str(path))
    return path


@pytest.fixture
def killable(db_url: str, manifest: Path, kill_file: Path) -> Iterator[reversi.Ledger]:
    """A ledger opened while REVERSI_KILL_FILE names `kill_file`."""
    with reversi.open(db_url, manifests=[str(manifest)]) as opened:
        yield opened


@pytest.mark.parametrize(
    ("content", "reason"), [("maintenance window\n", "maintenance window"), ("", "kill file present")]
)
def test_the_kill_file_refuses_every_new_call_with_its_reason(
    killable: reversi.Ledger, kill_file: Path, content: str, reason: str
) -> None:
    run = killable.start_run()
    kill_file.write_text(content)

    assert_refused(run, Halted, "crm.upsert_contact", {"email": "a@b.c"}, f"kill switch: {reason}")

    kill_file.unlink()
    assert run.call("crm.upsert_contact", {"email": "a@b.c"}, Tool()) == {"id": "x_1"}
    assert [s.index for s in run.steps()] == [0], "the refused call took no step number"


SCOPE_CASES = [
    # (halt scope, the run's scope and tool that it stops, ones that it lets through)
    ({"tool": "stripe.*"}, ("stripe.create_charge", {}), [("github.create_repo", {})]),
    (
        {"actor": "billing-*"},
        ("github.create_repo", {"actor": "billing-agent"}),
        [("github.create_repo", {"actor": "support-agent"}), ("github.create_repo", {"actor": "Billing-agent"})],
    ),
    (
        {"tenant": "acme"},
        ("github.create_repo", {"tenant": "acme"}),
        [("github.create_repo", {"tenant": "acme-eu"}), ("github.create_repo", {})],
    ),
    (
        {"environment": "prod?"},
        ("github.create_repo", {"environment": "prod1"}),
        [("github.create_repo", {"environment": "prod"}), ("github.create_repo", {"environment": "staging"})],
    ),
    (
        {"tool": "github.*", "tenant": "acme", "environment": "[ps]*"},
        ("github.create_repo", {"tenant": "acme", "environment": "prod"}),
        [
            ("stripe.create_charge", {"tenant": "acme", "environment": "prod"}),
            ("github.create_repo", {"tenant": "other", "environment": "prod"}),
            ("github.create_repo", {"tenant": "acme", "environment": "dev"}),
        ],
    ),
]


@pytest.mark.parametrize(("scope", "stopped", "allowed"), SCOPE_CASES, ids=lambda c: str(c))
def test_a_scoped_halt_stops_a_call_only_when_every_field_it_names_matches(
    ledger: reversi.Ledger,
    scope: dict[str, str],
    stopped: tuple[str, dict[str, Any]],
    allowed: list[tuple[str, dict[str, Any]]],
) -> None:
    halt = ledger.add_halt("investigating", by="dana", **scope)

    tool, run_scope = stopped
    named = ", ".join(f"{k}={v}" for k, v in scope.items())  # which halt, and that it stops only some calls
    refused = assert_refused(ledger.start_run(**run_scope), Halted, tool, {"n": 1},
                             f"kill switch: investigating (halt {halt.halt_id} stops only calls with {named})")
    assert isinstance(refused, Halted) and refused.halt_id == halt.halt_id
    for tool, run_scope in allowed:
        run = ledger.start_run(**run_scope)
        fn = Tool()
        run.call(tool, {"n": 2}, fn)
        assert fn.calls == [{"n": 2}], (tool, run_scope)


def test_enforce_mode_refuses_a_tool_without_an_entry_and_lets_manifested_ones_through(
    ledger: reversi.Ledger,
) -> None:
    run = ledger.start_run(mode="enforce")

    assert_refused(run, NoManifestEntry, "weather.set", {"city": "x"}, "no manifest entry for weather.set")
    run.call("jobs.start", {"n": 1}, Tool())  # a glob entry counts

    assert [s.tool for s in run.steps()] == ["jobs.start"]


def test_a_forward_duplicate_is_refused_across_runs_of_the_same_tenant_only(ledger: reversi.Ledger) -> None:
    first = ledger.start_run(tenant="acme")
    first.call("shop.place_order", {"order_id": "o_1", "sku": "A"}, Tool())

    same_tenant = ledger.start_run(tenant="acme", actor="someone-else")
    reason = f"duplicate call: step 0 of {first.id} already did this"
    assert_refused(same_tenant, Duplicate, "shop.place_order", {"order_id": "o_1", "sku": "B"}, reason)

    other_tenant = ledger.start_run(tenant="globex")
    other_tenant.call("shop.place_order", {"order_id": "o_1", "sku": "A"}, Tool())
    same_tenant.call("shop.place_order", {"order_id": "o_2", "sku": "A"}, Tool())


@pytest.mark.parametrize("outcome", ["intended", "uncertain", "succeeded"])
def test_a_step_holds_its_duplicate_key_while_it_may_have_taken_effect(ledger: reversi.Ledger, outcome: str) -> None:
    run = ledger.start_run()
    handle = run.begin("shop.place_order", {"order_id": "o_7"})
    if outcome == "uncertain":
        handle.uncertain("timed out")
    elif outcome == "succeeded":
        handle.succeeded({"ok": True})

    reason = f"duplicate call: step 0 of {run.id} already did this"
    assert_refused(run, Duplicate, "shop.place_order", {"order_id": "o_7"}, reason)


def test_a_failed_step_releases_its_duplicate_key(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.begin("shop.place_order", {"order_id": "o_7"}).failed("out of stock")

    assert run.begin("shop.place_order", {"order_id": "o_7"}).index == 1


def test_a_step_resolved_as_failed_releases_its_duplicate_key(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.begin("shop.place_order", {"order_id": "o_7"}).uncertain("timed out")
    run.resolve(0, "failed", note="no such order downstream", actor="dana")

    assert run.begin("shop.place_order", {"order_id": "o_7"}).index == 1


def test_a_compensated_step_releases_its_duplicate_key_but_a_failed_compensation_does_not(
    ledger: reversi.Ledger,
) -> None:
    run = ledger.start_run(tenant="acme")
    run.begin("shop.place_order", {"order_id": "o_7"}).succeeded({"ok": True})

    def refuse(call: dict[str, Any]) -> Any:
        raise RuntimeError("downstream said 503")

    run.rollback(compensate=refuse)
    later = ledger.start_run(tenant="acme")
    assert_refused(
        later,
        Duplicate,
        "shop.place_order",
        {"order_id": "o_7"},
        f"duplicate call: step 0 of {run.id} already did this",
    )

    run.rollback(compensate=lambda call: {"cancelled": True})
    assert later.begin("shop.place_order", {"order_id": "o_7"}).index == 0


def test_a_call_without_the_parts_of_its_key_is_not_checked_for_duplicates(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.begin("shop.place_order", {"sku": "A"}).succeeded({"ok": True})

    assert run.begin("shop.place_order", {"sku": "A"}).index == 1


def test_a_forward_approval_request_is_reused_while_it_is_pending(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    fn = Tool()
    with pytest.raises(ApprovalRequired) as one:
        run.call("payments.wire", {"amount": 5}, fn)
    with pytest.raises(ApprovalRequired) as two:
        run.call("payments.wire", {"amount": 5}, fn)
    with pytest.raises(ApprovalRequired) as other:
        run.call("payments.wire", {"amount": 6}, fn)

    assert fn.calls == []
    assert one.value.approval_id == two.value.approval_id != other.value.approval_id
    assert one.value.message == f"approval required: {one.value.approval_id}"
    assert len(ledger.approvals()) == 2
    types = [e.type for e in run.events()]
    assert types.count("approval_requested") == 2 and types.count("refused") == 3
    assert "intended" not in types


def test_an_approval_is_used_up_by_the_one_call_it_let_through(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    with pytest.raises(ApprovalRequired) as asked:
        run.begin("payments.wire", {"amount": 5})
    ledger.approve(asked.value.approval_id, by="dana")
    fn = Tool()

    run.call("payments.wire", {"amount": 5}, fn)
    with pytest.raises(ApprovalRequired) as again:
        run.call("payments.wire", {"amount": 5}, fn)

    assert fn.calls == [{"amount": 5}]
    assert again.value.approval_id != asked.value.approval_id, "a new request, not the used one"
    [intended] = [e for e in run.events() if e.type == "intended"]
    assert intended.data["approval_id"] == asked.value.approval_id


def test_an_approval_of_one_run_does_not_let_another_run_through(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    with pytest.raises(ApprovalRequired) as asked:
        run.begin("payments.wire", {"amount": 5})
    ledger.approve(asked.value.approval_id)

    with pytest.raises(ApprovalRequired):
        ledger.start_run().begin("payments.wire", {"amount": 5})


def test_a_denied_call_is_refused_until_the_denial_is_reversed(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    with pytest.raises(ApprovalRequired) as asked:
        run.begin("payments.wire", {"amount": 5})
    ledger.deny(asked.value.approval_id, note="over the limit", by="dana")

    assert_refused(run, ApprovalDenied, "payments.wire", {"amount": 5}, "approval denied: over the limit")
    assert_refused(run, ApprovalDenied, "payments.wire", {"amount": 5}, "approval denied: over the limit")
    ledger.approve(asked.value.approval_id, by="lee")
    fn = Tool()
    run.call("payments.wire", {"amount": 5}, fn)

    assert fn.calls == [{"amount": 5}]


def test_a_halt_is_checked_before_an_approval_is_requested(ledger: reversi.Ledger) -> None:
    halt = ledger.add_halt("frozen")
    run = ledger.start_run()

    assert_refused(run, Halted, "payments.wire", {"amount": 5},
                   f"kill switch: frozen (halt {halt.halt_id} stops every new call)")
    assert ledger.approvals() == []


@pytest.mark.parametrize("depends_on", [[0], [1], [5], [0, 3]])
def test_depending_on_a_step_that_is_not_earlier_is_bad_input_and_journals_nothing(
    ledger: reversi.Ledger, depends_on: list[int]
) -> None:
    run = ledger.start_run()
    if depends_on != [0]:
        run.call("crm.upsert_contact", {"n": 0}, Tool())
    before = journal(run)

    with pytest.raises(BadInput, match="depends_on"):
        run.begin("github.create_repo", {"name": "x"}, depends_on=depends_on)

    assert journal(run) == before
    assert run.begin("github.create_repo", {"name": "x"}).index == len(run.steps()) - 1


@pytest.mark.parametrize("depends_on", [[-1], [True], ["0"], "0", [0.5]])
def test_depends_on_must_be_step_numbers(ledger: reversi.Ledger, depends_on: Any) -> None:
    run = ledger.start_run()
    run.call("crm.upsert_contact", {"n": 0}, Tool())
    before = journal(run)

    with pytest.raises(BadInput):
        run.begin("github.create_repo", {"name": "x"}, depends_on=depends_on)

    assert journal(run) == before


def test_depends_on_is_journaled_sorted_and_without_repeats(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    for i in range(3):
        run.call("crm.upsert_contact", {"n": i}, Tool())

    index = run.begin("github.create_repo", {"name": "x"}, depends_on=[2, 0, 2]).index

    assert run.steps()[index].record.depends_on == (0, 2)


@pytest.mark.parametrize("args", [{"when": object()}, {"x": float("nan")}, {"s": {1, 2}}, {"inf": float("inf")}])
def test_arguments_that_are_not_json_are_bad_input_and_journal_nothing(ledger: reversi.Ledger, args: Any) -> None:
    run = ledger.start_run()
    before = journal(run)
    fn = Tool()

    with pytest.raises(BadInput, match="JSON"):
        run.call("github.create_repo", args, fn)

    assert fn.calls == [] and journal(run) == before


@pytest.mark.parametrize("args", ["notadict", ["a", "b"], 7])
def test_arguments_that_are_not_named_are_refused_as_over_http(ledger: reversi.Ledger, args: Any) -> None:
    run = ledger.start_run()
    before = journal(run)

    with pytest.raises(BadInput, match=f"args must be an object of named arguments, not {type(args).__name__}"):
        run.begin("x.y", args)
    with pytest.raises(BadInput, match="named arguments"):
        run.call("x.y", args, Tool())

    assert journal(run) == before


def nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("levels", [201, 20_000])
def test_arguments_nested_too_deep_are_one_line_bad_input_and_journal_nothing(
    ledger: reversi.Ledger, levels: int
) -> None:
    run = ledger.start_run()
    before = journal(run)
    fn = Tool()

    with pytest.raises(BadInput) as refused:
        run.call("github.create_repo", {"k": nested(levels)}, fn)

    assert refused.value.message == "arguments: JSON nested deeper than 200 levels"
    assert fn.calls == [] and journal(run) == before


def test_arguments_nested_as_deep_as_allowed_are_recorded(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.call("github.create_repo", {"k": nested(199)}, Tool())
    assert len(run.steps()) == 1


@pytest.mark.parametrize("tool", ["", None, 7])
def test_a_tool_name_must_be_a_non_empty_string(ledger: reversi.Ledger, tool: Any) -> None:
    run = ledger.start_run()
    before = journal(run)

    with pytest.raises(BadInput):
        run.begin(tool, {})

    assert journal(run) == before


@pytest.mark.parametrize("first", ["succeeded", "failed"])
@pytest.mark.parametrize("second", ["succeeded", "failed", "uncertain"])
def test_an_outcome_reported_twice_is_a_conflict(ledger: reversi.Ledger, first: str, second: str) -> None:
    run = ledger.start_run()
    handle = run.begin("github.create_repo", {"name": "x"})
    getattr(handle, first)({"full_name": "a/x"} if first == "succeeded" else "oops")
    before = journal(run)

    with pytest.raises(Conflict, match="already has an outcome"):
        getattr(handle, second)({"full_name": "a/y"} if second == "succeeded" else "oops")

    assert journal(run) == before
    assert run.steps()[0].status.value == first


@pytest.mark.parametrize("second", ["succeeded", "failed", "uncertain"])
def test_a_step_reported_uncertain_takes_no_second_outcome(ledger: reversi.Ledger, second: str) -> None:
    """`uncertain` is an outcome (§8: succeeded, failed or uncertain); settling it is `resolve`'s job,
    which requires a note and journals who settled it."""
    run = ledger.start_run()
    handle = run.begin("github.create_repo", {"name": "x"})
    handle.uncertain("timed out after 30 s")
    before = journal(run)

    with pytest.raises(Conflict, match="already has an outcome"):
        getattr(handle, second)({"full_name": "a/y"} if second == "succeeded" else "oops")

    assert journal(run) == before
    assert run.steps()[0].status.value == "uncertain"


def test_an_outcome_for_a_step_that_does_not_exist_is_not_found(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()

    with pytest.raises(NotFound):
        reversi.StepHandle(run, 3).succeeded({})

    assert journal(run) == [("run_opened", None)]


def test_continuing_another_principals_run_is_forbidden_and_journals_nothing(db_url: str, manifest: Path) -> None:
    with reversi.open(db_url, manifests=[str(manifest)], principal="alice") as alice:
        run = alice.start_run(run_id="run_alices", actor="billing-agent")
        run.call("github.create_repo", {"name": "x"}, Tool({"full_name": "a/x"}))
        before = journal(run)

    with reversi.open(db_url, manifests=[str(manifest)], principal="bob") as bob:
        with pytest.raises(Forbidden, match="belongs to another principal"):
            bob.start_run(run_id="run_alices")
        with pytest.raises(Forbidden, match="belongs to another principal"):
            bob.continue_run("run_alices")
        with pytest.raises(NotFound):
            bob.continue_run("run_nobodys")
        assert journal(bob.get_run("run_alices")) == before, "an operator may still read it"

    with reversi.open(db_url, manifests=[str(manifest)], principal="alice") as again:
        assert again.continue_run("run_alices").begin("github.create_repo", {"name": "y"}).index == 1


def test_the_principal_can_come_from_the_environment(
    db_url: str, manifest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVERSI_PRINCIPAL", "carol")
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        assert run.principal == "carol"
        assert run.events()[0].data["principal"] == "carol"


def test_a_call_that_raises_is_journaled_failed_or_uncertain_and_reraised(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()

    def boom(**_: Any) -> Any:
        raise ValueError("card declined")

    def slow(**_: Any) -> Any:
        raise TimeoutError

    def broken(**_: Any) -> Any:
        raise ConnectionResetError("peer went away")

    for fn, error in [(boom, ValueError), (slow, TimeoutError), (broken, ConnectionResetError)]:
        with pytest.raises(error):
            run.call("github.create_repo", {"name": fn.__name__}, fn)

    steps = run.steps()
    assert [s.status.value for s in steps] == ["failed", "uncertain", "uncertain"]
    assert [s.error for s in steps] == ["card declined", "TimeoutError", "peer went away"]


def test_text_that_is_not_valid_unicode_is_refused_as_input_and_kept_as_a_record(ledger: reversi.Ledger) -> None:
    """A lone surrogate has no UTF-8 form. In what a caller hands in it is bad input (nothing is
    written); in what a call answered, which must be journaled, it becomes U+FFFD."""
    run = ledger.start_run()
    with pytest.raises(BadInput, match="not valid Unicode"):
        run.call("github.create_repo", {"name": "\ud800"}, Tool())
    with pytest.raises(BadInput, match="not valid Unicode"):
        run.call("github.\udfff", {}, Tool())
    assert list(run.steps()) == []

    def odd(**_: Any) -> Any:
        raise ValueError("bad byte \udcff")

    run.call("github.create_repo", {"name": "a"}, Tool({"id": "r\ud83d", "ok": "😀"}))
    with pytest.raises(ValueError):
        run.call("github.create_repo", {"name": "b"}, odd)
    steps = run.steps()
    assert [s.status.value for s in steps] == ["succeeded", "failed"]
    assert steps[0].result == {"id": "r\ufffd", "ok": "😀"}
    assert steps[1].error == "bad byte \ufffd"


def test_whatever_a_call_returned_is_journaled_as_its_success(ledger: reversi.Ledger) -> None:
    """The call ran and answered: an answer JSON cannot hold as it is must not turn the step `failed`.
    A float JSON has no number for keeps its name; an answer that contains itself keeps its repr."""
    run = ledger.start_run()
    looped: dict[str, Any] = {"id": "r_1"}
    looped["self"] = looped

    assert run.call("github.create_repo", {"name": "a"}, Tool(looped)) is looped
    run.call("github.create_repo", {"name": "b"}, Tool({"id": "r_2", "score": float("nan"), "max": float("-inf")}))

    steps = run.steps()
    assert [s.status.value for s in steps] == ["succeeded", "succeeded"]
    assert steps[0].result == "{'id': 'r_1', 'self': {...}}"
    assert steps[1].result == {"id": "r_2", "score": "NaN", "max": "-Infinity"}


def test_a_call_whose_outcome_cannot_be_journaled_is_left_unresolved_not_failed(tmp_path: Path) -> None:
    """The call worked; the journal could not say so (another process held the store past the
    timeout). Writing `failed` then would make the plan skip an effect that stands in the world."""
    db = tmp_path / "ledger.db"
    with reversi.open(f"sqlite:///{db}") as ledger:
        run = ledger.start_run()

        def charge() -> dict[str, str]:
            holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
            holder.execute("BEGIN IMMEDIATE")  # held while the outcome waits, and past its timeout
            threading.Timer(11.0, holder.rollback).start()
            return {"id": "ch_1"}

        with pytest.raises(StoreUnavailable):
            run.call("stripe.create_charge", {}, charge)
        [step] = run.steps()
        assert step.status.value == "intended" and [e.type for e in run.events()] == ["run_opened", "intended"]
        assert run.plan().actions[0].kind.value == "unresolved"


def test_an_outcome_reported_meanwhile_by_someone_else_is_not_overwritten(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()

    def settled_elsewhere() -> dict[str, str]:
        run.resolve(0, "failed", note="the operator saw it fail")
        return {"id": "ch_1"}

    with pytest.raises(Conflict):
        run.call("stripe.create_charge", {}, settled_elsewhere)
    assert [e.type for e in run.events() if e.step == 0] == ["intended", "resolved"]


def test_sdk_inputs_that_are_not_what_they_should_be_are_bad_input(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    before = journal(run)
    for bad in (
        lambda: run.call("x.y", [1], Tool()),
        lambda: run.begin("x.k", {1: "one", "1": "uno"}),
        lambda: run.begin("x\x00y", {}),
        lambda: run.resolve(True, "failed", note="n"),
        lambda: run.begin_compensation("0"),  # type: ignore[arg-type]
        lambda: run.begin_compensation(None),  # type: ignore[arg-type]
        lambda: run.begin_compensation(0, lease_s=float("nan")),
        lambda: run.begin_compensation(0, lease_s=float("inf")),
    ):
        with pytest.raises(BadInput):
            bad()
    assert journal(run) == before


def test_any_callable_may_be_async_even_from_sync_code(ledger: reversi.Ledger) -> None:
    """run.call awaits an async fn (in a thread of its own when a loop already runs here), and
    reconcile an async probe: a coroutine is never journaled as if it were the result."""
    run = ledger.start_run()

    async def charge(amount: int) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"id": f"ch_{amount}"}

    assert run.call("stripe.create_charge", {"amount": 1}, charge) == {"id": "ch_1"}

    async def from_a_coroutine() -> Any:  # sync API called inside a running loop
        return run.call("stripe.create_charge", {"amount": 2}, charge)

    assert asyncio.run(from_a_coroutine()) == {"id": "ch_2"}
    assert asyncio.run(run.acall("stripe.create_charge", {"amount": 3}, charge)) == {"id": "ch_3"}
    with pytest.raises(TimeoutError), run.step("stripe.create_charge", {"amount": 4}):
        raise TimeoutError

    async def probe(state: Any) -> reversi.Outcome:
        return reversi.Outcome(status="succeeded", result={"id": "ch_4"}, note="found it")

    assert run.reconcile(probe) == [3]
    assert [(s.status.value, s.result) for s in run.steps()] == [
        ("succeeded", {"id": "ch_1"}),
        ("succeeded", {"id": "ch_2"}),
        ("succeeded", {"id": "ch_3"}),
        ("succeeded", {"id": "ch_4"}),
    ]


def test_an_exception_after_the_outcome_was_reported_is_the_callers_own(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()

    def report_then_fail() -> None:
        with run.step("stripe.create_charge", {"amount": 1}) as step:
            step.succeeded({"id": "ch_1"})
            raise RuntimeError("a later bug")

    with pytest.raises(RuntimeError, match="a later bug"):
        report_then_fail()
    assert [(s.status.value, s.result) for s in run.steps()] == [("succeeded", {"id": "ch_1"})]
