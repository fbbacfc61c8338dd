"""The `fs` connector: files under a root folder, each change undoable to the exact previous bytes and mode.

Forward tools take paths relative to `REVERSI_FS_ROOT` (default: the working directory) and refuse
any that leave it, by `..` or by a symbolic link. Before a file changes its bytes are kept as a
snapshot (`reversi.connectors._snapshots`); the result names the root, the path, the state before
(with the snapshot's absolute path) and the state after, which is all the undo needs. An undo
acts only while the file is still as the forward call left it.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import os
import shutil
import stat as _stat
import uuid
from pathlib import Path
from typing import Any

from reversi.connectors import _snapshots
from reversi.connectors._base import STEP, Connector, Param, Setting, Tool, ToolKind
from reversi.errors import BadArgument, ChangedSince

__all__ = [
    "CONNECTOR",
    "confine_to_root",
    "delete",
    "make_dir",
    "move",
    "move_back",
    "remove_dir",
    "restore",
    "stat",
    "write_file",
]

ROOT = Setting("REVERSI_FS_ROOT", "the folder fs tools act in; paths leaving it are refused", "the working directory")

State = dict[str, Any]
_confined = False


def confine_to_root() -> None:
    """From now on refuse a `root` argument other than REVERSI_FS_ROOT (or the working directory).

    `reversi-connectors serve` calls it: there the compensations and reads are offered to an agent,
    which must not reach past the root its forward tools are confined to.
    """
    global _confined
    _confined = True


# --- paths -------------------------------------------------------------------------------------


def _root(root: str | None) -> Path:
    if root is None:
        named, raw = ROOT.name, os.environ.get(ROOT.name) or os.getcwd()
    else:
        named, raw = "root", root
        if not os.path.isabs(root):
            raise BadArgument("root", f"{root!r} is not an absolute path")
    real = Path(os.path.realpath(raw))
    if not real.is_dir():
        raise BadArgument(named, f"{raw} is not a folder")
    if root is not None and _confined and real != _root(None):
        raise BadArgument("root", f"{root} is not this server's root {_root(None)}")
    return real


def _inside(root: Path, relative: str, name: str) -> Path:
    """The real location of `relative` under `root`; refused when it leaves the root."""
    if not relative or os.path.isabs(relative):
        raise BadArgument(name, f"{relative!r} must be a path relative to the root {root}")
    real = Path(os.path.realpath(root / relative))
    if real == root or not real.is_relative_to(root):
        raise BadArgument(name, f"{relative!r} leaves the root {root}")
    if real.is_relative_to(_snapshots.connector_dir()):
        raise BadArgument(name, f"{relative!r} is inside the connector folder, which keeps the snapshots")
    return real


def _parent_exists(path: Path, relative: str, name: str) -> None:
    if not path.parent.is_dir():
        raise BadArgument(name, f"the folder of {relative!r} does not exist (create it with fs.make_dir)")


# --- states ------------------------------------------------------------------------------------


def _state(path: Path, data: bytes | None = None) -> State:
    """What is at `path`: `exists`, `type`, `sha256`, `size` and `mode` (octal text).

    `data`: the file's bytes when the caller has read them already.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False, "type": None, "sha256": None, "size": None, "mode": None}
    mode = f"{_stat.S_IMODE(info.st_mode):04o}"
    if _stat.S_ISREG(info.st_mode):
        data = path.read_bytes() if data is None else data
        return {"exists": True, "type": "file", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                "mode": mode}
    kind = "directory" if _stat.S_ISDIR(info.st_mode) else "other"
    return {"exists": True, "type": kind, "sha256": None, "size": None, "mode": mode}


def _snapshot(path: Path, relative: str, name: str) -> State:
    """The file's state before a change, its bytes kept (read once); an absent file has no snapshot."""
    try:
        data: bytes | None = path.read_bytes() if path.is_file() else None
    except FileNotFoundError:
        data = None
    before = _state(path, data)
    if before["exists"] and (before["type"] != "file" or data is None):
        raise BadArgument(name, f"{relative!r} is a {before['type']}, not a file")
    before["snapshot"] = _snapshots.store(data) if data is not None else None
    return before


def _same(a: State, b: State) -> bool:
    return all(a.get(key) == b.get(key) for key in ("exists", "type", "sha256", "mode"))


def _difference(relative: str, now: State, left: State) -> str:
    if not now["exists"]:
        return f"{relative} no longer exists"
    if not left["exists"]:
        return f"{relative} exists again ({_describe(now)})"
    if now["type"] != left["type"]:
        return f"{relative} is now a {now['type']}"
    if now["sha256"] != left["sha256"]:
        return f"{relative} now has sha256 {now['sha256']}, the step left {left['sha256']}"
    return f"{relative} now has mode {now['mode']}, the step left {left['mode']}"


def _describe(state: State) -> str:
    return f"sha256 {state['sha256']}" if state["type"] == "file" else f"a {state['type']}"


def _write(path: Path, data: bytes, mode: int | None) -> None:
    """Replace the file at `path` with `data` atomically; a new file gets the umask's mode."""
    temporary = path.parent / f".{path.name}.{uuid.uuid4().hex}.reversi-tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _forward_result(root: Path, relative: str, before: State, after: State) -> dict[str, Any]:
    return {"root": str(root), "path": relative, "before": before, "after": after}


# --- forward tools -----------------------------------------------------------------------------


def write_file(path: str, content: str | None = None, content_base64: str | None = None) -> dict[str, Any]:
    """Write a file (text in `content`, or bytes in `content_base64`), keeping its previous bytes.

    Raises:
        BadArgument: not exactly one of the contents, bad base64, or a path the root refuses.
    """
    if (content is None) == (content_base64 is None):
        raise BadArgument("content", "give exactly one of content and content_base64")
    if content is not None:
        data = content.encode("utf-8")
    else:
        try:
            data = base64.b64decode(content_base64 or "", validate=True)
        except binascii.Error as exc:
            raise BadArgument("content_base64", f"not base64: {exc}") from exc
    root = _root(None)
    target = _inside(root, path, "path")
    _parent_exists(target, path, "path")
    before = _snapshot(target, path, "path")
    _write(target, data, int(before["mode"], 8) if before["exists"] else None)
    return _forward_result(root, path, before, _state(target))


def delete(path: str) -> dict[str, Any]:
    """Delete a file, keeping its bytes and mode.

    Raises:
        BadArgument: no file there, or a path the root refuses.
    """
    root = _root(None)
    target = _inside(root, path, "path")
    before = _snapshot(target, path, "path")
    if not before["exists"]:
        raise BadArgument("path", f"{path!r}: no such file")
    target.unlink()
    return _forward_result(root, path, before, _state(target))


def move(source: str, destination: str) -> dict[str, Any]:
    """Move (rename) a file inside the root; the destination must not exist yet.

    Raises:
        BadArgument: no file at the source, something at the destination, or a path the root refuses.
    """
    root = _root(None)
    src, dst = _inside(root, source, "source"), _inside(root, destination, "destination")
    moved = _state(src)
    if moved["type"] != "file":
        raise BadArgument("source", f"{source!r}: no such file" if not moved["exists"] else f"{source!r} is not a file")
    if os.path.lexists(dst):
        raise BadArgument("destination", f"{destination!r} already exists")
    _parent_exists(dst, destination, "destination")
    _rename(src, dst)
    return {"root": str(root), "source": source, "destination": destination,
            "sha256": moved["sha256"], "size": moved["size"], "mode": moved["mode"]}


def make_dir(path: str) -> dict[str, Any]:
    """Create one folder (its parent must exist).

    Raises:
        BadArgument: something is already there, no parent folder, or a path the root refuses.
    """
    root = _root(None)
    target = _inside(root, path, "path")
    if os.path.lexists(target):
        raise BadArgument("path", f"{path!r} already exists")
    _parent_exists(target, path, "path")
    target.mkdir()
    return {"root": str(root), "path": path, "mode": _state(target)["mode"]}


def _rename(src: Path, dst: Path) -> None:
    try:
        os.rename(src, dst)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.move(src, dst)


# --- compensations -----------------------------------------------------------------------------


def restore(root: str, path: str, before: State, after: State, step: int | None = None) -> dict[str, Any]:
    """Put back exactly what was at `path` before the step (bytes and mode), or no file if none was.

    Safe to repeat: when the file is already as it was before, it does nothing and answers the same.

    Raises:
        ChangedSince: the file is no longer as the step left it.
        ConnectorError: the snapshot is missing or damaged.
    """
    base = _root(root)
    target = _inside(base, path, "path")
    now = _state(target)
    restored = {key: before.get(key) for key in ("exists", "sha256", "mode")}
    if not _same(now, before):
        if not _same(now, after):
            raise ChangedSince(step, _difference(path, now, after))
        if before.get("exists"):
            data = _snapshots.load(str(before.get("sha256")))
            _write(target, data, int(str(before.get("mode")), 8))
        else:
            target.unlink()
    return {"root": str(base), "path": path, "restored": restored}


def move_back(root: str, source: str, destination: str, sha256: str, step: int | None = None) -> dict[str, Any]:
    """Move the file back from `destination` to `source`, if it is still the file the step moved.

    Raises:
        ChangedSince: the destination holds other bytes or nothing, or the source was taken since.
    """
    base = _root(root)
    src, dst = _inside(base, source, "source"), _inside(base, destination, "destination")
    at_src, at_dst = _state(src), _state(dst)
    result = {"root": str(base), "source": source, "destination": destination, "sha256": sha256}
    if at_src["sha256"] == sha256 and not at_dst["exists"]:
        return result
    moved = {"exists": True, "type": "file", "sha256": sha256, "mode": at_dst["mode"]}
    if not _same(at_dst, moved):
        raise ChangedSince(step, _difference(destination, at_dst, moved))
    if os.path.lexists(src):
        raise ChangedSince(step, f"{source} exists again ({_describe(at_src)})")
    _rename(dst, src)
    return result


def remove_dir(root: str, path: str, step: int | None = None) -> dict[str, Any]:
    """Remove the folder the step made, only while it is empty; a folder already gone is fine.

    Raises:
        ChangedSince: the folder holds something now, or a file took its place.
    """
    base = _root(root)
    target = _inside(base, path, "path")
    now = _state(target)
    if now["exists"]:
        if now["type"] != "directory":
            raise ChangedSince(step, f"{path} is now a {now['type']}")
        entries = len(os.listdir(target))
        if entries:
            held = f"{entries} entr{'y' if entries == 1 else 'ies'}"
            raise ChangedSince(step, f"{path} is no longer empty: it holds {held}")
        target.rmdir()
    return {"root": str(base), "path": path, "removed": True}


# --- read ----------------------------------------------------------------------------------------


def stat(path: str, root: str | None = None) -> dict[str, Any]:
    """What is at `path`: `exists`, `type`, `sha256`, `size`, `mode` (octal text, e.g. "0644")."""
    base = _root(root)
    return {"root": str(base), "path": path, **_state(_inside(base, path, "path"))}


_PATH = Param("path", "string", "a path relative to the root")
_ROOT = Param("root", "string", "the absolute root the forward call acted in (its result's `root`)")
_STATE = "the file's state as the forward result gives it"

CONNECTOR = Connector(
    name="fs",
    description="files under a root folder",
    settings=(ROOT, _snapshots.SETTING),
    tools=(
        Tool("fs.write_file", ToolKind.FORWARD, write_file, "Write a file's text or bytes, keeping its previous bytes.",
             (_PATH, Param("content", "string", "the text (UTF-8)", required=False),
              Param("content_base64", "string", "the bytes, base64", required=False)), destructive=True),
        Tool("fs.delete", ToolKind.FORWARD, delete, "Delete a file, keeping its bytes and mode.", (_PATH,),
             destructive=True),
        Tool("fs.move", ToolKind.FORWARD, move, "Move a file to a destination that does not exist yet.",
             (Param("source", "string", "the file, relative to the root"),
              Param("destination", "string", "where it goes, relative to the root"))),
        Tool("fs.make_dir", ToolKind.FORWARD, make_dir, "Create a folder (its parent must exist).", (_PATH,)),
        Tool("fs.restore", ToolKind.COMPENSATION, restore, "Put back a file's exact previous bytes and mode.",
             (_ROOT, _PATH, Param("before", "object", _STATE), Param("after", "object", _STATE), STEP),
             destructive=True, idempotent=True),
        Tool("fs.move_back", ToolKind.COMPENSATION, move_back, "Move a moved file back where it was.",
             (_ROOT, Param("source", "string", "where the file was"), Param("destination", "string", "where it is"),
              Param("sha256", "string", "the moved file's digest"), STEP), idempotent=True),
        Tool("fs.remove_dir", ToolKind.COMPENSATION, remove_dir, "Remove a folder while it is empty.",
             (_ROOT, _PATH, STEP), destructive=True, idempotent=True),
        Tool("fs.stat", ToolKind.READ, stat, "What is at a path: exists, type, sha256, size, mode.",
             (_PATH, Param("root", "string", "an absolute root (default REVERSI_FS_ROOT)", required=False))),
    ),
)
