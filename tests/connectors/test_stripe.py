"""The stripe connector against a fake of Stripe's API, rolled back by the real CLI."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from tests.connectors.conftest import CONNECTORS, Done, compensation_calls, connectors_cli
from tests.connectors.fake_server import URL, served_with
from tests.connectors.forged import assert_refused, forgeries
from tests.server.conftest import ServerProcess, wait_for

import reversi
from reversi.connectors import ChangedSince, DownstreamError, stripe
from reversi.demo.fakes.stripe import KEY, FakeStripe
from reversi.engine.keys import create_key

MANIFEST = stripe.CONNECTOR.manifest_path()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeStripe]:
    with served_with(FakeStripe(), monkeypatch, STRIPE_API_BASE=URL, STRIPE_API_KEY=KEY) as fake:
        yield fake


def _agent_run(ledger: reversi.Ledger) -> str:
    run = ledger.start_run(actor="billing-agent")
    customer = run.call("stripe.create_customer", {"email": "ada@example.com", "metadata": {"crm": "7"}},
                        stripe.create_customer)
    run.call("stripe.create_charge", {"amount": 700, "currency": "eur", "customer": customer["id"]},
             stripe.create_charge)
    run.call("stripe.create_payment_intent", {"amount": 300, "currency": "eur", "payment_method_types": ["card"]},
             stripe.create_payment_intent)
    return run.id


def test_a_rollback_through_the_cli_refunds_deletes_and_cancels_what_the_run_made(
    db_url: str, fake: FakeStripe, rollback: Callable[..., Done]
) -> None:
    earlier = stripe.create_charge(amount=100, currency="eur")  # before the run: it must stay charged
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run_id = _agent_run(ledger)

    done = rollback(run_id, MANIFEST)

    assert done.code == 0, done.err + done.out
    assert done.json()["compensated"] == [2, 1, 0]
    charge = next(c for c in fake.charges.values() if c["amount"] == 700)
    assert charge["refunded"] is True and charge["amount_refunded"] == 700
    assert fake.charges[earlier["id"]]["refunded"] is False
    assert all(c.get("deleted") for c in fake.customers.values())
    assert [i["status"] for i in fake.intents.values()] == ["canceled"]
    assert sorted(fake.effects.values()) == [1, 1, 1]  # a refund and a cancel by their keys, a customer deleted


def test_a_charge_refunded_by_someone_else_fails_honestly_and_stays_standing(
    db_url: str, fake: FakeStripe, rollback: Callable[..., Done], plan: Callable[[str, Path], Done]
) -> None:
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run = ledger.start_run()
        charge = run.call("stripe.create_charge", {"amount": 500, "currency": "usd"}, stripe.create_charge)
    fake.refund_now(charge["id"])  # an operator refunded it in the dashboard

    done = rollback(run.id, MANIFEST)

    assert done.code == 2
    [failed] = done.json()["failed"]
    assert failed["error"] == (f"changed since step 0: charge {charge['id']} was refunded by someone else: Stripe"
                               f" POST /v1/refunds: HTTP 400: Charge {charge['id']} has already been refunded."
                               " (charge_already_refunded)")
    assert len(fake.refunds) == 1
    assert [a["kind"] for a in plan(run.id, MANIFEST).json()["actions"]] == ["compensate"]


def test_each_compensation_repeated_with_its_key_does_nothing_twice(
    db_url: str, fake: FakeStripe, plan: Callable[[str, Path], Done]
) -> None:
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run_id = _agent_run(ledger)
    for call in compensation_calls(plan(run_id, MANIFEST).json()):
        first = connectors_cli("compensate", stdin=json.dumps(call))
        again = connectors_cli("compensate", stdin=json.dumps({**call, "attempt": 2}))
        assert first.code == again.code == 0, first.err + again.err
        assert json.loads(again.out) == json.loads(first.out)
    assert len(fake.refunds) == 1
    assert [n for effect, n in fake.effects.items() if effect.startswith(("/v1/refunds", "delete"))] == [1, 1]


def test_a_rate_limit_and_a_server_error_are_failures_the_retries_take_over(
    db_url: str, fake: FakeStripe, rollback: Callable[..., Done]
) -> None:
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run = ledger.start_run()
        run.call("stripe.create_charge", {"amount": 900, "currency": "usd"}, stripe.create_charge)
    limited = {"error": {"type": "invalid_request_error", "code": "rate_limit", "message": "Too many requests."}}
    fake.fail_next("POST /v1/refunds", 429, limited, times=1, **{"Retry-After": "1"})

    done = rollback(run.id, MANIFEST)

    [failed] = done.json()["failed"]
    assert failed["error"] == ("Stripe POST /v1/refunds: HTTP 429 (rate limited, retry after 1 s): Too many requests."
                               " (rate_limit)")
    fake.fail_next("POST /v1/refunds", 503, {"error": {"type": "api_error", "message": "Stripe is down."}})
    done = rollback(run.id, MANIFEST, "--retries", "2", "--retry-base-ms", "10")
    assert done.code == 0 and done.json()["compensated"] == [0], done.out
    assert len(fake.refunds) == 1


def test_the_same_key_with_other_parameters_is_stripes_idempotency_error(fake: FakeStripe) -> None:
    charge, other = stripe.create_charge(amount=800, currency="usd"), stripe.create_charge(amount=200, currency="usd")
    stripe.refund(charge, idempotency_key="k1")
    with pytest.raises(DownstreamError, match=r"HTTP 400: Keys for idempotent requests .* \(idempotency_error\)$"):
        stripe.refund(other, idempotency_key="k1")
    assert fake.charges[charge["id"]]["amount_refunded"] == 800 and fake.charges[other["id"]]["amount_refunded"] == 0


def test_a_payment_intent_that_succeeded_since_is_not_canceled(fake: FakeStripe) -> None:
    intent = stripe.create_payment_intent(amount=100, currency="usd")
    fake.intents[intent["id"]]["status"] = "succeeded"
    with pytest.raises(ChangedSince, match="refund its charge instead"):
        stripe.cancel_payment_intent(intent, step=5)


def test_a_missing_key_and_a_wrong_key_are_named(fake: FakeStripe, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRIPE_API_KEY", "sk_test_wrong")
    with pytest.raises(DownstreamError, match=r"HTTP 401: Invalid API Key provided: \*\*\*\*"):
        stripe.get_charge("ch_1")
    monkeypatch.delenv("STRIPE_API_KEY")
    done = connectors_cli("read", stdin=json.dumps({"tool": "stripe.get_charge", "arguments": {"id": "ch_1"}}))
    assert (done.code, done.err) == (1, "STRIPE_API_KEY is not set: Stripe needs it\n")
    done = connectors_cli("read", stdin=json.dumps({"tool": "stripe.get_charge", "arguments": {"id": "../x"}}))
    assert (done.code, done.err) == (1, "bad argument id: '../x' is not a Stripe id\n")


def test_a_charge_partly_refunded_by_someone_else_is_changed_since(fake: FakeStripe) -> None:
    charge = stripe.create_charge(amount=800, currency="usd")
    fake.refund_now(charge["id"], 300)
    with pytest.raises(ChangedSince, match=r"^changed since step 1: charge .* \(amount_too_large\)$"):
        stripe.refund(charge, step=1, idempotency_key="k")
    assert fake.charges[charge["id"]]["amount_refunded"] == 300


def test_forged_results_make_no_compensation_refund_delete_or_cancel_anything(fake: FakeStripe) -> None:
    victim_charge = stripe.create_charge(amount=9900, currency="eur", customer="cus_someone_else")
    victim_customer = stripe.create_customer(email="someone@else.example")
    victim_intent = stripe.create_payment_intent(amount=9900, currency="eur")
    charge, customer = stripe.create_charge(amount=100, currency="eur"), stripe.create_customer(email="a@b.example")
    intent = stripe.create_payment_intent(amount=100, currency="eur")
    cases = [("stripe.refund", charge, victim_charge, customer), ("stripe.delete_customer", customer, victim_customer,
             charge), ("stripe.cancel_payment_intent", intent, victim_intent, charge)]
    for compensation, genuine, victim, other in cases:
        for name, forged in forgeries(genuine, {"id": victim["id"]}, other).items():
            said = assert_refused(compensation, forged, fake)
            assert victim["id"] not in said, (compensation, name, said)
    assert fake.refunds == {} and not any(c.get("deleted") for c in fake.customers.values())
    assert {i["status"] for i in fake.intents.values()} == {"requires_payment_method"}
    done = connectors_cli("compensate", stdin=json.dumps({"tool": "stripe.refund", "args": {"result": charge}}))
    assert done.code == 0 and fake.charges[charge["id"]]["refunded"] is True, done.err  # the genuine one works


def test_a_servers_rollback_job_refunds_the_agents_sealed_charge_and_not_the_forged_one(
    db_url: str, fake: FakeStripe, tmp_path: Path
) -> None:
    """Over HTTP an agent key reports any result it likes: a sealed result of its own charge is refunded,
    one altered to name another customer's charge is refused by the job's `reversi-connectors compensate`."""
    with reversi.open(db_url) as ledger:
        agent, operator = (create_key(ledger.store, name, name, "acme")[1] for name in ("agent", "operator"))
    victim = stripe.create_charge(amount=50000, currency="eur", customer="cus_another_tenant")
    own = stripe.create_charge(amount=700, currency="eur")  # the agent's call of the connector (gateway or SDK)
    env = {"REVERSI_COMPENSATOR_CMD": f"{CONNECTORS} compensate", "REVERSI_MANIFEST": str(MANIFEST)}
    server = ServerProcess(db_url, env, tmp_path / "server.log")
    try:
        as_agent = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {agent}"}, timeout=30)
        run_id = as_agent.post("/v1/runs", json={}).json()["run_id"]
        for step, result in enumerate([own, {**own, "id": victim["id"], "amount": victim["amount"]}]):
            as_agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge",
                                                              "args": {"amount": 700, "currency": "eur"}})
            reported = as_agent.post(f"/v1/runs/{run_id}/steps/{step}/outcome",
                                     json={"status": "succeeded", "result": result})
            assert reported.status_code == 200, reported.text
        as_operator = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {operator}"}, timeout=30)
        assert as_operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True}).status_code == 202
        job = wait_for(lambda: (j := as_operator.get(f"/v1/runs/{run_id}/rollback").json())["state"] == "done" and j,
                       "the rollback job to finish")
    finally:
        server.signal(15)
    assert job["report"]["compensated"] == [0], job
    [failed] = job["report"]["failed"]
    assert (failed["step"], failed["error"]) == (1, "untrusted result: the result of stripe.create_charge was"
                                                    " changed after it was sealed")
    assert fake.charges[victim["id"]]["refunded"] is False and fake.charges[own["id"]]["refunded"] is True
    assert [r["charge"] for r in fake.refunds.values()] == [own["id"]]


def test_a_charge_an_operator_found_by_hand_is_refunded_once_she_seals_it(fake: FakeStripe) -> None:
    """A timed-out charge settled by hand: the result read from Stripe is not sealed, so the refund
    refuses it until `reversi-connectors seal` (which needs the connector's key) vouches for it."""
    charge = stripe.create_charge(amount=1900, currency="usd")
    found = stripe.get_charge(charge["id"])
    call = {"tool": "stripe.refund", "args": {"result": found, "step": 4}}
    assert connectors_cli("compensate", stdin=json.dumps(call)).err == (
        "untrusted result: the result carries no seal: it is not a result of stripe.create_charge made by this"
        " connector\n")
    vouched = connectors_cli("seal", stdin=json.dumps({"tool": "stripe.create_charge", "result": found,
                                                       "arguments": {"amount": 1900, "currency": "usd"}}))
    assert vouched.code == 0, vouched.err
    done = connectors_cli("compensate", stdin=json.dumps({**call, "args": {"result": vouched.json(), "step": 4}}))
    assert done.code == 0 and fake.charges[charge["id"]]["refunded"] is True, done.err
    for request, error in [
        ({"tool": "stripe.refund", "result": found}, "unknown tool: stripe.refund (it is a compensation tool, not a"
                                                     " forward tool)"),
        ({"tool": "stripe.create_charge", "arguments": {"amount": 1, "currency": "usd"}, "result": "ch_1"},
         "bad argument result: expected the forward call's result as a JSON object"),
        ({"tool": "stripe.create_charge", "result": found}, "bad argument amount: required"),
    ]:
        refused = connectors_cli("seal", stdin=json.dumps(request))
        assert (refused.code, refused.out, refused.err) == (1, "", error + "\n")
