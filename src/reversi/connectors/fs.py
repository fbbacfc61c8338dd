"""The `fs` connector: files under a root folder, each change undoable to the exact previous bytes and mode.

The root is the operator's: `REVERSI_FS_ROOT` (default: the working directory), for the forward
tools, the undos and `fs.stat` alike; no argument names another. Paths are relative to it and walked
without following any symbolic link (`reversi.connectors._fs_root`). Before a file changes, its bytes
are kept as a snapshot (`reversi.connectors._snapshots`), found again by digest. Each forward result
is sealed (`reversi.connectors._seal`): its undo takes the whole result, acts only on what the seal
covers, and only while the file is still as the forward call left it.
"""

from __future__ import annotations

import base64
import binascii

from reversi.connectors import _fs_root, _seal, _snapshots, fs_changes
from reversi.connectors._base import STEP, Connector, Param, Tool, ToolKind
from reversi.connectors._fs_root import ABSENT, ROOT, Entry, State, entry, opened_root, os_errors
from reversi.connectors._fs_states import describe, difference, same, trusted
from reversi.core.json_values import JSONObject, JSONObjectView
from reversi.errors import BadArgument, ChangedSince

__all__ = ["CONNECTOR", "delete", "make_dir", "move", "move_back", "remove_dir", "restore", "stat", "write_file"]


# --- states ---------------------------------------------------------------------------------------


def _a_file(state: State, relative: str, argument: str) -> None:
    if state["exists"] and state["type"] != "file":
        what = "a symbolic link, which fs refuses" if state["type"] == "symlink" else f"a {state['type']}"
        raise BadArgument(argument, f"{relative!r} is {what}, not a file")


def _kept(found: Entry, argument: str) -> State:
    """The file's state before a change, its bytes kept as a snapshot (an absent file has none)."""
    before, data = _fs_root.state(found)
    _a_file(before, found.relative, argument)
    before["snapshot"] = _snapshots.store(data) if data is not None else None
    return before


def _content(content: str | None, content_base64: str | None) -> bytes:
    if (content is None) == (content_base64 is None):
        raise BadArgument("content", "give exactly one of content and content_base64")
    if content is not None:
        try:
            return content.encode("utf-8")
        except UnicodeEncodeError:
            raise BadArgument("content", "not text that UTF-8 can hold (a lone surrogate)") from None
    try:
        return base64.b64decode(content_base64 or "", validate=True)
    except binascii.Error as exc:
        raise BadArgument("content_base64", f"not base64: {exc}") from exc


# --- forward tools -----------------------------------------------------------------------------


@_seal.sealed("fs.write_file")
def write_file(path: str, content: str | None = None, content_base64: str | None = None) -> JSONObject:
    """Write a file (text in `content`, or bytes in `content_base64`), keeping its previous bytes.

    Raises:
        BadArgument: not exactly one of the contents, bad base64, or a path the root refuses.
    """
    data = _content(content, content_base64)
    with opened_root() as root, entry(root, path, "path") as found, os_errors(path):
        before = _kept(found, "path")
        after = _fs_root.replace(found, data, int(before["mode"], 8) if before["exists"] else None)
    return {"root": str(root.path), "path": path, "before": before, "after": after}


@_seal.sealed("fs.delete")
def delete(path: str) -> JSONObject:
    """Delete a file, keeping its bytes and mode.

    Raises:
        BadArgument: no file there, or a path the root refuses.
    """
    with opened_root() as root, entry(root, path, "path") as found, os_errors(path):
        before = _kept(found, "path")
        if not before["exists"]:
            raise BadArgument("path", f"{path!r}: no such file")
        _fs_root.unlink(found)
    return {"root": str(root.path), "path": path, "before": before, "after": dict(ABSENT)}


@_seal.sealed("fs.move")
def move(source: str, destination: str) -> JSONObject:
    """Move (rename) a file inside the root; the destination must not exist yet.

    Raises:
        BadArgument: no file at the source, something at the destination, or a path the root refuses.
    """
    with (opened_root() as root, entry(root, source, "source") as src,
          entry(root, destination, "destination") as dst, os_errors(source)):
        moved, data = _fs_root.state(src)
        if not moved["exists"]:
            raise BadArgument("source", f"{source!r}: no such file")
        _a_file(moved, source, "source")
        if _fs_root.state(dst)[0]["exists"] or not _fs_root.move_entry(src, dst, data or b"", int(moved["mode"], 8)):
            raise BadArgument("destination", f"{destination!r} already exists")
    return {"root": str(root.path), "source": source, "destination": destination,
            "sha256": moved["sha256"], "size": moved["size"], "mode": moved["mode"]}


@_seal.sealed("fs.make_dir")
def make_dir(path: str) -> JSONObject:
    """Create one folder (its parent must exist).

    Raises:
        BadArgument: something is already there, no parent folder, or a path the root refuses.
    """
    with opened_root() as root, entry(root, path, "path") as found, os_errors(path):
        if not _fs_root.make_folder(found):
            raise BadArgument("path", f"{path!r} already exists")
        made = _fs_root.state(found)[0]
    return {"root": str(root.path), "path": path, "mode": made["mode"] if made["type"] == "directory" else None}


# --- compensations -----------------------------------------------------------------------------


def _now(found: Entry, step: int | None) -> tuple[State, bytes | None]:
    """What is at the entry now, and a file's bytes; absent when its folder is gone. A folder that
    became a link or a file is a change since the step."""
    if found.folder is None and not found.missing:
        raise ChangedSince(step, found.problem)
    return _fs_root.state(found)


def _reachable(found: Entry, step: int | None) -> Entry:
    if found.folder is None:
        raise ChangedSince(step, f"the folder of {found.relative} no longer exists")
    return found


def restore(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Put back exactly what was at the path before the step (bytes and mode), or no file if none was.

    `result` is the whole sealed result of the fs.write_file or fs.delete being undone. Safe to
    repeat: when the file is already as it was before, it does nothing and answers the same.

    Raises:
        UntrustedResult: `result` is not a result this connector sealed.
        BadArgument: the step acted in another root.
        ChangedSince: the file is no longer as the step left it.
        ConnectorError: the snapshot is missing or damaged.
    """
    made = trusted(result, ("fs.write_file", "fs.delete"))
    path, before, after = made["path"], made["before"], made["after"]
    with opened_root() as root, entry(root, path, "path", reach=False) as found, os_errors(path):
        now = _now(found, step)[0]
        if not same(now, before):
            if not same(now, after):
                raise ChangedSince(step, difference(path, now, after))
            if before["exists"]:
                data = _snapshots.load(before["sha256"], before["size"])
                _fs_root.replace(_reachable(found, step), data, int(before["mode"], 8))
            else:
                _fs_root.unlink(found)
    restored = {key: before.get(key) for key in ("exists", "sha256", "mode")}
    return {"root": str(root.path), "path": path, "restored": restored}


def move_back(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Move the file back from the destination to the source, if it is still the file the step moved.

    `result` is the whole sealed result of the fs.move being undone.

    Raises:
        UntrustedResult: `result` is not a result this connector sealed.
        BadArgument: the step acted in another root.
        ChangedSince: the destination holds other bytes or nothing, or the source was taken since.
    """
    made = trusted(result, ("fs.move",))
    source, destination, sha256 = made["source"], made["destination"], made["sha256"]
    with (opened_root() as root, entry(root, source, "source", reach=False) as src,
          entry(root, destination, "destination", reach=False) as dst, os_errors(destination)):
        answer = {"root": str(root.path), "source": source, "destination": destination, "sha256": sha256}
        at_src, (at_dst, data) = _now(src, step)[0], _now(dst, step)
        if at_src["sha256"] == sha256 and not at_dst["exists"]:
            return answer
        moved = {"exists": True, "type": "file", "sha256": sha256, "mode": at_dst["mode"]}
        if not same(at_dst, moved):
            raise ChangedSince(step, difference(destination, at_dst, moved))
        if at_src["exists"]:
            raise ChangedSince(step, f"{source} exists again ({describe(at_src)})")
        if not _fs_root.move_entry(dst, _reachable(src, step), data or b"", int(at_dst["mode"], 8)):
            raise ChangedSince(step, f"{source} exists again")
    return answer


def remove_dir(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Remove the folder the step made, only while it is empty; a folder already gone is fine.

    `result` is the whole sealed result of the fs.make_dir being undone.

    Raises:
        UntrustedResult: `result` is not a result this connector sealed.
        BadArgument: the step acted in another root.
        ChangedSince: the folder holds something now, or a file took its place.
    """
    path = trusted(result, ("fs.make_dir",))["path"]
    with opened_root() as root, entry(root, path, "path", reach=False) as found, os_errors(path):
        now = _now(found, step)[0]
        if now["exists"]:
            if now["type"] != "directory":
                raise ChangedSince(step, f"{path} is now a {now['type']}")
            entries = _fs_root.remove_folder(found)
            if entries:
                held = f": it holds {entries} entr{'y' if entries == 1 else 'ies'}" if entries > 0 else ""
                raise ChangedSince(step, f"{path} is no longer empty{held}")
    return {"root": str(root.path), "path": path, "removed": True}


# --- read ----------------------------------------------------------------------------------------


def stat(path: str) -> JSONObject:
    """What is at `path` under the root: `exists`, `type`, `sha256`, `size`, `mode` (octal text, "0644").

    Raises:
        BadArgument: a path the root refuses: a symbolic link on the way or at the end.
    """
    with opened_root() as root, entry(root, path, "path", reach=False) as found, os_errors(path):
        if found.folder is None and not found.missing:
            raise BadArgument("path", found.problem)
        now = _fs_root.state(found)[0]
    if now["type"] == "symlink":
        raise BadArgument("path", f"{path!r} is a symbolic link, which fs refuses")
    return {"root": str(root.path), "path": path, **now}


_PATH = Param("path", "string", "a path relative to the root")
_RESULT = Param("result", "object", "the forward call's whole result, as it returned it, seal included ($result)")

CONNECTOR = Connector(
    name="fs",
    description="files under a root folder",
    settings=(ROOT, _snapshots.SETTING, _seal.KEY),
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
             (_RESULT, STEP), destructive=True, idempotent=True),
        Tool("fs.move_back", ToolKind.COMPENSATION, move_back, "Move a moved file back where it was.",
             (_RESULT, STEP), idempotent=True),
        Tool("fs.remove_dir", ToolKind.COMPENSATION, remove_dir, "Remove a folder while it is empty.",
             (_RESULT, STEP), destructive=True, idempotent=True),
        Tool("fs.restore_changes", ToolKind.COMPENSATION, fs_changes.restore_changes,
             "Put back every path a shell command or an agent's file tool changed.", (_RESULT, STEP),
             destructive=True, idempotent=True),
        Tool("fs.changes_undone", ToolKind.READ, fs_changes.changes_undone,
             "Whether every path a step changed is as it was before.", (_RESULT,)),
        Tool("fs.stat", ToolKind.READ, stat, "What is at a path: exists, type, sha256, size, mode.", (_PATH,)),
    ),
)
