"""A real server with the console on loopback, and a real Chromium driven by Playwright."""

from __future__ import annotations

import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

import reversi
from reversi.engine.keys import create_key
from reversi.server.app import create_app

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
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
"""
COMPENSATOR = "import json, sys; call = json.load(sys.stdin); print(json.dumps({'undone': call['tool']}))"


@dataclass
class Console:
    url: str
    ledger: reversi.Ledger
    admin_key: str
    operator_key: str
    agent_key: str
    kill_file: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Console]:
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    kill_file = tmp_path / "KILL"
    monkeypatch.setenv("REVERSI_KILL_FILE", str(kill_file))
    ledger = reversi.open(f"sqlite:///{tmp_path}/reversi.db", manifests=[str(tmp_path / "tools.yaml")])
    keys = {role: create_key(ledger.store, name, role)[1]
            for name, role in (("dana", "admin"), ("olu", "operator"), ("billing-agent", "agent"))}
    compensator = f'{sys.executable} -c "{COMPENSATOR}"'
    app = create_app(ledger, compensator_cmd=compensator, poll_s=0.2)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield Console(f"http://127.0.0.1:{port}", ledger, keys["admin"], keys["operator"], keys["agent"], kill_file)
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
