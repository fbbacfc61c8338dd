"""`reversi doctor`: what this process would use, and what it finds looser than it should be.

Each check is a finding: `ok`, or not with a line saying what to do (`fix`). Files Reversi keeps (the
SQLite store and its -wal and -shm, the connector folder's snapshots and sealing key) should be their
owner's alone: 0600 files in 0700 folders. Encryption at rest and retention are reported as they are
configured; an unreachable store, a looser file, or data keys under a key this process does not hold
are findings that fail.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from reversi.core.json_values import JSONObject
from reversi.engine.config import load_settings
from reversi.engine.encryption import ENCRYPTION_KEYS, keyring_from_env
from reversi.errors import ReversiError
from reversi.private_files import FILE_MODE, FOLDER_MODE
from reversi.store.base import Store
from reversi.store.factory import open_store

__all__ = ["Finding", "examine"]

_CONNECTOR_DIR = ("REVERSI_CONNECTOR_DIR", ".reversi/connectors")  # as reversi-connectors reads it


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def to_dict(self) -> JSONObject:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


def _mode(path: Path, *, folder: bool) -> Finding | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Finding(f"mode of {path}", False, f"cannot be read: {exc.strerror}")
    mode, wanted = stat.S_IMODE(info.st_mode), FOLDER_MODE if folder else FILE_MODE
    if mode & 0o077:
        return Finding(f"mode of {path}", False, f"{mode:04o}: others than its owner can reach it",
                       f"chmod {wanted:o} {path}")
    return Finding(f"mode of {path}", True, f"{mode:04o}")


def _store_files(url: str) -> list[Finding]:
    if not url.startswith("sqlite:///"):
        return []
    path = Path(url.removeprefix("sqlite:///"))
    found = [_mode(path.parent, folder=True)]
    found += [_mode(Path(f"{path}{suffix}"), folder=False) for suffix in ("", "-wal", "-shm")]
    return [f for f in found if f is not None]


def _connector_files() -> list[Finding]:
    folder = Path(os.environ.get(_CONNECTOR_DIR[0]) or _CONNECTOR_DIR[1])
    if not folder.is_dir():
        return []
    found = [_mode(folder, folder=True)]
    for below in sorted(folder.rglob("*")):
        found.append(_mode(below, folder=below.is_dir()))
    return [f for f in found if f is not None]


def examine(*, config: str | None = None, db: str | None = None) -> list[Finding]:
    """The findings for this process's settings (the config file and store flags as the CLI's).

    Raises:
        ConfigError: the settings themselves cannot be read.
    """
    settings = load_settings(config=config, db=db)
    keyring = keyring_from_env()
    findings: list[Finding] = []
    try:
        store: Store = open_store(settings.db)
        store.use_keyring(keyring)
    except ReversiError as exc:
        return [Finding("store", False, exc.message, "check the store URL it names (REVERSI_DB, db: in reversi.yaml)")]
    with store:
        back_end = "SQLite" if settings.db.startswith("sqlite:///") else "PostgreSQL"
        with store.read() as q:
            keys, data_keys = q.any_key(), q.count_data_keys()
        findings.append(Finding("store", True, f"{back_end}, reachable"))
        findings += _store_files(settings.db)
        findings += _connector_files()
        if keyring is None:
            sealed = sum(n for kek, n in data_keys.items() if kek)
            findings.append(Finding("encryption at rest", not sealed, f"{ENCRYPTION_KEYS} is not set: new values are "
                                    "stored in clear" + (f"; {sealed} runs' data keys cannot be opened" if sealed
                                                         else ""), f"set {ENCRYPTION_KEYS} (docs/operations.md)"))
        else:
            stuck = {kek: n for kek, n in data_keys.items() if kek and kek not in keyring.keys}
            old = {kek: n for kek, n in data_keys.items() if kek and kek != keyring.current and kek in keyring.keys}
            detail = f"on: new values sealed under key {keyring.current}"
            if old:
                detail += "; " + ", ".join(f"{n} data keys still under {kek}" for kek, n in sorted(old.items()))
            if stuck:
                detail += "; " + ", ".join(f"{n} data keys under {kek}, not held here"
                                           for kek, n in sorted(stuck.items()))
            findings.append(Finding("encryption at rest", not stuck, detail,
                                    "list every key in use, then: reversi keys rotate-data" if stuck or old else ""))
        window = settings.retention
        shown = f"{window.days}d" if window is not None and not window.seconds else str(window)
        findings.append(Finding("retention", True, f"settled runs opened over {shown} ago are pruned" if window
                                else "not set: runs are kept until pruned (reversi prune)"))
        findings.append(Finding("API keys", True, "the store holds keys" if keys
                                else "none: reversi-server answers this machine only"))
    return findings
