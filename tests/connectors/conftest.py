"""Helpers for the connector tests: the real CLIs as subprocesses, and a world read back as data."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent
CONNECTORS = str(BIN / "reversi-connectors")
COMPENSATOR = f"{CONNECTORS} compensate"
READER = f"{CONNECTORS} read"


@dataclass
class Done:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_command(argv: list[str], stdin: str = "", env: dict[str, str] | None = None, timeout: float = 60) -> Done:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return Done(done.returncode, done.stdout, done.stderr)


def connectors_cli(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> Done:
    return run_command([CONNECTORS, *args], stdin, env)


def reversi_cli(*args: str) -> Done:
    return run_command([str(BIN / "reversi"), *args])


@pytest.fixture
def rollback(db_url: str) -> Callable[..., Done]:
    """`reversi rollback RUN -m MANIFEST --json` with the connectors as compensator and reader."""

    def start(run_id: str, manifest: Path, *extra: str) -> Done:
        return reversi_cli("--db", db_url, "rollback", run_id, "-m", str(manifest), "--json",
                           "--compensator-cmd", COMPENSATOR, "--reader-cmd", READER, *extra)

    return start


@pytest.fixture
def plan(db_url: str) -> Callable[[str, Path], Done]:
    def show(run_id: str, manifest: Path) -> Done:
        return reversi_cli("--db", db_url, "plan", run_id, "-m", str(manifest), "--json")

    return show


def compensation_calls(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The call JSON a rollback would send for each `compensate` action of a plan."""
    return [
        {"run_id": plan["run_id"], "step": a["step"], "tool": a["compensation_tool"], "original_tool": a["tool"],
         "args": a["args"], "idempotency_key": a["idempotency_key"], "attempt": 1}
        for a in plan["actions"] if a["kind"] == "compensate"
    ]


def files_under(root: Path) -> dict[str, tuple[str, bytes | None, int]]:
    """Every entry under `root` (not `.reversi`): kind, bytes (files) and permission bits."""
    found: dict[str, tuple[str, bytes | None, int]] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] == ".reversi":
            continue
        info = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
        found[str(relative)] = ("file" if data is not None else "dir", data, stat.S_IMODE(info.st_mode))
    return found


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fs connector's root (REVERSI_FS_ROOT), holding `notes.txt`."""
    root = tmp_path / "world"
    root.mkdir()
    (root / "notes.txt").write_text("mine\n")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(root))
    return root
