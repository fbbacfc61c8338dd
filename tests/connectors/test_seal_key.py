"""The sealing key file, made on first use: processes that start at once all end with the same key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MAKERS = 32
# Each process, once imported, waits until the starting gun exists, then asks for the key: their first
# uses race (the key file used to be read empty by a process that came second, before it was written).
MAKER = """
import os, sys, time
from reversi.connectors import _seal
gun = sys.argv[1]
while not os.path.exists(gun):
    time.sleep(0.001)
print(_seal.key_id())
"""


def test_processes_making_the_key_at_once_all_read_one_whole_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder, gun = tmp_path / "connectors", tmp_path / "go"
    monkeypatch.delenv("REVERSI_CONNECTOR_KEY", raising=False)
    monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(folder))
    makers = [
        subprocess.Popen([sys.executable, "-c", MAKER, str(gun)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        for _ in range(MAKERS)
    ]
    gun.touch()
    said = [maker.communicate(timeout=120) for maker in makers]
    assert [maker.returncode for maker in makers] == [0] * MAKERS, [err for _, err in said]
    assert len({out.strip() for out, _ in said}) == 1
    assert [p.name for p in folder.iterdir()] == ["seal.key"]  # no temporary file is left behind
    assert (folder / "seal.key").stat().st_mode & 0o777 == 0o600
