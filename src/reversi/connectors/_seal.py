"""Seals: a connector's forward result, signed so that its undo can tell it from a forged one.

An undo runs with the operator's authority (a rollback job, `reversi-connectors compensate`), but
the result it works from reached the journal through the agent (over HTTP an agent reports any
result it likes). So every forward tool seals its result: an HMAC-SHA256, under a key the agent does
not hold, over the tool's name, the arguments its undo needs and the result itself. A compensation
opens the seal and acts only on what it covers; an unsealed, altered or foreign result is refused
with `UntrustedResult`, and nothing is changed.

The key is `REVERSI_CONNECTOR_KEY` (at least 32 characters), else the file `seal.key` in the
connector folder (`REVERSI_CONNECTOR_DIR`), made with 32 random bytes on first use and readable by
its owner only. Every process that makes or undoes the same steps needs the same key: the connector
server the agent calls through the gateway, and the compensator of the rollbacks.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import inspect
import os
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec

from reversi.connectors import _snapshots
from reversi.connectors._base import Setting
from reversi.core.calls import current_call, current_undo
from reversi.core.json_values import JSONObjectView, JSONView, LooseJSONObject, canonical
from reversi.core.plan import compensation_key
from reversi.errors import ConfigError, UntrustedResult
from reversi.private_files import make_private_folders

__all__ = ["FIELD", "KEY", "Sealed", "key_id", "seal", "sealed", "unseal"]

KEY = Setting("REVERSI_CONNECTOR_KEY", "the secret that seals forward results (32+ characters)",
              "seal.key in REVERSI_CONNECTOR_DIR, made on first use")
FIELD = "reversi_seal"
_CALL = "reversi_call"  # in a seal's args: the run and step that made the result, when known
_VERSION = 1
_MIN_KEY = 32

P = ParamSpec("P")


def _key_file() -> Path:
    return _snapshots.connector_dir() / "seal.key"


def _key() -> bytes:
    """The sealing key: the setting, else the key file (made on first use, mode 0600)."""
    configured = os.environ.get(KEY.name)
    if configured is not None:
        if len(configured) < _MIN_KEY:
            raise ConfigError(f"{KEY.name} must be at least {_MIN_KEY} characters long")
        return configured.encode()
    path = _key_file()
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    make_private_folders(path.parent)
    # Written whole under a name of its own, then linked into place: a process that reads the key file
    # never sees it half-written, and of two processes making it at once, the first link wins.
    temporary = path.with_name(f".seal.key.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd) as source:
        text = source.read().strip()
    if len(text) < _MIN_KEY:
        raise ConfigError(f"{path} holds no sealing key (fewer than {_MIN_KEY} characters)")
    return text.encode()


def key_id(key: bytes | None = None) -> str:
    """A short name for the key in force (not the key): which key sealed a result, in messages."""
    return hashlib.sha256(b"reversi-seal-key-id:" + (key if key is not None else _key())).hexdigest()[:12]


def _mac(key: bytes, tool: str, args: JSONObjectView, result: JSONObjectView) -> str:
    body = canonical({"v": _VERSION, "tool": tool, "args": dict(args), "result": dict(result)})
    # surrogatepass: a forged result may hold a lone surrogate (JSON allows one); it must fail the MAC, not crash
    return hmac.new(key, body.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def seal(tool: str, result: JSONObjectView, args: JSONObjectView | None = None) -> LooseJSONObject:
    """`result` with its seal under `FIELD`: the tool, the arguments kept for the undo, the key's id, the MAC."""
    key = _key()
    kept = dict(args or {})
    call = current_call()
    if call is not None:  # bound to its step: reported again in another step, the undo refuses it
        kept[_CALL] = {"run_id": call.run_id, "step": call.step}
    bare = {k: v for k, v in result.items() if k != FIELD}
    return {**bare, FIELD: {"v": _VERSION, "tool": tool, "args": kept, "key": key_id(key),
                            "mac": _mac(key, tool, kept, bare)}}


@dataclass(frozen=True)
class Sealed:
    """An opened seal: what the forward call was, the arguments it kept, and its result (seal removed)."""

    tool: str
    args: LooseJSONObject
    result: LooseJSONObject


def unseal(value: JSONView, tools: Collection[str]) -> Sealed:
    """The forward result `value`, once its seal proves this connector made it with one of `tools`.

    Raises:
        UntrustedResult: no seal, a seal of another tool or key, or a result changed since it was sealed.
    """
    names = " or ".join(sorted(tools))
    seal_ = value.get(FIELD) if isinstance(value, Mapping) else None
    if not isinstance(seal_, Mapping):
        raise UntrustedResult(f"the result carries no seal: it is not a result of {names} made by this connector")
    tool, args, mac = seal_.get("tool"), seal_.get("args"), seal_.get("mac")
    version = seal_.get("v")
    if type(version) is not int or version != _VERSION:  # not True, which equals 1
        raise UntrustedResult("the result's seal is malformed")
    if not isinstance(tool, str) or not isinstance(args, Mapping) or not isinstance(mac, str) or not mac.isascii():
        raise UntrustedResult("the result's seal is malformed")
    if tool not in tools:
        raise UntrustedResult(f"the result is sealed as one of {_shown(tool)}, not of {names}")
    key = _key()
    if seal_.get("key") != key_id(key):
        raise UntrustedResult(f"the result was sealed with another key ({_shown(seal_.get('key'))}), not this"
                              f" connector's ({key_id(key)}): give the compensator the key the forward call had")
    assert isinstance(value, Mapping)
    bare = {k: v for k, v in value.items() if k != FIELD}
    if not hmac.compare_digest(_mac(key, tool, args, bare).encode(), mac.encode("utf-8", "surrogatepass")):
        raise UntrustedResult(f"the result of {tool} was changed after it was sealed")
    kept = dict(args)
    _check_step(tool, kept.pop(_CALL, None))
    return Sealed(tool, kept, bare)


def _check_step(tool: str, made_by: JSONView) -> None:
    """Refuse a result sealed to one step when the undo running is another step's (its idempotency
    key is the digest of its run, step and tool). Unbound seals, and undos run without a key (by
    the operator's own code), are not checked."""
    undo = current_undo()
    if undo is None or not isinstance(made_by, Mapping):
        return
    run_id, step = made_by.get("run_id"), made_by.get("step")
    if undo.idempotency_key != compensation_key(str(run_id), step if isinstance(step, int) else -1, undo.tool):
        raise UntrustedResult(f"the result of {tool} was made by step {_shown(step)} of {_shown(run_id)}, not by"
                              " the step being undone: a result is undone only in the step that made it")


def _shown(value: object) -> str:
    """A value from the seal as an error may quote it: short, and escaped unless printable (it came from
    whoever reported the result)."""
    text = str(value)[:40]
    return text if text.isprintable() else repr(text)


Forward = Callable[P, LooseJSONObject]


def sealed(tool: str, keep: Collection[str] = ()) -> Callable[[Forward[P]], Forward[P]]:
    """Decorate a forward tool's function so that its result comes back sealed, keeping the
    arguments named in `keep` (those given) inside the seal for the undo."""

    def decorate(fn: Forward[P]) -> Forward[P]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> LooseJSONObject:
            bound = signature.bind(*args, **kwargs)
            kept = {name: bound.arguments[name] for name in keep if bound.arguments.get(name) is not None}
            _key()  # a key that cannot be had fails the call before it changes anything, not after
            return seal(tool, fn(*args, **kwargs), kept)

        return wrapper

    return decorate
