"""Stopping new calls: halts in the store (scoped, seen by every process) and the kill file."""

from __future__ import annotations

import uuid
from pathlib import Path

from reversi.core.models import EventType, Halt, HaltScope, check_id
from reversi.errors import BadInput, ConfigError, NotFound
from reversi.store.base import Store

KILL_FILE_HELP = "no kill file configured: set REVERSI_KILL_FILE or kill_switch_file: in reversi.yaml"


def add_halt(store: Store, reason: str, scope: HaltScope, by: str, principal: str) -> Halt:
    """Stop every new call that matches `scope` (all calls when it names nothing); `by` is who says
    they added it, `principal` who they are authenticated as.

    Raises:
        BadInput: an empty reason, or a scope part that is empty (it would match nothing).
    """
    if not reason or not reason.strip():
        raise BadInput("a halt needs a reason")
    for part, value in scope.to_dict().items():
        if not value.strip():
            raise BadInput(f"the halt's {part} is empty: leave it out to halt every {part}")
    halt_id = f"halt_{uuid.uuid4()}"
    with store.write() as q:
        data = {"reason": reason, "scope": scope.to_dict(), "principal": principal}
        at = q.append_system(EventType.HALT_ADDED, by, halt_id, data, scope.tenant or "")
    return Halt(halt_id, reason, scope, by, at, principal)


def list_halts(store: Store, tenant: str | None = None) -> list[Halt]:
    """The active halts; with `tenant`, only those scoped to exactly that tenant."""
    with store.read() as q:
        return q.active_halts(tenant=tenant)


def lift_halts(store: Store, halt_id: str | None, by: str, tenant: str | None = None, *,
               principal: str) -> int:
    """Lift one halt, or all of them when `halt_id` is None; returns how many were lifted. With
    `tenant`, only halts scoped to exactly that tenant are seen. `by` and `principal` as for `add_halt`.

    Raises:
        BadInput: `halt_id` does not have the form of a halt id.
        NotFound: `halt_id` names no active halt (of `tenant`).
    """
    if halt_id is not None:
        check_id("halt", halt_id)
    with store.write() as q:
        q.lock_name("system_events")  # two concurrent "lift all" must not both lift the same halts
        active = {h.halt_id for h in q.active_halts(tenant=tenant)}
        if halt_id is not None and halt_id not in active:
            raise NotFound(f"no active halt {halt_id}")
        targets = [halt_id] if halt_id is not None else sorted(active)
        for target in targets:
            q.append_system(EventType.HALT_LIFTED, by, target, {"principal": principal})
    return len(targets)


def _kill_path(kill_file: str | None) -> Path:
    if not kill_file:
        raise ConfigError(KILL_FILE_HELP)
    return Path(kill_file)


def _unusable(path: Path, exc: OSError) -> ConfigError:
    return ConfigError(f"kill file {path}: {exc.strerror or exc}")


def kill_switch_on(kill_file: str | None, reason: str) -> Path:
    """Create the kill file with `reason`.

    Raises:
        BadInput: the reason is not valid Unicode text (checked before the file is touched).
        ConfigError: no kill file configured, its directory does not exist (a mistyped path must not
            make one: the processes watching the real path would never see the file), or it cannot be
            written there.
    """
    path = _kill_path(kill_file)
    text = reason.strip()
    try:
        data = (text + "\n").encode() if text else b""
    except UnicodeEncodeError:
        raise BadInput("the reason is not valid Unicode text") from None
    if not path.parent.is_dir():
        raise ConfigError(f"kill file {path}: the directory {path.parent} does not exist")
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise _unusable(path, exc) from None
    return path


def kill_switch_off(kill_file: str | None) -> bool:
    """Remove the kill file; True when it was there.

    Raises:
        ConfigError: no kill file configured, or it cannot be removed.
    """
    path = _kill_path(kill_file)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _unusable(path, exc) from None
    return True


def kill_switch_status(kill_file: str | None) -> tuple[Path, str | None]:
    """The kill file's path and its reason (`""` when empty), or None when it is off.

    Raises:
        ConfigError: no kill file configured, or it cannot be read.
    """
    path = _kill_path(kill_file)
    try:
        return path, read_kill_file(path)
    except OSError as exc:
        raise _unusable(path, exc) from None


def read_kill_file(path: Path) -> str | None:
    """The reason a kill file gives (`""` when it is empty; bytes that are not UTF-8 show as U+FFFD),
    or None when there is no such file.

    Raises:
        OSError: it is there but cannot be read.
    """
    try:
        return path.read_bytes().decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return None
