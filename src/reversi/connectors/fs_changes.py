"""Changes made under the fs root by something that is not an fs tool (a shell command, an agent's own
file tools), kept so that a rollback can undo them to the exact previous bytes.

    before = files_before(["notes/a.md"])      # or files_before() for everything under the root
    ...                                         # the tool runs
    changes = changes_since(before)             # sealed: what changed, each path's before and after
    restore_changes(changes)                    # the undo: every path back as it was

`files_before` keeps the state of the paths (each file's bytes as a snapshot) in a listing, itself a
snapshot, and seals a reference to it; `changes_since` compares the paths with the listing and seals
what differs. The undo checks every changed path first, and changes nothing unless each is still as
the call left it (or already as it was before). Claude Code's hooks use it (`reversi hook --files`).

A whole-root listing skips the folders `.git` (a repository's own database, which a rollback must not
rewrite under git) and `.reversi`, the connector folder and Reversi's own files, and stops at
`TREE_LIMIT` entries or `BYTES_LIMIT` bytes of files. What it skips but must not pass over in silence
is watched by stat alone: `.git`'s config, hooks and info (they run code, or change what git does),
and names UTF-8 cannot hold. A change there is `unseen`, and the undo refuses the whole step rather
than claim it. Symbolic links are listed, never followed; a change that removed one cannot be undone
(fs keeps no link targets), one that made one can; a named path that is a link is not kept at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping, Sequence

from reversi.connectors import _fs_root, _seal, _snapshots
from reversi.connectors._fs_root import ABSENT, Root, State, entry, opened_root, os_errors
from reversi.connectors._fs_states import difference, same, trusted
from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON, LooseJSONObject, canonical
from reversi.errors import BadArgument, ChangedSince, ConnectorError, UntrustedResult

__all__ = ["BYTES_LIMIT", "TREE_LIMIT", "changes_since", "changes_undone", "files_before", "restore_changes"]

TREE_LIMIT = 20_000
BYTES_LIMIT = 256 * 1024 * 1024
_SKIPPED = frozenset({".git", ".reversi"})
_WATCHED_GIT = (".git/config", ".git/hooks", ".git/info")
_BEFORE, _CHANGES = "fs.files_before", "fs.changes"
_RESTORABLE = frozenset({None, "file", "directory"})  # what an undo can put back (None: nothing there)


def files_before(paths: Sequence[str] | None = None) -> JSONObject:
    """The state of `paths` under the root (None: everything under it), each file's bytes kept; sealed.

    Raises:
        BadArgument: a path the root refuses.
        ConnectorError: the root holds more than the limits allow, or cannot be read.
    """
    chosen = None if paths is None else list(paths)
    with opened_root() as root:
        names, odd = _walked(root) if chosen is None else (_with_folders(chosen), [])
        states = _listed(root, names, chosen, keep=True)
        watched = _watched(root, odd) if chosen is None else {}
    listing = _snapshots.store(canonical(states).encode())
    return _seal.seal(_BEFORE, {"root": str(root.path), "paths": chosen, "listing": listing, "count": len(states),
                                "watched": watched})


def changes_since(before: LooseJSON) -> JSONObject:
    """What changed under the root since `files_before` answered `before`: a sealed `changes` list of
    `{path, before, after}`, shallowest path first.

    Raises:
        UntrustedResult: `before` is not what this connector's `files_before` sealed.
        BadArgument: it was made in another root.
    """
    made = trusted(before, (_BEFORE,))
    kept = json.loads(_snapshots.load(made["listing"]))
    with opened_root() as root:
        paths = made["paths"]
        names, odd = _walked(root) if paths is None else (_with_folders(paths), [])
        now = _listed(root, names, paths, keep=False)
        watched = _watched(root, odd) if paths is None else {}
    changes = [{"path": path, "before": kept.get(path, dict(ABSENT)), "after": now.get(path, dict(ABSENT))}
               for path in sorted(kept.keys() | now.keys(), key=_depth_first)
               if _changed(kept.get(path, ABSENT), now.get(path, ABSENT))]
    was = made.get("watched") or {}
    unseen = sorted(name for name in was.keys() | watched.keys() if was.get(name) != watched.get(name))
    return _seal.seal(_CHANGES, {"root": str(root.path), "changes": changes, "unseen": unseen})


def restore_changes(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Put every path the step changed back as it was: files to their exact bytes and mode, folders
    made again, what the step made removed. Safe to repeat: what is already back is left alone.

    `result` is the sealed `changes` of the step being undone (`$result.files` of a Claude Code step).

    Raises:
        UntrustedResult: `result` is not a `changes` this connector sealed.
        BadArgument: the step acted in another root.
        ChangedSince: a path is neither as the step left it nor as it was before (nothing is changed).
        ConnectorError: the step removed a symbolic link or a special file, which fs cannot make again.
    """
    made = trusted(result, (_CHANGES,))
    changes = made["changes"]
    if made.get("unseen"):
        raise ConnectorError(f"the call also changed {', '.join(made['unseen'])}, which fs does not keep: nothing"
                             " was undone; undo it by hand")
    for change in changes:
        if set(change["path"].split("/")) & _SKIPPED:
            raise UntrustedResult(f"{change['path'][:80]!r} is in a folder fs never keeps: not a change it sealed")
    with opened_root() as root:
        pending = [change for change in changes if _pending(root, change, step)]
        _only_what_it_made(root, pending, step)
        for change in sorted(pending, key=_depth_first, reverse=True):  # what the step made: deepest first
            if change["after"]["exists"] and (not change["before"]["exists"] or _kind_changed(change)):
                _remove(root, change, step)
        for change in sorted(pending, key=_depth_first):  # what it removed or rewrote: folders first
            if change["before"]["exists"]:
                _put_back(root, change, step)
    return {"root": str(root.path), "restored": [change["path"] for change in pending]}


def changes_undone(result: JSONObjectView) -> JSONObject:
    """Whether every path the step changed is as it was before (the read-back of `restore_changes`):
    `undone`, and the paths that are not yet (`left`)."""
    changes = trusted(result, (_CHANGES,))["changes"]
    with opened_root() as root:
        left = [change["path"] for change in changes if _changed(_state(root, change["path"]), change["before"])]
    return {"root": str(root.path), "undone": not left, "left": left}


# --- listing -------------------------------------------------------------------------------------


def _listed(root: Root, names: list[str], named: list[str] | None, *, keep: bool) -> dict[str, State]:
    """Each path's state, a file's bytes kept as a snapshot with `keep`; `named`: the paths the call
    named (None: `names` are what the walk found), whose absence is listed too."""
    states: dict[str, State] = {}
    total = 0
    for relative in names:
        try:
            with entry(root, relative, "path", reach=False) as found, os_errors(relative):
                if found.folder is None and not found.missing:
                    raise BadArgument("path", found.problem)
                now, data = _fs_root.state(found, BYTES_LIMIT - total)
        except BadArgument:
            if named is not None:
                raise
            continue  # Reversi's own files and the connector folder are never listed
        if named is not None and relative in named and now["type"] == "symlink":
            raise BadArgument("path", f"{relative!r} is a symbolic link: fs does not follow it, so what a write"
                                      " through it changes cannot be kept")
        if data is not None:
            total += len(data)
            if keep:
                now["snapshot"] = _snapshots.store(data)
        if now["exists"] or named is not None:
            states[relative] = now
    return states


def _with_folders(paths: list[str]) -> list[str]:
    """The paths and the folders leading to them (a tool that writes a file may make its folders too)."""
    named: dict[str, None] = {}
    for path in paths:
        parts = path.split("/") if isinstance(path, str) else [path]
        named.update(("/".join(parts[:depth]), None) for depth in range(1, len(parts)))
        named[path] = None
    return list(named)


def _watched(root: Root, odd: list[str]) -> dict[str, str]:
    """For what the listing leaves out but a rollback must not pass over in silence, a digest of the names,
    sizes, modes and times in it: `.git`'s configuration, hooks and info (what runs code or changes what
    git does), and `odd`, the names under the root that UTF-8 cannot hold (fs cannot name them)."""
    found: dict[str, str] = {}
    for part in _WATCHED_GIT:
        digest = _stat_digest(root, part)
        if digest is not None:
            found[part] = digest
    if odd:
        found["names UTF-8 cannot hold"] = hashlib.sha256(b"\n".join(map(os.fsencode, odd))).hexdigest()
    return found


def _stat_digest(root: Root, relative: str) -> str | None:
    """A digest of what is at `relative` (a file, or a folder and everything in it), by stat alone."""
    digest = hashlib.sha256()
    try:
        info = os.stat(relative, dir_fd=root.fd, follow_symlinks=False)
    except OSError:
        return None
    digest.update(f"{info.st_mode}:{info.st_size}:{info.st_mtime_ns}".encode())
    if stat.S_ISDIR(info.st_mode):
        try:
            fd = os.open(relative, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root.fd)
        except OSError:
            return "unreadable"
        try:
            for folder, folders, files, at in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                folders.sort()
                for entry_name in sorted((*folders, *files)):
                    seen = os.stat(entry_name, dir_fd=at, follow_symlinks=False)
                    digest.update(os.fsencode(os.path.join(folder, entry_name))
                                  + f":{seen.st_mode}:{seen.st_size}:{seen.st_mtime_ns}\n".encode())
        finally:
            os.close(fd)
    return digest.hexdigest()


def _utf8(name: str) -> bool:
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def _walked(root: Root) -> tuple[list[str], list[str]]:
    """Every path under the root, links not followed, skipped folders left out; and apart, the names
    UTF-8 cannot hold (fs cannot name them)."""
    found: list[str] = []
    odd: list[str] = []
    try:
        for folder, folders, files, _ in os.fwalk(".", dir_fd=root.fd, follow_symlinks=False):
            folders[:] = sorted(name for name in folders if name not in _SKIPPED)
            for name in sorted((*folders, *files)):
                path = os.path.normpath(os.path.join(folder, name))
                (found if _utf8(path) else odd).append(path)
            if len(found) > TREE_LIMIT:
                raise ConnectorError(f"{root.path} holds over {TREE_LIMIT} files and folders: too many to keep")
    except OSError as exc:
        raise ConnectorError(f"{root.path} cannot be listed: {exc.strerror or exc}") from None
    return found, odd


def _state(root: Root, relative: str) -> State:
    with entry(root, relative, "path", reach=False) as found, os_errors(relative):
        if found.folder is None and not found.missing:
            return {**ABSENT, "exists": True, "type": "unreachable"}
        return _fs_root.state(found)[0]


def _changed(a: State, b: State) -> bool:
    """Whether two states differ as an undo sees it (a folder's mode is not kept)."""
    if a.get("type") == b.get("type") == "directory":
        return False
    return not same(a, b)


def _kind_changed(change: Mapping[str, LooseJSON]) -> bool:
    return bool(change["before"]["type"] != change["after"]["type"])


def _depth_first(item: str | Mapping[str, LooseJSON]) -> tuple[int, str]:
    path = item if isinstance(item, str) else str(item["path"])
    return path.count("/"), path


# --- undo ----------------------------------------------------------------------------------------


def _pending(root: Root, change: Mapping[str, LooseJSON], step: int | None) -> bool:
    """Whether the change still needs undoing; refuses one that cannot be, or that something changed since."""
    path, before, after = change["path"], change["before"], change["after"]
    now = _state(root, path)
    if not _changed(now, before):
        return False
    if _changed(now, after):
        raise ChangedSince(step, difference(path, now, after))
    if before["type"] not in _RESTORABLE:
        raise ConnectorError(f"{path} was a {before['type']} before the step, which fs cannot make again")
    return True


def _only_what_it_made(root: Root, pending: list[LooseJSONObject], step: int | None) -> None:
    """Refuse, before anything is changed, a folder the step made that now holds what the step did not."""
    removed = {c["path"] for c in pending if c["after"]["exists"] and not c["before"]["exists"]}
    for change in pending:
        path = change["path"]
        if change["after"]["type"] == "directory" and path in removed:
            with entry(root, path, "path", reach=False) as found, os_errors(path):
                if found.folder is None:
                    continue
                try:
                    fd = os.open(found.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=found.folder)
                except FileNotFoundError:
                    continue
                try:
                    held = os.listdir(fd)
                finally:
                    os.close(fd)
            others = [name for name in held if f"{path}/{name}" not in removed]
            if others:
                raise ChangedSince(step, f"{path} holds {others[0][:80]!r}, which the step did not make")


def _remove(root: Root, change: Mapping[str, LooseJSON], step: int | None) -> None:
    path = change["path"]
    with entry(root, path, "path", reach=False) as found, os_errors(path):
        if found.folder is None:
            raise ChangedSince(step, f"the folder of {path} is no longer reachable")
        if change["after"]["type"] != "directory":
            _fs_root.unlink(found)
        elif _fs_root.remove_folder(found):
            raise ChangedSince(step, f"{path} holds something the step did not make")


def _put_back(root: Root, change: Mapping[str, LooseJSON], step: int | None) -> None:
    path, before = change["path"], change["before"]
    with entry(root, path, "path", reach=False) as found, os_errors(path):
        if found.folder is None:
            raise ChangedSince(step, f"the folder of {path} is no longer reachable")
        if before["type"] == "directory":
            _fs_root.make_folder(found)
        else:
            _fs_root.replace(found, _snapshots.load(before["snapshot"], before["size"]), int(before["mode"], 8))
