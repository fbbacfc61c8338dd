"""`reversi demo`: the run it makes through the gateway, what it prints, and the shop it changes and puts back."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import reversi
from reversi.demo import run_demo
from reversi.demo.shop import PRICES
from reversi.engine.manifest_files import check_manifest_files

SETTINGS_FROM_ENV = ("REVERSI_DB", "REVERSI_CONFIG", "REVERSI_KILL_FILE", "REVERSI_MANIFEST", "REVERSI_ACTOR")
INVOICE = Path("demo-shop/files/invoices/INV-2041.txt")


@dataclass
class DemoRun:
    workdir: Path
    code: int = -1
    lines: list[str] = field(default_factory=list)
    invoice_seen: bool = False

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def run_id(self) -> str:
        return self.text.split("  run:     ")[1].split()[0]

    def section(self, number: int) -> str:
        return self.text.split(f"\n{number}. ")[1].split(f"\n{number + 1}. ")[0].split("\nExplore it")[0]

    def echo(self, line: str) -> None:
        self.lines.append(line)
        self.invoice_seen = self.invoice_seen or (self.workdir / INVOICE).is_file()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    workdir = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as mp:
        for name in SETTINGS_FROM_ENV:
            mp.delenv(name, raising=False)
        mp.chdir(workdir)
        yield workdir


@pytest.fixture(scope="module")
def demo(folder: Path) -> DemoRun:
    done = DemoRun(folder)
    done.code = run_demo(folder, done.echo)
    return done


def ledger_of(workdir: Path) -> reversi.Ledger:
    return reversi.open("sqlite:///" + str(workdir / ".reversi" / "reversi.db"))


def rows_of(workdir: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(workdir / "demo-shop" / "shop.db") as conn:
        found = {t: conn.execute(f"SELECT * FROM {t} ORDER BY id").fetchall() for t in ("orders", "payments")}
    conn.close()
    return found


def test_the_demo_runs_as_designed_in_a_fresh_folder(demo: DemoRun) -> None:
    assert demo.code == 0, demo.text
    assert "The demo did not go as designed" not in demo.text


def test_the_gateway_journals_every_call_the_refusal_the_timeout_and_the_resolve(demo: DemoRun) -> None:
    with ledger_of(demo.workdir) as ledger:
        run = ledger.get_run(demo.run_id)
        assert (run.actor, run.tenant, run.environment) == ("billing-agent", "acme", "demo")
        assert [s.tool for s in run.steps()] == [
            "fs.write_file", "fs.write_file", "stripe.create_charge", "sql.insert", "sql.update",
            "slack.post_message", "http.send_email", "stripe.create_charge",
        ]
        events = run.events()
        assert ledger.halts() == []
    types = [e.type for e in events]
    assert [(e.step, e.type) for e in events if e.type in ("uncertain", "resolved")] == [(7, "uncertain"),
                                                                                         (7, "resolved")]
    (settled,) = [e for e in events if e.type == "resolved"]  # by its probe, from what Stripe says
    assert settled.actor == "probe" and settled.data["probe"] == "stripe.charge_of_call"
    assert types.count("refused") == 1
    assert types.count("compensated") == types.count("verified") == 7


def test_the_halt_refuses_a_call_before_it_reaches_stripe(demo: DemoRun) -> None:
    work = demo.section(1)
    assert """  dana: reversi halt add "checking acme's charges for duplicates" --tool 'stripe.*'""" in work
    assert "  refused  stripe.create_charge  " in work
    assert "  dana: reversi halt lift halt_" in work
    assert "  step 7  stripe.create_charge no answer in time (" in work


def test_the_plan_shows_the_unresolved_charge_and_the_email_that_cannot_be_undone(demo: DemoRun) -> None:
    plan_before = demo.section(2)
    window = r"^  step 2  stripe\.create_charge  compensate -> stripe\.refund  \(undo window closes \S+, in 29d"
    assert re.search(window, plan_before, re.M), plan_before  # the shop's 30-day refund policy
    assert "  step 7  succeeded  (stripe.charge_of_call answered that it took effect)" in demo.section(3)
    assert "  step 7  stripe.create_charge  unresolved  outcome unknown: reconcile with the downstream system" in (
        plan_before
    )
    assert "  step 6  http.send_email  unrecoverable  cannot be undone" in plan_before
    assert "  step 0  fs.write_file  compensate -> fs.restore" in plan_before
    assert "  step 7  stripe.create_charge  compensate -> stripe.refund" in demo.section(3)


def test_the_report_ends_incomplete_because_of_the_email(demo: DemoRun) -> None:
    report = demo.section(4)
    assert "  step 7  stripe.create_charge  compensated -> stripe.refund (1 attempt), verified" in report
    assert "  step 6  http.send_email  unrecoverable  cannot be undone" in report
    assert "  step 4  sql.update  compensated -> sql.restore_rows (1 attempt), verified" in report
    assert "  step 1  fs.write_file  compensated -> fs.restore (1 attempt), verified" in report
    assert re.search(r"^  step 6  follow-up opened  fu_\w+  Send a correction to ap@acme.example about "
                     r"'Receipt for INV-2041'$", report, re.M), report  # what a person does about the email
    assert "  rollback INCOMPLETE" in report


def test_the_files_and_rows_are_back_as_before(demo: DemoRun) -> None:
    files = demo.workdir / "demo-shop" / "files"
    assert demo.invoice_seen
    # as before the agent, but for the run the demo leaves for the reader: a new invoice, order 2042 paid
    assert sorted(p.relative_to(files).as_posix() for p in files.rglob("*")) == [
        "invoices", "invoices/INV-2042.txt", "prices.csv"]
    assert (files / "prices.csv").read_text() == PRICES
    assert rows_of(demo.workdir) == {"orders": [(2041, "acme", 4900, "open"), (2042, "acme", 1900, "paid")],
                                     "payments": []}


def test_the_diff_after_the_rollback_is_only_what_cannot_be_undone(demo: DemoRun) -> None:
    diff = [line for line in demo.section(5).splitlines() if line.startswith("  ")]
    assert diff == [
        "  + stripe charge ch_000001 $49.00 INV-2041 Pro plan: refunded",
        "  + stripe charge ch_000002 $19.00 INV-2042 extra seat: refunded",
        "  + email msg_0001 to ap@acme.example: Receipt for INV-2041",
    ]
    assert "  - row orders id=2041 customer=acme total=4900 status=open" in demo.section(1)


def test_the_manifest_is_written_and_checks_clean(demo: DemoRun) -> None:
    manifest = demo.workdir / ".reversi" / "demo" / "tools.yaml"
    assert check_manifest_files([manifest]) == []
    assert "http.send_email:\n    irreversible: true" in manifest.read_text()
    assert f"  reversi plan {demo.run_id} -m .reversi/demo/tools.yaml" in demo.text


def test_the_run_left_for_the_reader_rolls_back_with_the_connectors_as_the_console_does(demo: DemoRun) -> None:
    """`make demo` serves the console with the connectors as compensator and reader, set to the demo's
    shop: the same command undoes the reader's run, and the shop is as the first rollback left it."""
    yours = demo.text.split("  yours:   ")[1].split()[0]
    work = demo.workdir
    with ledger_of(work) as ledger:
        assert [s.status.value for s in ledger.get_run(yours).steps()] == ["succeeded", "succeeded"]
    bin_dir = Path(sys.executable).parent
    env = {**{k: v for k, v in os.environ.items() if k not in SETTINGS_FROM_ENV},
           "REVERSI_FS_ROOT": str(work / "demo-shop" / "files"),
           "REVERSI_SQL_URL": f"sqlite:///{work / 'demo-shop' / 'shop.db'}",
           "REVERSI_CONNECTOR_DIR": str(work / ".reversi" / "connectors")}
    done = subprocess.run([str(bin_dir / "reversi"), "rollback", yours, "-m", ".reversi/demo/tools.yaml",
                           "--compensator-cmd", f"{bin_dir / 'reversi-connectors'} compensate",
                           "--reader-cmd", f"{bin_dir / 'reversi-connectors'} read", "--json"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["compensated"] == [1, 0]
    files = work / "demo-shop" / "files"
    assert sorted(p.relative_to(files).as_posix() for p in files.rglob("*")) == ["invoices", "prices.csv"]
    assert rows_of(work)["orders"] == [(2041, "acme", 4900, "open"), (2042, "acme", 1900, "open")]


def test_the_cli_demo_runs_again_on_a_fresh_shop_and_the_commands_it_suggests_work(folder: Path,
                                                                                   demo: DemoRun) -> None:
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_FROM_ENV}

    def reversi_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(Path(sys.executable).parent / "reversi"), *args], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=180, check=False)

    again = reversi_cli("demo")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "rollback INCOMPLETE" in again.stdout
    run_id = again.stdout.split("  run:     ")[1].split()[0]
    assert run_id != demo.run_id
    assert "  + stripe charge ch_000001 $49.00 INV-2041 Pro plan: refunded" in again.stdout  # a fresh fake, too
    with ledger_of(folder) as ledger:
        assert {s.run.run_id for s in ledger.list_runs()} == {demo.run_id, f"{demo.run_id}_yours", run_id,
                                                              f"{run_id}_yours"}
    plan = reversi_cli("plan", run_id, "-m", ".reversi/demo/tools.yaml")
    assert plan.returncode == 2
    assert "step 0  fs.write_file  skip  already compensated" in plan.stdout
    assert reversi_cli("show", run_id).returncode == 0
    exported = reversi_cli("export", "--run", run_id)
    assert exported.returncode == 0
    assert json.loads(exported.stdout.splitlines()[0])["type"] == "run_opened"


def test_a_demo_the_kill_switch_stops_says_why_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SETTINGS_FROM_ENV:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "kill").write_text("incident 7\n")
    monkeypatch.setenv("REVERSI_KILL_FILE", str(tmp_path / "kill"))
    monkeypatch.chdir(tmp_path)
    stopped = DemoRun(tmp_path)
    stopped.code = run_demo(tmp_path, stopped.echo)
    assert stopped.code == 1
    assert stopped.lines[-1] == ("The demo did not go as designed: fs.write_file failed: kill switch: incident 7"
                                 " (the gateways' log: .reversi/demo/gateway.log)")
