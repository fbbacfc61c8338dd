"""What the gateway is told to do: its upstreams and flags, from the command line and the config file."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit, urlunsplit

from reversi.core.json_values import LooseJSON
from reversi.core.server_undo import SERVER_UNDO_MODES
from reversi.core.upstream_names import UPSTREAM_NAME_RULE, is_upstream_name
from reversi.errors import ConfigError

DEFAULT_CALL_TIMEOUT_S = 60.0
DEFAULT_SESSION_IDLE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class UpstreamSpec:
    """One upstream MCP server: a command to run (stdio) or a streamable-HTTP URL; `token_env` names
    the environment variable whose value the gateway sends to the URL as a bearer token."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    token_env: str | None = None
    server_undo: str | None = None  # take the undos it declares: `approve` (each waits for a person) or `trust`

    def headers(self) -> dict[str, str]:
        """The headers every request to the URL carries: the bearer token, read from the environment now."""
        token = os.environ.get(self.token_env) if self.token_env else None
        return {"Authorization": f"Bearer {token}"} if token else {}

    def describe(self) -> str:
        return self.url or shlex.join(self.command)

    def identity(self) -> dict[str, str]:
        """What the journal keeps of where a call went (no environment: it may hold credentials)."""
        if self.url is not None:
            parts = urlsplit(self.url)
            netloc = parts.netloc.rpartition("@")[2]  # no user or password
            return {"name": self.name, "url": urlunsplit(parts._replace(netloc=netloc))}
        return {"name": self.name, "command": shlex.join(self.command), "cwd": os.path.abspath(self.cwd or ".")}


@dataclass(frozen=True)
class GatewayOptions:
    """Everything `reversi-gateway` was started with, after flags, environment and config are merged."""

    upstreams: tuple[UpstreamSpec, ...]
    db: str
    manifests: tuple[str, ...] = ()
    kill_switch_file: str | None = None
    mode: str = "observe"
    durability: str = "full"  # `full` or `intent` (see `reversi.open`)
    run_id: str | None = None
    actor: str = ""
    tenant: str = ""
    environment: str = ""
    http: tuple[str, int] | None = None
    call_timeout: float = DEFAULT_CALL_TIMEOUT_S
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT_S
    config: str | None = None
    checkpoint_tool: bool = False  # offer the agent `reversi.checkpoint`


def _checked_name(name: str, where: str) -> str:
    if not is_upstream_name(name):
        raise ConfigError(f"{where}: bad upstream name {name!r}: {UPSTREAM_NAME_RULE}")
    return name


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def parse_upstream_flag(text: str) -> UpstreamSpec:
    """`NAME=COMMAND` (split like a shell would, with no shell running) or `NAME=URL`.

    Raises:
        ConfigError: no name, a bad name, or an empty command.
    """
    name, sep, rest = text.partition("=")
    if not sep:
        raise ConfigError(f"--upstream {text!r}: expected NAME=COMMAND or NAME=URL")
    _checked_name(name.strip(), "--upstream")
    rest = rest.strip()
    if _is_url(rest):
        return UpstreamSpec(name.strip(), url=rest)
    try:
        argv = tuple(shlex.split(rest))
    except ValueError as exc:
        raise ConfigError(f"--upstream {text!r}: cannot parse the command: {exc}") from exc
    if not argv:
        raise ConfigError(f"--upstream {text!r}: the command is empty")
    return UpstreamSpec(name.strip(), command=argv)


def upstreams_from_config(value: LooseJSON, base: str = ".") -> tuple[UpstreamSpec, ...]:
    """The `upstreams:` key of reversi.yaml: a mapping of name to a command line, a URL, an argv list,
    or `{command, args, env, cwd}` / `{url}`.

    Raises:
        ConfigError: the value has the wrong shape.
    """
    if not value:
        return ()
    if not isinstance(value, Mapping):
        raise ConfigError("upstreams: expected a mapping of upstream name to command or URL")
    return tuple(_upstream_entry(str(name), entry, base) for name, entry in value.items())


_KEYS = ("args", "command", "cwd", "env", "server_undo", "token_env", "url")


def _upstream_entry(name: str, entry: LooseJSON, base: str) -> UpstreamSpec:
    where = f"upstreams.{name}"
    _checked_name(name, "upstreams")
    if isinstance(entry, str):
        return parse_upstream_flag(f"{name}={entry}")
    if isinstance(entry, list) and entry and all(isinstance(a, str) for a in entry):
        return UpstreamSpec(name, command=tuple(entry))
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a command, a URL, a list of words or a mapping")
    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {str(unknown[0])[:40]!r} (known: {', '.join(_KEYS)})")
    server_undo = _server_undo(entry.get("server_undo"), f"{where}.server_undo")
    if "url" in entry:
        url = entry["url"]
        if not isinstance(url, str) or not _is_url(url):
            raise ConfigError(f"{where}.url: expected an http:// or https:// URL")
        return UpstreamSpec(name, url=url, token_env=_token_env(entry.get("token_env"), where), server_undo=server_undo)
    if "token_env" in entry:
        raise ConfigError(f"{where}.token_env: only an upstream with a url is sent a token")
    return replace(_command_entry(name, entry, base), server_undo=server_undo)


def _server_undo(value: LooseJSON, where: str) -> str | None:
    if value is None or value in SERVER_UNDO_MODES:
        return value  # type: ignore[no-any-return]
    raise ConfigError(f"{where}: expected {' or '.join(SERVER_UNDO_MODES)} (take the undos the server declares, "
                      "each waiting for a person's approval, or not)")


def with_server_undo(upstreams: Sequence[UpstreamSpec], flags: Sequence[str]) -> tuple[UpstreamSpec, ...]:
    """`upstreams`, each named by a `--server-undo NAME=MODE` flag taking the undos its server declares.

    Raises:
        ConfigError: a flag that is not NAME=MODE, or names no upstream.
    """
    modes: dict[str, str] = {}
    for flag in flags:
        name, sep, mode = flag.partition("=")
        if not sep:
            raise ConfigError(f"--server-undo {flag[:80]!r}: expected NAME={'|'.join(SERVER_UNDO_MODES)}")
        if name not in {spec.name for spec in upstreams}:
            raise ConfigError(f"--server-undo: no upstream is named {name[:40]!r}")
        modes[name] = str(_server_undo(mode, f"--server-undo {name}"))
    return tuple(replace(spec, server_undo=modes.get(spec.name, spec.server_undo)) for spec in upstreams)


def _token_env(value: object, where: str) -> str | None:
    """The name of the variable holding an HTTP upstream's bearer token, once it is set."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}.token_env: expected the name of an environment variable")
    if not os.environ.get(value):
        raise ConfigError(f"{where}.token_env: {value} is not set (it holds the bearer token for the upstream)")
    return value


def _command_entry(name: str, entry: Mapping[str, LooseJSON], base: str) -> UpstreamSpec:
    where = f"upstreams.{name}"
    command, args, env, cwd = entry.get("command"), entry.get("args", []), entry.get("env", {}), entry.get("cwd")
    if isinstance(command, str):
        words = shlex.split(command) if not args else [command]
    elif isinstance(command, list) and all(isinstance(a, str) for a in command):
        words = list(command)
    else:
        raise ConfigError(f"{where}.command: expected a command line or a list of words")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where}.args: expected a list of strings")
    if not isinstance(env, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ConfigError(f"{where}.env: expected a mapping of strings to strings")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigError(f"{where}.cwd: expected a path")
    if not words:
        raise ConfigError(f"{where}.command: the command is empty")
    return UpstreamSpec(
        name, command=(*words, *args), env=dict(env), cwd=os.path.join(base, cwd) if cwd is not None else None
    )


def parse_http(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 hosts in brackets).

    Raises:
        ConfigError: not HOST:PORT, or a port out of range.
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def unique_names(upstreams: Sequence[UpstreamSpec]) -> None:
    """Raises ConfigError when two upstreams share a name, or when there are none."""
    if not upstreams:
        raise ConfigError("no upstream: pass --upstream NAME=COMMAND (or NAME=URL), or upstreams: in the config file")
    seen: set[str] = set()
    for spec in upstreams:
        if spec.name in seen:
            raise ConfigError(f"upstream {spec.name!r} is configured twice")
        seen.add(spec.name)
