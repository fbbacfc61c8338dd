"""Content-addressed snapshots (a file's previous bytes, a row's before-image) under the connector folder.

The folder is `REVERSI_CONNECTOR_DIR`, else `.reversi/connectors/` in the working directory of
the forward call. A snapshot is `blobs/SHA256`, written once (to a temporary name, then renamed)
and never changed; forward results name it by absolute path, so an undo finds it from anywhere.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

from reversi.connectors._base import Setting
from reversi.errors import ConnectorError

__all__ = ["SETTING", "connector_dir", "load", "store"]

SETTING = Setting("REVERSI_CONNECTOR_DIR", "where snapshots and before-images are kept", ".reversi/connectors")


def connector_dir() -> Path:
    """The connector folder, absolute (it is not created here)."""
    return Path(os.path.abspath(os.environ.get(SETTING.name) or SETTING.default))


def store(data: bytes) -> tuple[str, Path]:
    """Keep `data`; returns its SHA-256 and the absolute path it is kept at."""
    sha = hashlib.sha256(data).hexdigest()
    blobs = connector_dir() / "blobs"
    path = blobs / sha
    if path.exists():
        return sha, path
    blobs.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = blobs / f".{sha}.{uuid.uuid4().hex}.tmp"
    with temporary.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)
    return sha, path


def load(path: str, sha256: str) -> bytes:
    """The snapshot at `path`, checked against its digest.

    Raises:
        ConnectorError: it is missing or its bytes no longer hash to `sha256`.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConnectorError(f"snapshot {path} cannot be read: {exc.strerror or exc}") from exc
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ConnectorError(f"snapshot {path} is damaged: its bytes do not hash to {sha256}")
    return data
