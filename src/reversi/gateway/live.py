"""One upstream server started for a command that asks it something and stops it again: `reversi
manifest check --upstream`, `draft`, `drill` and `coverage`. It is started as the gateway starts
its upstreams (`reversi.gateway.upstream`), but its stderr is kept back unless it fails to start.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio

from reversi.core.tool_listing import Listing, parse_listing
from reversi.errors import BadInput, ConfigError, ReversiError
from reversi.gateway.options import UpstreamSpec
from reversi.gateway.upstream import START_TIMEOUT_S, UpstreamPool

__all__ = ["connected", "environment", "list_tools", "listing_of", "run_live", "upstream_spec"]

T = TypeVar("T")
SCRATCH = "{scratch}"


def upstream_spec(text: str, env: Mapping[str, str] | None = None, scratch: str | None = None) -> UpstreamSpec:
    """The server `--upstream` names: an http(s) URL (streamable HTTP), or a command line (stdio),
    split as a shell would with no shell running. With `scratch`, `{scratch}` in the command's words
    and in `env`'s values is that folder, and the command runs in it.

    Raises:
        BadInput: an empty command, or one that cannot be split.
    """
    text = text.strip()
    if text.startswith(("http://", "https://")):
        return UpstreamSpec("upstream", url=text)
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise BadInput(f"cannot parse the server command {text!r}: {exc}") from exc
    if not words:
        raise BadInput("the server command is empty")
    env = dict(env or {})
    if scratch is None:
        return UpstreamSpec("upstream", command=tuple(words), env=env)
    words = [word.replace(SCRATCH, scratch) for word in words]
    env = {key: value.replace(SCRATCH, scratch) for key, value in env.items()}
    return UpstreamSpec("upstream", command=tuple(words), env=env, cwd=scratch)


@asynccontextmanager
async def connected(spec: UpstreamSpec, start_timeout: float = START_TIMEOUT_S) -> AsyncIterator[UpstreamPool]:
    """The server started and its tools listed, as a pool of one (its tools keep their own names);
    stopped when the block ends.

    Raises:
        ConfigError: it could not start (its reason, and its last line on stderr).
    """
    pool = UpstreamPool((spec,))
    upstream = pool.upstreams[0]
    upstream.start_timeout = start_timeout
    async with anyio.create_task_group() as tg:
        tg.start_soon(upstream.supervise)
        await upstream.started()
        if not upstream.has_connected:
            tg.cancel_scope.cancel()
        else:
            try:
                yield pool
            finally:
                tg.cancel_scope.cancel()
    if not upstream.has_connected:
        raise ConfigError(f"the server {spec.describe()} could not start: {upstream.last_error}")


def listing_of(pool: UpstreamPool) -> Listing:
    """The tools of a pool's (first) server, as it listed them, with who it said it is."""
    upstream = pool.upstreams[0]
    info = upstream.server_info
    return parse_listing({"tools": upstream.listed}, upstream.spec.describe(),
                         info.name if info else "", info.version if info else "")


def run_live(work: Callable[[], Awaitable[T]]) -> T:
    """Run `work` on an event loop; a Reversi error raised inside a task group comes out as itself."""
    try:
        return anyio.run(work)
    except BaseExceptionGroup as group:
        raise _first_error(group) from None


def _first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    for exc in group.exceptions:
        leaf = _first_error(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if isinstance(leaf, (ReversiError, KeyboardInterrupt)):
            return leaf
    return group


async def list_tools(spec: UpstreamSpec) -> Listing:
    """Start the server, read its tools, stop it."""
    async with connected(spec) as pool:
        return listing_of(pool)


def environment(pairs: tuple[str, ...]) -> dict[str, str]:
    """`KEY=VALUE` options as a mapping.

    Raises:
        BadInput: one without `=`, or with an empty key.
    """
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"{pair!r}: expected KEY=VALUE")
        found[key.strip()] = value
    return found
