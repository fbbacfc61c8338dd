"""Where settings come from: flags, then environment variables, then `reversi.yaml`, then defaults.

Manifests are the exception the spec names (§3): `-m`, else the config file's `manifests`, else
`REVERSI_MANIFEST` (a colon-separated list of paths).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import yaml

from reversi.core.json_values import LooseJSON, LooseJSONObject
from reversi.core.models import Mode
from reversi.core.times import parse_duration
from reversi.errors import BadInput, ConfigError
from reversi.store.factory import DEFAULT_URL, STORE_URL_FORMS, is_store_url
from reversi.store.leases import DEFAULT_LEASE_S

CONFIG_KEYS = frozenset({"db", "manifests", "kill_switch_file", "mode", "compensator_cmd", "reader_cmd", "upstreams",
                         "retention", "sensitive_keys", "follow_up_cmd", "durability"})
# `full`: a call's outcome is durable before the call returns; `intent`: only its `intended` is, and the
# outcome is committed soon after (a crash before leaves the step `intended`, unresolved).
DURABILITIES = ("full", "intent")
RETENTION_INTERVAL_S = 3600.0  # how often a server applies `retention:` (REVERSI_RETENTION_INTERVAL_S)


@dataclass(frozen=True)
class Settings:
    db: str = DEFAULT_URL
    manifests: tuple[str, ...] = ()
    kill_switch_file: str | None = None
    mode: str | None = None
    compensator_cmd: str | None = None
    reader_cmd: str | None = None
    follow_up_cmd: str | None = None  # told of each follow-up a rollback opens (JSON on stdin): an issue tracker
    upstreams: Mapping[str, LooseJSON] = field(default_factory=dict)  # each checked when the gateway starts it
    rollback_lease_s: float = DEFAULT_LEASE_S
    retention: timedelta | None = None  # prune settled runs older than this (`reversi prune`, the server)
    retention_interval_s: float = RETENTION_INTERVAL_S
    sensitive_keys: tuple[str, ...] = ()  # key names masked wherever values are shown, beside the default ones
    durability: str = "full"  # one of DURABILITIES


_MODES = tuple(m.value for m in Mode)


def _read_config(path: Path) -> LooseJSONObject:
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8")) or {}
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read the config file {path}: it is not UTF-8 text") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(f"cannot read the config file {path}: {where}{exc.problem or exc}") from exc
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    unknown = sorted(set(data) - CONFIG_KEYS, key=str)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(CONFIG_KEYS))})")
    for key, value in data.items():
        if value is not None:  # `key:` with nothing after it is the same as leaving it out
            problem = _CHECKS[key](value)
            if problem:
                raise ConfigError(f"{path}: {key} {problem}")
    return data


def _text(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, not {value!r}"
    return "is empty: give a value, or leave the key out" if not value.strip() else None


def _store_url(value: LooseJSON) -> str | None:
    problem = _text(value)
    if problem is None and not is_store_url(value):
        problem = f"must be a store URL ({STORE_URL_FORMS}), not {value!r}"
    return problem


def _mode(value: object) -> str | None:
    return None if value in _MODES else f"must be {' or '.join(_MODES)}, not {value!r}"


def durability_problem(value: object) -> str | None:
    """What is wrong with `value` as a durability (None: nothing)."""
    return None if value in DURABILITIES else f"must be {' or '.join(DURABILITIES)}, not {value!r}"


def _command(value: LooseJSON) -> str | None:
    problem = _text(value)
    if problem is None:
        try:
            shlex.split(value)
        except ValueError as exc:
            problem = f"{value!r} cannot be parsed as a command: {exc}"
    return problem


def _paths(value: object) -> str | None:
    if isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        blank = [v for v in ([value] if isinstance(value, str) else value) if not v.strip()]
        return "holds an empty path" if blank else None
    return f"must be a path or a list of paths, not {value!r}"


def _upstreams(value: object) -> str | None:
    if not isinstance(value, dict):
        return f"must be a mapping of upstream names to commands or URLs, not {value!r}"
    for name, entry in value.items():
        if not isinstance(name, str):
            return f"name {name!r} must be a string"
        if not isinstance(entry, (str, list, dict)):
            return f"{name}: expected a command, a URL, a list of words or a mapping, not {entry!r}"
    return None  # the gateway checks each entry's keys when it starts them


def _names(value: object) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() and len(v) <= 200 for v in value):
        return f"must be a list of key names such as [ssn, customer_email], not {value!r}"
    return None


def _duration(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a duration like 90d or 12h, not {value!r}"
    try:
        parse_duration(value)
    except BadInput:
        return f"must be a duration like 90d or 12h, not {value!r}"
    return None


_CHECKS = {"db": _store_url, "manifests": _paths, "kill_switch_file": _text, "mode": _mode,
           "compensator_cmd": _command, "reader_cmd": _command, "follow_up_cmd": _command, "upstreams": _upstreams,
           "retention": _duration, "sensitive_keys": _names, "durability": durability_problem}


def _mode_from_env() -> str | None:
    value = os.environ.get("REVERSI_MODE")
    problem = _mode(value) if value else None
    if problem:
        raise ConfigError(f"REVERSI_MODE {problem}")
    return value or None


def _durability(data: LooseJSONObject, explicit: str | None) -> str:
    if explicit is not None:
        problem = durability_problem(explicit)
        if problem:
            raise ConfigError(f"durability {problem}")
        return explicit
    value = os.environ.get("REVERSI_DURABILITY")
    problem = durability_problem(value) if value else None
    if problem:
        raise ConfigError(f"REVERSI_DURABILITY {problem}")
    return value or data.get("durability") or "full"


def _seconds_from_env(name: str, default: float, highest: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0.1 <= seconds <= highest:
        raise ConfigError(f"{name} must be a number of seconds from 0.1 to {highest:g}, not {value!r}")
    return seconds


def _retention(data: LooseJSONObject) -> timedelta | None:
    value = os.environ.get("REVERSI_RETENTION")
    if value:
        problem = _duration(value)
        if problem:
            raise ConfigError(f"REVERSI_RETENTION {problem}")
        return parse_duration(value)
    return parse_duration(data["retention"]) if data.get("retention") else None


def _config_path(explicit: str | None) -> Path | None:
    if explicit is not None and not explicit.strip():
        raise ConfigError("the config file's path is empty: give one, or leave it out")
    if explicit:
        path = Path(explicit)
        try:
            found = path.exists()
        except OSError as exc:  # a name too long for the file system, say
            raise ConfigError(f"cannot read the config file {explicit}: {exc.strerror or exc}") from None
        if not found:
            raise ConfigError(f"config file {explicit} does not exist")
        return path
    from_env = os.environ.get("REVERSI_CONFIG")
    if from_env:
        return _config_path(from_env)
    local = Path("reversi.yaml")
    return local if local.exists() else None


def _relative_to(base: Path, value: str) -> str:
    path = Path(value)
    return str(path if path.is_absolute() else base / path)


def _command_relative_to(base: Path, command: str | None) -> str | None:
    """A config file's command, with each word written as a relative path (`./undo.py`, `../bin/undo`)
    taken from the file's folder, as its other paths are; program names and flags stay as written."""
    if command is None:
        return None
    words = shlex.split(command)
    return shlex.join(_relative_to(base, w) if w.startswith(("./", "../")) else w for w in words)


def _db_relative_to(base: Path, url: str) -> str:
    """A config file's `db:`, with a relative SQLite path taken from the file's folder (as its other paths)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or url.startswith(prefix + "/"):
        return url
    return prefix + _relative_to(base, url.removeprefix(prefix))


def load_settings(
    *, config: str | None = None, db: str | None = None, manifests: tuple[str, ...] | list[str] = (),
    durability: str | None = None,
) -> Settings:
    """Settings for this process; arguments are the command-line flags (highest precedence).

    Raises:
        ConfigError: the config file is missing or unreadable, or has an unknown key or a value that is
            not what its key takes (the message names the file, the key and the value); REVERSI_MODE is
            not a mode, REVERSI_ROLLBACK_LEASE_S or REVERSI_RETENTION_INTERVAL_S not a number of seconds in
            range, REVERSI_RETENTION not a duration, `durability` or REVERSI_DURABILITY not one of
            DURABILITIES; or a flag is empty.
    """
    if db is not None and not db.strip():
        raise ConfigError("the store URL is empty: give one, or leave it out for the default")
    path = _config_path(config)
    data = _read_config(path) if path else {}
    base = path.parent if path else Path(".")
    env = os.environ

    listed = data.get("manifests") or ()
    file_manifests = tuple(_relative_to(base, m) for m in ([listed] if isinstance(listed, str) else listed))
    env_manifests = tuple(p for p in env.get("REVERSI_MANIFEST", "").split(":") if p)
    kill_file = env.get("REVERSI_KILL_FILE") or (
        _relative_to(base, str(data["kill_switch_file"])) if data.get("kill_switch_file") else None
    )
    return Settings(
        db=db or env.get("REVERSI_DB") or (_db_relative_to(base, data["db"]) if data.get("db") else DEFAULT_URL),
        manifests=tuple(manifests) or file_manifests or env_manifests,
        kill_switch_file=kill_file,
        mode=_mode_from_env() or data.get("mode"),
        compensator_cmd=env.get("REVERSI_COMPENSATOR_CMD") or _command_relative_to(base, data.get("compensator_cmd")),
        reader_cmd=env.get("REVERSI_READER_CMD") or _command_relative_to(base, data.get("reader_cmd")),
        follow_up_cmd=env.get("REVERSI_FOLLOW_UP_CMD") or _command_relative_to(base, data.get("follow_up_cmd")),
        upstreams=data.get("upstreams") or {},
        rollback_lease_s=_seconds_from_env("REVERSI_ROLLBACK_LEASE_S", DEFAULT_LEASE_S, 86_400),
        retention=_retention(data),
        retention_interval_s=_seconds_from_env("REVERSI_RETENTION_INTERVAL_S", RETENTION_INTERVAL_S, 604_800),
        sensitive_keys=tuple(data.get("sensitive_keys") or ()),
        durability=_durability(data, durability),
    )


def principal_from_env(explicit: str | None = None) -> str:
    """Who owns the runs this process opens: the argument, else REVERSI_PRINCIPAL, else `local`."""
    return explicit or os.environ.get("REVERSI_PRINCIPAL") or "local"


def actor_from_env(explicit: str | None, principal: str) -> str:
    """Who did an operator action: the argument, else REVERSI_ACTOR, else the principal."""
    return explicit or os.environ.get("REVERSI_ACTOR") or principal
