"""`reversi demo`: the run it journals, the plan and report it prints, and the world it changes and undoes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.demo import run_demo
from reversi.demo.world import World
from reversi.engine.manifest_files import check_manifest_files

SETTINGS_FROM_ENV = ("REVERSI_DB", "REVERSI_CONFIG", "REVERSI_KILL_FILE", "REVERSI_MANIFEST", "REVERSI_ACTOR")
README = Path("demo-output/invoice-bot/README.md")


@dataclass
class DemoRun:
    workdir: Path
    code: int = -1
    lines: list[str] = field(default_factory=list)
    readme_seen: bool = False

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def run_id(self) -> str:
        return self.text.split("  run:     ")[1].split()[0]

    def echo(self, line: str) -> None:
        self.lines.append(line)
        self.readme_seen = self.readme_seen or (self.workdir / README).is_file()


def demo_in(workdir: Path) -> DemoRun:
    demo = DemoRun(workdir)
    demo.code = run_demo(workdir, demo.echo)
    return demo


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
    return demo_in(folder)


def ledger_of(workdir: Path) -> reversi.Ledger:
    return reversi.open("sqlite:///" + str(workdir / ".reversi" / "reversi.db"))


def world_of(workdir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((workdir / ".reversi" / "demo" / "world.json").read_text())
    return data


def run_module(module: str, world: Path, payload: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, str(world)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_demo_runs_as_designed_in_a_fresh_folder(demo: DemoRun) -> None:
    assert demo.code == 0, demo.text
    assert "The demo did not go as designed" not in demo.text


def test_the_journal_holds_the_run_with_its_scope_and_every_outcome(demo: DemoRun) -> None:
    with ledger_of(demo.workdir) as ledger:
        run = ledger.get_run(demo.run_id)
        assert (run.actor, run.tenant) == ("billing-agent", "acme")
        assert [s.tool for s in run.steps()] == [
            "stripe.create_charge",
            "github.create_repo",
            "fs.write_file",
            "email.send",
            "stripe.create_charge",
        ]
        types = [e.type for e in run.events()]
        resolved = [e for e in run.events() if e.type == "resolved"]
    assert "uncertain" in types
    assert types.count("verified") == 2
    assert types.count("compensated") == 4
    assert [(e.step, e.actor) for e in resolved] == [(4, "dana")]


def test_the_plan_shows_the_unresolved_charge_and_the_email_that_cannot_be_undone(demo: DemoRun) -> None:
    plan_before = demo.text.split("\n2. ")[1].split("\n3. ")[0]
    assert "  step 4  stripe.create_charge  unresolved  outcome unknown: reconcile with the downstream system" in (
        plan_before
    )
    assert "  step 3  email.send  unrecoverable  cannot be undone" in plan_before
    assert "  step 2  fs.write_file  compensate -> fs.delete_file" in plan_before
    assert "  NOT fully reversible: see above" in plan_before
    plan_after = demo.text.split("\n3. ")[1].split("\n4. ")[0]
    assert "  step 4  stripe.create_charge  compensate -> stripe.refund" in plan_after


def test_the_report_ends_incomplete_because_of_the_email(demo: DemoRun) -> None:
    report = demo.text.split("\n4. ")[1].split("\n5. ")[0]
    assert "  step 4  stripe.create_charge  compensated -> stripe.refund (1 attempt), verified" in report
    assert "  step 3  email.send  unrecoverable  cannot be undone" in report
    assert "  step 1  github.create_repo  compensated -> github.delete_repo (1 attempt)" in report
    assert "  step 0  stripe.create_charge  compensated -> stripe.refund (1 attempt), verified" in report
    assert "  rollback INCOMPLETE" in report


def test_the_real_file_is_written_then_removed_by_the_rollback(demo: DemoRun) -> None:
    assert demo.readme_seen
    assert not (demo.workdir / README).exists()
    assert not (demo.workdir / README.parent).exists()


def test_the_world_shows_both_charges_refunded_and_the_email_still_sent(demo: DemoRun) -> None:
    world = world_of(demo.workdir)
    assert [c["refunded"] for c in world["charges"].values()] == [True, True]
    assert len(world["refunds"]) == 2
    assert world["repos"]["acme/invoice-bot"]["deleted"] is True
    assert [m["to"] for m in world["outbox"]] == ["ap@acme.example"]


def test_the_manifest_is_copied_out_and_checks_clean(demo: DemoRun) -> None:
    manifest = demo.workdir / ".reversi" / "demo" / "tools.yaml"
    assert check_manifest_files([manifest]) == []
    assert "-m .reversi/demo/tools.yaml" in demo.text


def test_the_next_commands_name_the_run_and_work_from_the_folder(demo: DemoRun) -> None:
    run_id = demo.run_id
    with ledger_of(demo.workdir) as ledger:
        assert run_id in {s.run.run_id for s in ledger.list_runs()}
    assert f"  journal: {demo.workdir / '.reversi' / 'reversi.db'}" in demo.text
    for command in ("reversi runs", f"reversi show {run_id}", f"reversi export --run {run_id}"):
        assert f"  {command}\n" in demo.text + "\n"


def test_running_the_demo_again_records_a_new_run_on_a_fresh_world(folder: Path, demo: DemoRun) -> None:
    again = demo_in(folder)
    assert again.code == 0, again.text
    with ledger_of(folder) as ledger:
        run_ids = {s.run.run_id for s in ledger.list_runs()}
    assert run_ids == {demo.run_id, again.run_id}
    assert demo.run_id != again.run_id
    assert len(world_of(folder)["charges"]) == 2
    assert again.readme_seen


def test_the_compensator_does_nothing_twice_for_one_idempotency_key(tmp_path: Path) -> None:
    world = World.reset(tmp_path / "world.json", tmp_path)
    charge = world.create_charge(customer="cus_1", amount=700, currency="usd", description="one")
    call = {
        "run_id": "run_x",
        "step": 0,
        "tool": "stripe.refund",
        "original_tool": "stripe.create_charge",
        "args": {"charge_id": charge["id"], "amount": 700},
        "idempotency_key": "k" * 64,
        "attempt": 1,
    }
    first = run_module("reversi.demo.compensator", world.path, call)
    second = run_module("reversi.demo.compensator", world.path, {**call, "attempt": 2})
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert json.loads(first.stdout) == json.loads(second.stdout)
    assert len(world.load()["refunds"]) == 1


def test_the_compensator_fails_with_the_reason_on_stderr(tmp_path: Path) -> None:
    world = World.reset(tmp_path / "world.json", tmp_path)
    call = {"tool": "fs.delete_file", "args": {"path": "../elsewhere.txt"}, "idempotency_key": "k1"}
    outside = run_module("reversi.demo.compensator", world.path, call)
    unknown = run_module("reversi.demo.compensator", world.path, {**call, "tool": "crm.delete_contact"})
    assert outside.returncode == 1
    assert outside.stderr.strip().endswith("../elsewhere.txt is outside demo-output/: the demo touches nothing else")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "compensator: unknown tool: crm.delete_contact"


def test_the_reader_answers_a_read_back_with_the_tools_json(tmp_path: Path) -> None:
    world = World.reset(tmp_path / "world.json", tmp_path)
    charge = world.create_charge(customer="cus_1", amount=700, currency="usd", description="one")
    found = run_module("reversi.demo.reader", world.path, {"tool": "stripe.get_charge", "arguments": {"id": "ch_0001"}})
    missing = run_module("reversi.demo.reader", world.path, {"tool": "stripe.get_charge", "arguments": {"id": "ch_9"}})
    assert found.returncode == 0
    assert json.loads(found.stdout) == charge
    assert missing.returncode == 1
    assert missing.stderr.strip() == "reader: no such charge: ch_9"


def test_the_cli_demo_and_the_commands_it_suggests_work_from_the_folder(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_FROM_ENV}

    def reversi_cli(*args: str) -> subprocess.CompletedProcess[str]:
        code = "import sys; from reversi.cli.main import main; main(sys.argv[1:])"
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    demo = reversi_cli("demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "rollback INCOMPLETE" in demo.stdout
    run_id = demo.stdout.split("  run:     ")[1].split()[0]
    plan = reversi_cli("plan", run_id, "-m", ".reversi/demo/tools.yaml")
    assert plan.returncode == 2
    assert "step 0  stripe.create_charge  skip  already compensated" in plan.stdout
    assert reversi_cli("show", run_id).returncode == 0
    exported = reversi_cli("export", "--run", run_id)
    assert exported.returncode == 0
    assert json.loads(exported.stdout.splitlines()[0])["type"] == "run_opened"
