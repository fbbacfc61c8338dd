"""A rollback killed (SIGKILL) right after each compensation took effect, then run again: every undo
is done exactly once downstream, and the world ends as it was before the run."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.connectors.conftest import CONNECTORS, READER, files_under, reversi_cli
from tests.connectors.fake_server import URL, served_with

import reversi
from reversi.connectors import fs, stripe
from reversi.demo.fakes.stripe import KEY, FakeStripe

CRASHER = shlex.join([sys.executable, str(Path(__file__).parent / "crashing_compensator.py"), CONNECTORS])


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeStripe]:
    with served_with(FakeStripe(), monkeypatch, STRIPE_API_BASE=URL, STRIPE_API_KEY=KEY) as found:
        yield found


def _crash_then_rerun(db_url: str, run_id: str, manifests: list[Path], step: int, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    monkeypatch.setenv("CRASH_STEP", str(step))
    monkeypatch.setenv("CRASH_MARKER", str(tmp_path / "crashed"))
    flags = [flag for path in manifests for flag in ("-m", str(path))]
    argv = ["--db", db_url, "rollback", run_id, *flags, "--json", "--compensator-cmd", CRASHER, "--reader-cmd", READER]
    killed = reversi_cli(*argv)
    assert killed.code == -9 and (tmp_path / "crashed").exists(), killed.err
    again = reversi_cli(*argv)
    assert again.code == 0, again.err + again.out
    report: dict[str, object] = again.json()
    return report


@pytest.mark.parametrize("step", [0, 1, 2, 3, 4])
def test_a_rollback_killed_after_any_compensation_undoes_each_step_once_when_run_again(
    db_url: str, fake: FakeStripe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: int
) -> None:
    root = tmp_path / "world"
    root.mkdir()
    (root / "invoice.txt").write_text("draft\n")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(root))
    before = files_under(root)
    manifests = [stripe.CONNECTOR.manifest_path(), fs.CONNECTOR.manifest_path()]
    with reversi.open(db_url, manifests=[str(m) for m in manifests]) as ledger:
        run = ledger.start_run()
        customer = run.call("stripe.create_customer", {"email": "ada@example.com"}, stripe.create_customer)
        run.call("stripe.create_charge", {"amount": 700, "currency": "eur", "customer": customer["id"]},
                 stripe.create_charge)
        run.call("fs.write_file", {"path": "invoice.txt", "content": "paid\n"}, fs.write_file)
        run.call("stripe.create_payment_intent", {"amount": 300, "currency": "eur"}, stripe.create_payment_intent)
        run.call("fs.delete", {"path": "invoice.txt"}, fs.delete)

    report = _crash_then_rerun(db_url, run.id, manifests, step, tmp_path, monkeypatch)

    assert report["complete"] is True
    assert sorted([*report["compensated"], *report["skipped"]]) == [0, 1, 2, 3, 4]  # type: ignore[misc]
    assert step in report["compensated"]  # type: ignore[operator]  # the interrupted one, retried with its key
    assert files_under(root) == before
    assert len(fake.refunds) == 1 and [c["refunded"] for c in fake.charges.values()] == [True]
    assert all(n == 1 for n in fake.effects.values()) and len(fake.effects) == 3, fake.effects
