"""A real server with the console on loopback, and a real Chromium driven by Playwright."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

import reversi
from reversi.engine.keys import create_key
from reversi.server.app import create_app

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
# Read at import: the suite's autouse fixture clears every REVERSI_* variable before each test.
UPDATE_SCREENSHOTS = os.environ.get("REVERSI_UPDATE_SCREENSHOTS") == "1"
WAIT_MS = 15_000
MANIFEST = """
version: 1
tools:
  stripe.create_charge:
    compensation:
      tool: stripe.refund
      args: {charge_id: "$result.id", amount: "$args.amount"}
      residue: ["the charge still appears on the customer's statement"]
  bank.transfer:
    compensation:
      tool: bank.reverse_transfer
      args: {transfer: "$result.id"}
      requires_approval: true
  flaky.create:
    compensation:
      tool: flaky.undo
      args: {id: "$result.id"}
  bank.wire:
    compensation: {tool: bank.recall, args: {id: "$result.id"}}
    probe:
      tool: bank.find_wire
      args: {ref: "$args.ref"}
      took_effect: {found: true}
      not_taken: {found: false}
      result: "$result.wire"
  bank.hold:
    undo_until: "$result.releasable_until"
    compensation: {tool: bank.release, args: {id: "$result.id"}}
  mail.send:
    irreversible: true
    follow_up: {title: "Write to ${args.to} again", text: "It went out; it stays sent.", owner: support}
  notes.write:
    compensation:
      - name: created
        when: {"$result.created": true}
        tool: notes.delete
        args: {id: "$result.id"}
      - name: overwritten
        tool: notes.write
        args: {id: "$result.id", text: "$result.old"}
        then:
          - {tool: notes.touch, args: {id: "$result.id"}}
  crm.update:
    compensation:
      tool: crm.restore
      args: {id: "$result.id"}
    verification:
      tool: crm.get
      args: {id: "$result.id"}
      expect: {restored: true}
"""
# The compensator waits while the file named by REVERSI_TEST_HOLD exists (and, if it names a step,
# or STEP:ATTEMPT, for that step or attempt only): a test holds a rollback mid-way by creating it,
# and lets it go by removing it.
# It fails every undo of flaky.create.
COMPENSATOR = """import json, os, sys, time
call = json.load(sys.stdin)
hold = os.environ.get('REVERSI_TEST_HOLD')
def held():
    try:
        text = open(hold).read().strip()
    except OSError:
        return False
    return text in ('', str(call['step']), str(call['step']) + ':' + str(call['attempt']))
while hold and held():
    time.sleep(0.05)
if call['tool'] == 'flaky.undo':
    sys.exit('downstream said no')
print(json.dumps({'undone': call['tool']}))"""


@dataclass
class Console:
    url: str
    ledger: reversi.Ledger
    admin_key: str
    operator_key: str
    agent_key: str
    kill_file: Path
    hold_file: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The bank the probes of bank.wire ask (a reader command, for a console started with one): it knows wire r-1.
READER = """import json, sys
ask = json.load(sys.stdin)
ref = ask['arguments'].get('ref')
print(json.dumps({'found': True, 'wire': {'id': 'w-' + ref}} if ref == 'r-1' else {'found': False}))"""


@pytest.fixture
def console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Console]:
    """The console over a fresh store; `indirect` parametrisation with True gives the server a reader command."""
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    kill_file = tmp_path / "KILL"
    monkeypatch.setenv("REVERSI_KILL_FILE", str(kill_file))
    hold_file = tmp_path / "HOLD"
    monkeypatch.setenv("REVERSI_TEST_HOLD", str(hold_file))
    ledger = reversi.open(f"sqlite:///{tmp_path}/reversi.db", manifests=[str(tmp_path / "tools.yaml")])
    keys = {role: create_key(ledger.store, name, role)[1]
            for name, role in (("dana", "admin"), ("olu", "operator"), ("billing-agent", "agent"))}
    compensator = f'{sys.executable} -c "{COMPENSATOR}"'
    reader = f'{sys.executable} -c "{READER}"' if getattr(request, "param", False) else None
    app = create_app(ledger, compensator_cmd=compensator, reader_cmd=reader, poll_s=0.2)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield Console(f"http://127.0.0.1:{port}", ledger, keys["admin"], keys["operator"], keys["agent"], kill_file,
                      hold_file)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        ledger.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One Chromium per test module: Playwright's sync API keeps an event loop running in this thread
    while it is open, which the other tests' asyncio.run must not meet."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: apt-get install chromium chromium-driver (see .ci/run)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


@pytest.fixture
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests' screenshots go: docs/screenshots with REVERSI_UPDATE_SCREENSHOTS=1 (to update
    the documentation's pictures on purpose), else a temporary folder, so a test run leaves the tree clean."""
    return screenshot_dir(tmp_path_factory.mktemp("screenshots"))


def screenshot_dir(elsewhere: Path, update: bool | None = None) -> Path:
    target = DOCS_SCREENSHOTS if (UPDATE_SCREENSHOTS if update is None else update) else elsewhere
    target.mkdir(parents=True, exist_ok=True)
    return target


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    yield context.new_page()
    context.close()


def record_run(console: Console) -> str:
    """A billing agent's run: a charge, a transfer whose undo needs approval, a charge that timed out."""
    ledger = console.ledger.acting_as("billing-agent")
    run = ledger.start_run(actor="billing-agent", tenant="acme", environment="prod")
    run.begin("stripe.create_charge", {"amount": 700, "customer": "cus_42"}).succeeded({"id": "ch_1"})
    run.begin("bank.transfer", {"amount": 5000}).succeeded({"id": "tr_9"})
    run.begin("stripe.create_charge", {"amount": 900, "customer": "cus_42"}).uncertain("read timed out after 10 s")
    return str(run.id)


def sign_in(page: Any, console: Console, key: str, path: str = "/") -> None:
    page.goto(console.url + path)
    page.wait_for_url(re.compile(r"/login"))
    page.fill("#key", key)
    page.click("button[type=submit]")
    page.wait_for_url(console.url + path)
