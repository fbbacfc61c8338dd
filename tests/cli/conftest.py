"""What the CLI's tests share: a folder with a manifest, the `reversi` command run as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import reversi

MANIFEST = """
version: 1
tools:
  stripe.create_charge:
    compensation:
      tool: stripe.refund
      args: {charge_id: "$result.id"}
  email.send:
    irreversible: true
"""

COMPENSATOR = "import json, sys; call = json.load(sys.stdin); print(json.dumps({'undone': call['tool']}))"
UNDO = f'{sys.executable} -c "{COMPENSATOR}"'  # a --compensator-cmd that undoes every call


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("REVERSI_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    return tmp_path


def reversi_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("reversi")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, timeout=60,
                          env={**os.environ, **(env or {})})


def record_charge(here: Path, *, uncertain: bool = False) -> str:
    with reversi.open(manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run(actor="billing-agent", tenant="acme")
        step = run.begin("stripe.create_charge", {"amount": 700})
        step.uncertain("timed out") if uncertain else step.succeeded({"id": "ch_1"})
        return str(run.id)
