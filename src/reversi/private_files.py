"""Files and folders Reversi creates for itself (the store, its locks, snapshots, keys, exports): only
their owner can read them. Modes are given at creation, whatever the process's umask: a journal holds
what agents sent, and its readers are whoever can read the file."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["FILE_MODE", "FOLDER_MODE", "make_private_folders", "private_file"]

FILE_MODE = 0o600
FOLDER_MODE = 0o700


def make_private_folders(folder: Path) -> None:
    """Create `folder` and any missing parents, each 0700 (folders already there are left as they are)."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        try:
            os.mkdir(each, FOLDER_MODE)
        except FileExistsError:
            continue
        os.chmod(each, FOLDER_MODE)  # mkdir's mode passes through the umask


def private_file(path: Path) -> None:
    """Create `path` empty and 0600 if it does not exist (one that exists is left as it is)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
