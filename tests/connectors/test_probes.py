"""Probes (issue 30): `reversi reconcile` settles the steps whose outcome is unknown from what the Stripe
fake's Search API says, read through `reversi-connectors read`, on both stores. A charge that went
through is settled `succeeded` with the charge found (and then refunded by the rollback); one that
never did is settled `failed`; one the probe cannot ask about stays unresolved, as the seed demands."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.connectors.conftest import CONNECTORS, READER, reversi_cli
from tests.connectors.fake_server import URL, served_with

import reversi
import reversi.connectors
from reversi.core.manifest_yaml import parse_manifest
from reversi.demo.fakes.stripe import KEY, FakeStripe
from reversi.errors import BadArgument

MANIFEST = """
version: 1
tools:
  stripe.create_charge:
    compensation: {tool: stripe.refund_charge, args: {charge: "$result.id"}}
    probe:
      tool: stripe.search_charges
      args: {query: {$format: "metadata['order']:'{order}'", order: "$args.metadata.order"}}
      took_effect: {data: {$not: []}}
      not_taken: {data: []}
      result: "$result.data[0]"
"""
REFUND = textwrap.dedent("""
    import json, os, sys, httpx
    call = json.load(sys.stdin)
    answer = httpx.post(os.environ["STRIPE_API_BASE"] + "/v1/refunds", data={"charge": call["args"]["charge"]},
                        headers={"Authorization": "Bearer " + os.environ["STRIPE_API_KEY"],
                                 "Idempotency-Key": call["idempotency_key"]})
    answer.raise_for_status()
    print(answer.text)
""")


def test_reconcile_settles_unknown_charges_from_what_stripe_says(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(MANIFEST)
    (tmp_path / "refund.py").write_text(REFUND)
    with served_with(FakeStripe(), monkeypatch, STRIPE_API_BASE=URL, STRIPE_API_KEY=KEY) as fake:
        # The charge of order o-1 went through, but its answer was lost: the step is uncertain.
        made = httpx.post(f"{fake_url()}/v1/charges", data={"amount": "700", "currency": "eur",
                                                              "metadata[order]": "o-1"},
                          headers={"Authorization": f"Bearer {KEY}"}).json()
        with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
            run = ledger.start_run()
            for order in ("o-1", "o-2"):
                run.begin("stripe.create_charge", {"amount": 700, "currency": "eur",
                                                   "metadata": {"order": order}}).uncertain("timed out")
            run.begin("stripe.create_charge", {"amount": 5, "currency": "eur"})  # no order: nothing to ask
        code, out, err = _cli(db_url, tmp_path, "reconcile", str(run.id), "--reader-cmd", READER, "--json")
        assert code == 2, err  # one step stays unresolved
        said = {s["step"]: s for s in json.loads(out)["steps"]}
        assert (said[0]["outcome"], said[1]["outcome"], said[2]["outcome"]) == ("succeeded", "failed", "unresolved")
        assert said[2]["why"] == "its probe's $args.metadata.order names nothing"

        with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
            run = ledger.get_run(str(run.id))
            steps = run.steps()
            assert steps[0].result == made and steps[0].settled_by == "probe"
            resolved = next(e.data for e in run.events() if e.type == "resolved" and e.step == 0)
            assert (resolved["probe"], resolved["arguments"]) == ("stripe.search_charges",
                                                                  {"query": "metadata['order']:'o-1'"})
            assert resolved["answer"]["data"][0]["id"] == made["id"]
            assert steps[2].status.value == "intended"
        code, out, err = _cli(db_url, tmp_path, "rollback", str(run.id), "--compensator-cmd",
                              f"{sys.executable} {tmp_path / 'refund.py'}", "--json")
        report = json.loads(out)
        assert report["compensated"] == [0] and report["unresolved"] == [2], err
        assert fake.charges[made["id"]]["refunded"] is True
        # settled steps are not asked again; the one the probe cannot ask about stays as it was
        code, out, _ = _cli(db_url, tmp_path, "reconcile", str(run.id), "--reader-cmd", READER, "--json")
        assert [s["step"] for s in json.loads(out)["steps"]] == [2]


def fake_url() -> str:
    return os.environ["STRIPE_API_BASE"]


def _cli(db_url: str, here: Path, *args: str) -> tuple[int, str, str]:
    done = reversi_cli("--db", db_url, *args, "-m", str(here / "tools.yaml"))
    return done.code, done.out, done.err


@pytest.mark.parametrize(("probe", "said"), [
    ("{tool: read}", 'give took_effect, not_taken or both'),
    ("{tool: read, args: {id: \"$result.id\"}, not_taken: {}}", "$result"),
    ("{args: {}, not_taken: {}}", 'missing "tool"'),
    ("{tool: read, took_effect: [1]}", "expected a mapping"),
    ("{tool: read, not_taken: {}, when: {}}", "when"),
])
def test_each_misuse_of_a_probe_is_said_at_its_line(probe: str, said: str) -> None:
    text = f"version: 1\ntools:\n  t:\n    irreversible: true\n    probe: {probe}\n"
    problems = [str(p) for p in parse_manifest(text, "m.yaml")[1]]
    assert any(said in p and p.startswith("m.yaml:") for p in problems), problems


FS_MANIFEST = """
version: 1
tools:
  fs.write_file:
    probe:
      tool: fs.stat
      args: {path: "$args.path"}
      took_effect: {exists: true, sha256: {$exists: true}}
      not_taken: {exists: false}
    irreversible: "a test of probes only"
"""


@pytest.mark.anyio
async def test_the_gateways_operator_reconciles_by_reading_on_its_upstream(tmp_path: Path, world: Path) -> None:
    from tests.connectors.test_gateway import _gateway, _ok

    (world / "made.txt").write_text("the agent's\n")
    manifest = tmp_path / "fs.yaml"
    manifest.write_text(FS_MANIFEST)
    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run("run_probe")
        run.begin("fs.write_file", {"path": "made.txt", "content": "the agent's\n"}).uncertain("timed out")
        run.begin("fs.write_file", {"path": "never.txt", "content": "x"}).uncertain("timed out")
    common = ["--upstream", f"c={CONNECTORS} serve fs", "--db", db, "-m", str(manifest)]
    async with _gateway("operator", *common) as operator:
        said = _ok(await operator.call_tool("reversi.reconcile", {"run_id": "run_probe"}))
    assert [(s["step"], s["outcome"]) for s in said["steps"]] == [(1, "failed"), (0, "succeeded")]
    with reversi.open(db) as ledger:
        steps = ledger.get_run("run_probe").steps()
    assert steps[0].status.value == "succeeded" and steps[0].result["path"] == "made.txt"
    assert steps[1].status.value == "failed" and steps[0].settled_by == "probe"


def test_a_probe_never_overwrites_what_someone_settled_while_it_read(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        run.begin("stripe.create_charge", {"amount": 1, "metadata": {"order": "o-9"}}).uncertain("timed out")

        def read(tool: str, arguments: object) -> object:  # meanwhile, an operator checks by hand
            run.resolve(0, "failed", note="the dashboard shows no charge", actor="dana")
            return {"data": [{"id": "ch_x"}]}

        [said] = run.reconcile_by_probes(read)
        assert said.outcome == "settled meanwhile" and "it is failed" in said.why
        step = run.steps()[0]
        assert (step.status.value, step.settled_by) == ("failed", "dana")


def test_the_shipped_stripe_probe_finds_the_charge_made_for_the_step_and_its_refund_accepts_it(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connector marks each charge with the step it is made for; `stripe.charge_of_call`, read for a step,
    answers that step's charge sealed for it alone. So a charge whose answer was lost is settled by
    `reversi reconcile` with the shipped manifest, and the connector's own refund undoes it. An agent cannot
    point the probe at another charge: the step is the connector's mark, not an argument."""
    from reversi.connectors import stripe
    from reversi.connectors._seal import key_id
    from reversi.core.calls import making

    with shipped_stripe(tmp_path, monkeypatch) as fake:
        with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
            run = ledger.start_run()
            args: dict[str, Any] = {"amount": 700, "currency": "eur", "metadata": {"order": "o-1"}}
            handle = run.begin("stripe.create_charge", args)
            with making(run.id, handle.index):  # the gateway's connector server makes it for the step
                made = stripe.create_charge(**args)
            handle.uncertain("the answer was lost")
            run.begin("stripe.create_charge", {"amount": 5, "currency": "eur",  # an agent's step: no charge for it
                                               "metadata": {"order": "o-1"}}).uncertain("timed out")
            assert made["metadata"]["reversi_call"] == f"{key_id()}:{run.id}:0"
            forged = {"reversi_call": f"{key_id()}:{run.id}:1"}  # the mark forged, on any object Stripe copies from
            with pytest.raises(BadArgument, match="the connector's own key"):
                stripe.create_charge(5, "eur", metadata=forged)
            with pytest.raises(BadArgument, match="the connector's own key"):
                stripe.create_payment_intent(5, "eur", metadata=forged)
            with pytest.raises(BadArgument, match="the connector's own key"):
                stripe.create_customer(metadata=forged)
            with pytest.raises(BadArgument, match="no step is bound"):
                stripe.charge_of_call()

        code, out, err = _cli(db_url, tmp_path, "reconcile", str(run.id), "--reader-cmd", READER, "--json")
        said = {s["step"]: s["outcome"] for s in json.loads(out)["steps"]}
        assert code == 2 and said == {0: "succeeded", 1: "unresolved"}, (out, err)  # nothing found proves nothing
        with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
            step = ledger.get_run(str(run.id)).steps()[0]
        assert step.settled_by == "probe" and step.result["id"] == made["id"] and "reversi_seal" in step.result

        code, out, err = _cli(db_url, tmp_path, "rollback", str(run.id), "--compensator-cmd",
                              f"{CONNECTORS} compensate", "--reader-cmd", READER, "--json")
        report = json.loads(out)
        assert report["compensated"] == [0] and report["unresolved"] == [1], (out, err)
        assert fake.charges[made["id"]]["refunded"] is True


def test_a_probes_sealed_answer_is_refused_for_any_other_step(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reversi.connectors import stripe
    from reversi.core.calls import making

    with shipped_stripe(tmp_path, monkeypatch) as fake:
        with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
            run = ledger.start_run()
            with making(run.id, 0):
                made = stripe.create_charge(300, "eur")
                found = stripe.charge_of_call()
            assert found["count"] == 1 and found["result"]["id"] == made["id"]
            monkeypatch.setenv("REVERSI_CONNECTOR_KEY", "z" * 40)  # another deployment on the same Stripe account
            with making(run.id, 0):
                assert stripe.charge_of_call() == {"count": 0, "result": None}
            monkeypatch.setenv("REVERSI_CONNECTOR_KEY", "k" * 40)
            run.begin("stripe.create_charge", {"amount": 300, "currency": "eur"}).succeeded({"id": "other"})
            run.begin("stripe.create_charge", {"amount": 1, "currency": "eur"}).succeeded(found["result"])  # step 1
        _, out, _ = _cli(db_url, tmp_path, "rollback", str(run.id), "--compensator-cmd",
                         f"{CONNECTORS} compensate", "--json")
        failed = {f["step"]: f["error"] for f in json.loads(out)["failed"]}
        assert "made by step 0" in failed[1] and fake.charges[made["id"]]["refunded"] is False


@contextmanager
def shipped_stripe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeStripe]:
    """The Stripe fake served, the connector's settings, and its shipped manifest as tmp_path/tools.yaml."""
    (tmp_path / "tools.yaml").write_text(_shipped("stripe"))
    monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(tmp_path / "connectors"))
    monkeypatch.setenv("REVERSI_CONNECTOR_KEY", "k" * 40)
    with served_with(FakeStripe(), monkeypatch, STRIPE_API_BASE=URL, STRIPE_API_KEY=KEY) as fake:
        yield fake


def _shipped(name: str) -> str:
    """A connector's shipped manifest, as `reversi-connectors manifest NAME` prints it."""
    return (Path(reversi.connectors.__file__).parent / "manifests" / f"{name}.yaml").read_text()
