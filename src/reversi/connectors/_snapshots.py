"""Content-addressed snapshots (a file's previous bytes, a row's before-image) in the connector folder.

The folder is `REVERSI_CONNECTOR_DIR`, else `.reversi/connectors/` in the working directory. A
snapshot is `blobs/SHA256`, written once (to a temporary name, then renamed) and never changed. It is
found again by its digest alone, in the folder the operator configured: never by a path that a
result names, so an undo cannot be pointed at another file.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import uuid
from pathlib import Path

from reversi.connectors._base import Setting
from reversi.errors import ConnectorError
from reversi.private_files import make_private_folders

__all__ = ["SETTING", "connector_dir", "load", "store"]

SETTING = Setting("REVERSI_CONNECTOR_DIR", "where snapshots, before-images and the sealing key are kept",
                  ".reversi/connectors")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def connector_dir() -> Path:
    """The connector folder, absolute (it is not created here)."""
    return Path(os.path.abspath(os.environ.get(SETTING.name) or SETTING.default))


def store(data: bytes) -> str:
    """Keep `data`; returns its SHA-256, by which `load` finds it."""
    sha = hashlib.sha256(data).hexdigest()
    blobs = connector_dir() / "blobs"
    path = blobs / sha
    if path.exists():
        return sha
    make_private_folders(blobs)
    temporary = blobs / f".{sha}.{uuid.uuid4().hex}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    return sha


def load(sha256: str, size: int | None = None) -> bytes:
    """The snapshot whose digest is `sha256`, from the connector folder; at most `size` bytes are read
    when the caller knows how many the snapshot holds.

    Raises:
        ConnectorError: not a digest, no such snapshot, or one whose bytes no longer hash to it.
    """
    if not isinstance(sha256, str) or not _DIGEST.fullmatch(sha256):
        raise ConnectorError(f"no snapshot can be named {str(sha256)[:80]!r}: expected a SHA-256 digest")
    path = connector_dir() / "blobs" / sha256
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise ConnectorError(f"no snapshot {sha256} in the connector folder {connector_dir()}") from None
    with os.fdopen(fd, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode) or (size is not None and info.st_size != size):
            raise ConnectorError(f"snapshot {sha256} is damaged: it is not the {size}-byte file kept")
        data = source.read(info.st_size + 1)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ConnectorError(f"snapshot {sha256} is damaged: its bytes do not hash to its name")
    return data
