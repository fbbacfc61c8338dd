"""The fs connector's root, reached without a race: each folder of a path is opened relative to the
descriptor of the one above it, and no symbolic link is ever followed.

A path is checked as text first (relative; no `..`, `.` or empty part), then walked one folder at a
time with `openat(O_DIRECTORY | O_NOFOLLOW)`, and its last part is acted on relative to the
descriptor of the folder that holds it. A folder swapped for a link mid-call is met as a link and
refused; a folder the walk already holds stays the one acted in. So nothing is reached outside the
root, whatever another process does meanwhile. The connector folder (snapshots, the sealing key) is
refused by name and, once it exists, by identity (device and inode) too; so are Reversi's own files
(`own_files`): an agent whose root holds the store or the manifests cannot rewrite what judges it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from reversi.connectors import _snapshots
from reversi.connectors._base import Setting
from reversi.core.json_values import LooseJSON, LooseJSONObject
from reversi.errors import BadArgument, ConnectorError

__all__ = [
    "ABSENT",
    "ROOT",
    "Entry",
    "Root",
    "entry",
    "file_state",
    "make_folder",
    "move_entry",
    "opened_root",
    "os_errors",
    "remove_folder",
    "replace",
    "root_path",
    "state",
    "unlink",
]

ROOT = Setting("REVERSI_FS_ROOT", "the folder fs tools act in; paths leaving it are refused", "the working directory")

State = LooseJSONObject  # what is at a path, as `state` reads it (and a result keeps it)
ABSENT: State = {"exists": False, "type": None, "sha256": None, "size": None, "mode": None}

_MAX_PATH, _MAX_NAME = 4096, 255
_KEPT = "{!r} is inside the connector folder, which keeps the snapshots"
_OWN = "{!r} is {what}, one of Reversi's own files, which fs tools never touch"
# Reversi's data folder and configuration file, by name, wherever they are under the root.
_OWN_FOLDER, _OWN_CONFIG = ".reversi", "reversi.yaml"
# The settings naming Reversi's files; each may list several, separated by ':'.
_OWN_SETTINGS = {"REVERSI_DB": "the store", "REVERSI_CONFIG": "the configuration",
                 "REVERSI_MANIFEST": "a manifest", "REVERSI_KILL_FILE": "the kill file",
                 "REVERSI_HTTP_TOOLS": "the http tools file"}
_STORE_SUFFIXES = ("", "-wal", "-shm", "-journal")
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO swapped in opens, and is not read


@dataclass(frozen=True)
class Root:
    """The configured root, open; and the connector folder it must not reach into."""

    path: Path
    fd: int
    keep: Path
    keep_id: tuple[int, int] | None  # (device, inode) of the connector folder, once it exists
    own: dict[Path, str]  # Reversi's files named by the environment, resolved, and what each is
    own_ids: dict[tuple[int, int], str]  # (device, inode) of those that exist


@dataclass(frozen=True)
class Entry:
    """A path's last part, and an open descriptor of the folder holding it; `folder` is None when the
    walk stopped short (`problem` says why; `missing`: at a folder that does not exist)."""

    relative: str
    name: str
    folder: int | None
    problem: str = ""
    missing: bool = False


def root_path() -> Path:
    """The configured root (REVERSI_FS_ROOT, else the working directory), its links resolved."""
    return Path(os.path.realpath(os.environ.get(ROOT.name) or os.getcwd()))


@contextmanager
def opened_root() -> Iterator[Root]:
    """The root, open for the length of one call.

    Raises:
        BadArgument: REVERSI_FS_ROOT is not a folder (or has a name UTF-8 cannot hold).
    """
    path = root_path()
    try:
        str(path).encode()  # every result names the root, and a seal must be able to hold it
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (OSError, UnicodeEncodeError):
        raise BadArgument(ROOT.name, f"{os.environ.get(ROOT.name) or path} is not a folder") from None
    keep = Path(os.path.realpath(_snapshots.connector_dir()))
    try:
        info = os.stat(keep)
        keep_id = (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None
    except OSError:
        keep_id = None
    own = own_files()
    own_ids = {}
    for file, what in own.items():
        with suppress(OSError):
            info = os.stat(file)
            own_ids[(info.st_dev, info.st_ino)] = what
    try:
        yield Root(path, fd, keep, keep_id, own, own_ids)
    finally:
        os.close(fd)


def own_files() -> dict[Path, str]:
    """Reversi's files named by this process's settings (the store's SQLite file and its journals, the
    configuration, the manifests, the kill file, the http tools file), resolved, and what each is."""
    found: dict[Path, str] = {}
    for name, what in _OWN_SETTINGS.items():
        setting = os.environ.get(name, "")
        for value in filter(None, setting.split(":") if name == "REVERSI_MANIFEST" else [setting]):
            if name == "REVERSI_DB":
                if not value.startswith("sqlite:///"):
                    continue
                value = value.removeprefix("sqlite:///")
            for suffix in _STORE_SUFFIXES if name == "REVERSI_DB" else ("",):
                found[Path(os.path.realpath(value + suffix))] = what
    return found


def _own(root: Root, parts: list[str]) -> str | None:
    """What Reversi file the path names, if it names one (by name, or as a file the settings name)."""
    if _OWN_FOLDER in parts:
        return "inside Reversi's data folder"
    if parts[-1] == _OWN_CONFIG:
        return "a Reversi configuration file"
    return root.own.get(root.path.joinpath(*parts))


def _parts(root: Root, relative: LooseJSON, argument: str) -> list[str]:
    if not isinstance(relative, str):
        raise BadArgument(argument, f"expected a string, got {type(relative).__name__}")
    if not relative or relative.startswith("/"):
        raise BadArgument(argument, f"{relative!r} must be a path relative to the root {root.path}")
    try:
        size = len(relative.encode())
    except UnicodeEncodeError:  # a lone surrogate: no file can be named so, nor a result sealed
        raise BadArgument(argument, f"{relative!r} is not text that UTF-8 can hold") from None
    if size > _MAX_PATH:
        raise BadArgument(argument, f"the path is {size} bytes long; at most {_MAX_PATH}")
    parts = relative.split("/")
    long = [part for part in parts if len(part.encode()) > _MAX_NAME]
    if long:
        raise BadArgument(argument, f"{long[0][:40]!r}... is longer than {_MAX_NAME} bytes, too long for a name")
    if ".." in parts:
        raise BadArgument(argument, f"{relative!r} leaves the root {root.path}: a '..' part is refused")
    if "\0" in relative:
        raise BadArgument(argument, f"{relative!r} holds a NUL character")
    if "" in parts or "." in parts:
        raise BadArgument(argument, f"{relative!r} has an empty or '.' part: name each folder once, as in 'docs/a.txt'")
    if root.path.joinpath(*parts).is_relative_to(root.keep) or root.path.is_relative_to(root.keep):
        raise BadArgument(argument, _KEPT.format(relative))
    what = _own(root, parts)
    if what is not None:
        raise BadArgument(argument, _OWN.format(relative, what=what))
    return parts


def _stopped(relative: str, parent: int, part: str, reached: str, exc: OSError) -> Entry:
    """Where a walk stopped at `part` (the folder `reached`), and why."""
    try:
        info = os.stat(part, dir_fd=parent, follow_symlinks=False)
    except OSError as again:
        info, exc = None, exc if again.errno == errno.ENOENT else again
    if exc.errno == errno.ENOENT:
        problem = f"the folder {reached!r} of {relative!r} does not exist (create it with fs.make_dir)"
        return Entry(relative, "", None, problem, missing=True)
    if info is not None and stat.S_ISLNK(info.st_mode):
        problem = f"{relative!r} passes through the symbolic link {reached!r}, which fs refuses"
    elif info is not None and not stat.S_ISDIR(info.st_mode):
        problem = f"{reached!r} in {relative!r} is not a folder"
    elif info is not None and exc.errno in (errno.ENOTDIR, errno.ELOOP):
        problem = f"{reached!r} in {relative!r} was not a folder when reached (it changed meanwhile)"
    else:
        problem = f"the folder {reached!r} of {relative!r} cannot be opened: {exc.strerror}"
    return Entry(relative, "", None, problem)


def _walk(root: Root, parts: list[str], relative: str, argument: str) -> Entry:
    fd = os.dup(root.fd)
    try:
        for depth, part in enumerate(parts[:-1], 1):
            try:
                below = os.open(part, _FOLDER, dir_fd=fd)
            except OSError as exc:
                return _stopped(relative, fd, part, "/".join(parts[:depth]), exc)
            os.close(fd)
            fd = below
            if root.keep_id is not None and _identity(os.fstat(fd)) == root.keep_id:
                raise BadArgument(argument, _KEPT.format(relative))
        with suppress(OSError):
            last = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            if root.keep_id is not None and _identity(last) == root.keep_id:
                raise BadArgument(argument, _KEPT.format(relative))
            what = root.own_ids.get((last.st_dev, last.st_ino))
            if what is not None:  # the same file by another name: a hard link, a bind mount
                raise BadArgument(argument, _OWN.format(relative, what=what))
        found = Entry(relative, parts[-1], fd)
        fd = -1
        return found
    finally:
        if fd >= 0:
            os.close(fd)


def _identity(info: os.stat_result) -> tuple[int, int] | None:
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


@contextmanager
def entry(root: Root, relative: LooseJSON, argument: str, *, reach: bool = True) -> Iterator[Entry]:
    """`relative` under the root: its folder open for the length of the block.

    `reach`: refuse a path whose folder cannot be reached; otherwise the entry says why (`problem`).

    Raises:
        BadArgument: not a plain relative path, a path into the connector folder, or (with `reach`) a
            folder that is missing, a symbolic link or not a folder.
    """
    found = _walk(root, _parts(root, relative, argument), relative, argument)
    if found.folder is None and reach:
        raise BadArgument(argument, found.problem)
    try:
        yield found
    finally:
        if found.folder is not None:
            os.close(found.folder)


def _kind(info: os.stat_result) -> State:
    mode = stat.S_IMODE(info.st_mode)
    kind = "directory" if stat.S_ISDIR(info.st_mode) else "symlink" if stat.S_ISLNK(info.st_mode) else "other"
    return {"exists": True, "type": kind, "sha256": None, "size": None, "mode": f"{mode:04o}"}


def file_state(info: os.stat_result, data: bytes) -> State:
    """The state of a regular file whose bytes are `data`."""
    return {"exists": True, "type": "file", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
            "mode": f"{stat.S_IMODE(info.st_mode):04o}"}


def state(found: Entry, max_bytes: int | None = None) -> tuple[State, bytes | None]:
    """What is at the entry (`exists`, `type`, `sha256`, `size`, `mode` as octal text), and a file's bytes.

    A symbolic link is a `symlink`, never followed; an entry whose folder is missing is absent.

    Raises:
        ConnectorError: the file holds more than `max_bytes` (it is not read).
    """
    if found.folder is None:
        return dict(ABSENT), None
    try:
        info = os.stat(found.name, dir_fd=found.folder, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode):
            return _kind(info), None
        fd = os.open(found.name, _FILE, dir_fd=found.folder)
    except FileNotFoundError:
        return dict(ABSENT), None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        return {**ABSENT, "exists": True, "type": "symlink"}, None  # a file swapped for a link meanwhile
    with os.fdopen(fd, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode):
            return _kind(info), None
        if max_bytes is not None and info.st_size > max_bytes:
            raise ConnectorError(f"{found.relative} holds {info.st_size} bytes, more than the {max_bytes} left to keep")
        data = source.read() if max_bytes is None else source.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:  # it grew while read
            raise ConnectorError(f"{found.relative} holds more than the {max_bytes} bytes left to keep")
    return file_state(info, data), data


def replace(found: Entry, data: bytes, mode: int | None) -> State:
    """Put `data` at the entry atomically: a new file in its folder, renamed over the name there. A new
    file gets the umask's mode unless `mode` is given. Returns the state written."""
    assert found.folder is not None
    temporary = f".reversi-{uuid.uuid4().hex}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                 dir_fd=found.folder)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
            info = os.fstat(out.fileno())
        os.replace(temporary, found.name, src_dir_fd=found.folder, dst_dir_fd=found.folder)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary, dir_fd=found.folder)
        raise
    return file_state(info, data)


def move_entry(source: Entry, destination: Entry, data: bytes, mode: int) -> bool:
    """Move the file at `source` to `destination`, never over something there; False when the
    destination is taken. `data` and `mode` are the file's, for a move across file systems."""
    assert source.folder is not None and destination.folder is not None
    try:  # a hard link fails when the name is taken, where a rename would replace what is there
        os.link(source.name, destination.name, src_dir_fd=source.folder, dst_dir_fd=destination.folder,
                follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        return _move_unlinked(source, destination, data, mode, across=exc.errno == errno.EXDEV)
    os.unlink(source.name, dir_fd=source.folder)
    return True


def _move_unlinked(source: Entry, destination: Entry, data: bytes, mode: int, *, across: bool) -> bool:
    """Where links are not allowed: check the destination is free, then rename (or copy, across file systems)."""
    assert source.folder is not None and destination.folder is not None
    if state(destination)[0]["exists"]:
        return False
    if across:
        replace(destination, data, mode)
        os.unlink(source.name, dir_fd=source.folder)
    else:
        os.rename(source.name, destination.name, src_dir_fd=source.folder, dst_dir_fd=destination.folder)
    return True


def unlink(found: Entry) -> None:
    """Remove the file (or link) at the entry."""
    assert found.folder is not None
    os.unlink(found.name, dir_fd=found.folder)


def make_folder(found: Entry) -> bool:
    """Create the folder at the entry; False when something is there already."""
    assert found.folder is not None
    try:
        os.mkdir(found.name, dir_fd=found.folder)
    except FileExistsError:
        return False
    return True


def remove_folder(found: Entry) -> int:
    """Remove the folder at the entry while it is empty; else the number of entries it holds (0: it
    was emptied and filled again meanwhile, so it still stands)."""
    assert found.folder is not None
    fd = os.open(found.name, _FOLDER, dir_fd=found.folder)
    try:
        entries = len(os.listdir(fd))
    finally:
        os.close(fd)
    if entries:
        return entries
    try:
        os.rmdir(found.name, dir_fd=found.folder)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        return -1
    return 0


@contextmanager
def os_errors(relative: str) -> Iterator[None]:
    """An OSError as one line naming the path (not a temporary name, not the host's path)."""
    try:
        yield
    except OSError as exc:
        raise ConnectorError(f"{relative}: {exc.strerror or exc}") from None
