"""Where settings come from: flags, then environment variables, then `reversi.yaml`, then defaults.

Manifests are the exception the spec names (§3): `-m`, else the config file's `manifests`, else
`REVERSI_MANIFEST` (a colon-separated list of paths).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reversi.errors import ConfigError
from reversi.store.base import DEFAULT_URL

CONFIG_KEYS = frozenset({"db", "manifests", "kill_switch_file", "mode", "compensator_cmd", "reader_cmd", "upstreams"})


@dataclass(frozen=True)
class Settings:
    db: str = DEFAULT_URL
    manifests: tuple[str, ...] = ()
    kill_switch_file: str | None = None
    mode: str | None = None
    compensator_cmd: str | None = None
    reader_cmd: str | None = None
    upstreams: Mapping[str, Any] = field(default_factory=dict)


_TEXT_KEYS = ("db", "kill_switch_file", "mode", "compensator_cmd", "reader_cmd")


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8")) or {}
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read the config file {path}: it is not UTF-8 text") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(CONFIG_KEYS))})")
    for key in _TEXT_KEYS:
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ConfigError(f"{path}: {key} must be a string, not {data[key]!r}")
    if data.get("upstreams") is not None and not isinstance(data["upstreams"], dict):
        raise ConfigError(f"{path}: upstreams must be a mapping of names to commands")
    return data


def _config_path(explicit: str | None) -> Path | None:
    if explicit is not None and not explicit.strip():
        raise ConfigError("--config is empty: give a config file's path, or leave the flag out")
    if explicit:
        path = Path(explicit)
        if not path.exists():
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


def _db_relative_to(base: Path, url: str) -> str:
    """A config file's `db:`, with a relative SQLite path taken from the file's folder (as its other paths)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or url.startswith(prefix + "/"):
        return url
    return prefix + _relative_to(base, url.removeprefix(prefix))


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: expected a list of paths")


def load_settings(
    *, config: str | None = None, db: str | None = None, manifests: tuple[str, ...] | list[str] = ()
) -> Settings:
    """Settings for this process; arguments are the command-line flags (highest precedence).

    Raises:
        ConfigError: the config file is missing, unreadable, or has unknown keys or values of the wrong
            type; or a flag is empty.
    """
    if db is not None and not db.strip():
        raise ConfigError("--db is empty: give a store URL, or leave the flag out")
    path = _config_path(config)
    data = _read_config(path) if path else {}
    base = path.parent if path else Path(".")
    env = os.environ

    file_manifests = (
        tuple(_relative_to(base, m) for m in _string_list(data["manifests"], "manifests"))
        if "manifests" in data
        else ()
    )
    env_manifests = tuple(p for p in env.get("REVERSI_MANIFEST", "").split(":") if p)
    kill_file = env.get("REVERSI_KILL_FILE") or (
        _relative_to(base, str(data["kill_switch_file"])) if data.get("kill_switch_file") else None
    )
    return Settings(
        db=db or env.get("REVERSI_DB") or (_db_relative_to(base, data["db"]) if data.get("db") else DEFAULT_URL),
        manifests=tuple(manifests) or file_manifests or env_manifests,
        kill_switch_file=kill_file,
        mode=env.get("REVERSI_MODE") or data.get("mode"),
        compensator_cmd=env.get("REVERSI_COMPENSATOR_CMD") or data.get("compensator_cmd"),
        reader_cmd=env.get("REVERSI_READER_CMD") or data.get("reader_cmd"),
        upstreams=data.get("upstreams") or {},
    )


def principal_from_env(explicit: str | None = None) -> str:
    """Who owns the runs this process opens: the argument, else REVERSI_PRINCIPAL, else `local`."""
    return explicit or os.environ.get("REVERSI_PRINCIPAL") or "local"


def actor_from_env(explicit: str | None, principal: str) -> str:
    """Who did an operator action: the argument, else REVERSI_ACTOR, else the principal."""
    return explicit or os.environ.get("REVERSI_ACTOR") or principal
