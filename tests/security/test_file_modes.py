"""What Reversi writes for itself is its owner's alone: the SQLite store, its -wal and -shm, its lock
files, the connectors' snapshots and sealing key, and prune's export are 0600 in folders it made 0700,
whatever the umask of the process that made them."""

from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import os, sys
os.umask(0o022)
from pathlib import Path
import reversi
from reversi.connectors import fs

home = Path(sys.argv[1])
os.environ["REVERSI_FS_ROOT"] = str(home / "root")
os.environ["REVERSI_CONNECTOR_DIR"] = str(home / "deep" / "connectors")
(home / "root").mkdir()
(home / "root" / "a.txt").write_text("before")
with reversi.open(f"sqlite:///{home}/data/nested/reversi.db") as ledger:
    run = ledger.start_run()
    run.call("fs.write_file", {"path": "a.txt", "content": "after"}, fs.write_file)
    lock = ledger.store.try_lock_run(run.id)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (home / "data" / "nested").iterdir()}
    modes |= {p.name: oct(p.stat().st_mode & 0o777) for p in (home / "data" / "nested" / "reversi.db.locks").iterdir()}
    print(modes)
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_store_snapshots_and_keys_are_private_under_a_permissive_umask(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    seen = ast.literal_eval(done.stdout)
    assert {"reversi.db", "reversi.db-wal", "reversi.db-shm"} <= set(seen)
    assert {name: mode for name, mode in seen.items() if name != "reversi.db.locks"} == dict.fromkeys(
        [n for n in seen if n != "reversi.db.locks"], "0o600"), seen
    assert seen["reversi.db.locks"] == "0o700"
    for folder in (tmp_path / "data", tmp_path / "data" / "nested", tmp_path / "deep", tmp_path / "deep/connectors"):
        assert _mode(folder) == 0o700, folder
    made = [p for p in (tmp_path / "deep").rglob("*")]
    assert any(p.is_file() and p.parent.name == "blobs" for p in made), made
    for path in made:
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path


def test_a_folder_that_was_there_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    import reversi

    with reversi.open(f"sqlite:///{shared}/reversi.db") as ledger:
        ledger.start_run()
    assert _mode(shared) == 0o755 and _mode(shared / "reversi.db") == 0o600
