"""`reversi-gateway`: parse the flags, open the ledger, serve MCP on stdio or HTTP.

    reversi-gateway --upstream NAME=COMMAND... | --config FILE [--manifest FILE...] [--mode observe|enforce]
                    [--server-undo NAME=approve|trust]
                    [--run-id RUN] [--db URL] [--http HOST:PORT] [--call-timeout S] [--session-idle-timeout S]
    reversi-gateway operator [the same flags]
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

import anyio
from mcp.server import ServerRequestContext

from reversi.core.models import RunRecord
from reversi.core.printable import TerminalFormatter, for_terminal
from reversi.core.surfaces import Surface
from reversi.engine.config import load_settings
from reversi.engine.ledger import Ledger
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.errors import ConfigError, ReversiError
from reversi.gateway.options import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_SESSION_IDLE_TIMEOUT_S,
    GatewayOptions,
    parse_http,
    parse_upstream_flag,
    unique_names,
    upstreams_from_config,
    with_server_undo,
)

PROG = "reversi-gateway"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


class _Version(argparse.Action):
    """`--version`, worded as `reversi --version` words it, from the installed package's metadata."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        from reversi.distribution import version

        print(f"{PROG}, version {version()}")
        parser.exit()


# The flags of an agent's gateway that `reversi-gateway operator` has no use for: it serves one operator
# on stdio and journals no run. Its help leaves them out, and giving one is an error.
_AGENT_ONLY = {"http": "--http", "mode": "--mode", "durability": "--durability", "run_id": "--run-id",
               "session_idle_timeout": "--session-idle-timeout", "checkpoint_tool": "--checkpoint-tool",
               "actor": "--actor", "tenant": "--tenant", "environment": "--environment"}


def _parser(*, operator: bool = False) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=f"{PROG} operator" if operator else PROG,
        description="The operator tools (plan, rollback, approvals, halts) over MCP on stdio." if operator else
        "MCP proxy that journals every tool call of an agent in the Reversi ledger. "
        "`reversi-gateway operator ...` serves the operator tools on stdio instead.",
    )

    def agent(text: str) -> str:
        return argparse.SUPPRESS if operator else text

    parser.add_argument("--version", action=_Version, nargs=0, help="Print the version and exit.")
    parser.add_argument("--upstream", action="append", default=[], metavar="NAME=COMMAND",
                        help="An upstream MCP server: a command (stdio) or an http(s) URL. Repeatable.")
    parser.add_argument("--server-undo", action="append", default=[], metavar="NAME=approve|trust",
                        help="Take the undos upstream NAME declares for its tools (SEP-3172 recovery, "
                             "x-compensation-pair) where no manifest has an entry: each waits for a person's "
                             "approval, or not. Repeatable.")
    parser.add_argument("--config", metavar="FILE", help="Config file (reversi.yaml; its upstreams: key).")
    parser.add_argument("-m", "--manifest", action="append", default=[], metavar="FILE",
                        help="Manifest file. Repeatable.")
    parser.add_argument("--mode", choices=["observe", "enforce"],
                        help=agent("Mode of the runs opened (default observe)."))
    parser.add_argument("--durability", choices=["full", "intent"],
                        help=agent("What a call waits for before its answer is passed on: its outcome's commit "
                                   "too (full, the default), or only its intended (intent)."))
    parser.add_argument("--run-id", metavar="RUN", help=agent("stdio: continue this run, or create it under this id."))
    parser.add_argument("--db", metavar="URL", help="The store (sqlite:///PATH or postgresql://...).")
    parser.add_argument("--http", metavar="HOST:PORT", help=agent("Serve streamable HTTP at /mcp and /operator/mcp."))
    parser.add_argument("--call-timeout", type=float, default=DEFAULT_CALL_TIMEOUT_S, metavar="S",
                        help=f"Seconds to wait for an upstream's answer (default {DEFAULT_CALL_TIMEOUT_S:g}).")
    parser.add_argument("--session-idle-timeout", type=float, default=DEFAULT_SESSION_IDLE_TIMEOUT_S, metavar="S",
                        help=agent("--http: seconds an MCP session may go unused before it ends "
                                   f"(default {DEFAULT_SESSION_IDLE_TIMEOUT_S:g})."))
    parser.add_argument("--checkpoint-tool", action="store_true",
                        help=agent("Offer the agent a reversi.checkpoint tool {name}, journaled in its run."))
    parser.add_argument("--actor", default="", help=agent("stdio: the run's actor (its scope, what halts match)."))
    parser.add_argument("--tenant", default="", help=agent("stdio: the run's tenant."))
    parser.add_argument("--environment", default="", help=agent("stdio: the run's environment."))
    return parser


def parse_options(argv: Sequence[str], *, operator: bool = False) -> GatewayOptions:
    """The options for `argv` (without the `operator` word; `operator` says whether it was there).

    Raises:
        ConfigError: bad upstreams, no upstream, a bad --http or config file, a flag the operator has no use for.
    """
    parser = _parser(operator=operator)
    args = parser.parse_args(list(argv))
    given = [flag for dest, flag in _AGENT_ONLY.items() if getattr(args, dest) != parser.get_default(dest)]
    if operator and given:
        raise ConfigError(
            f"`reversi-gateway operator` serves one operator on stdio and journals no run: drop {', '.join(given)}"
            " (over HTTP the operator tools are at /operator/mcp of `reversi-gateway --http`)"
        )
    settings = load_settings(config=args.config, db=args.db, manifests=tuple(args.manifest), durability=args.durability)
    if args.upstream:
        upstreams = tuple(parse_upstream_flag(text) for text in args.upstream)
    else:
        base = str(Path(args.config).parent) if args.config else "."
        upstreams = upstreams_from_config(settings.upstreams, base)
    unique_names(upstreams)
    upstreams = with_server_undo(upstreams, args.server_undo)
    for flag, value in (("--call-timeout", args.call_timeout), ("--session-idle-timeout", args.session_idle_timeout)):
        if not 0 < value < 86_400:  # NaN too
            raise ConfigError(f"{flag} must be a positive number of seconds, under a day")
    return GatewayOptions(
        upstreams=upstreams,
        db=settings.db,
        manifests=settings.manifests,
        kill_switch_file=settings.kill_switch_file,
        mode=args.mode or settings.mode or "observe",
        durability=settings.durability,
        run_id=args.run_id,
        actor=args.actor,
        tenant=args.tenant,
        environment=args.environment,
        http=parse_http(args.http) if args.http else None,
        call_timeout=args.call_timeout,
        session_idle_timeout=args.session_idle_timeout,
        config=args.config,
        checkpoint_tool=args.checkpoint_tool,
    )


def open_ledger(options: GatewayOptions) -> Ledger:
    import reversi

    return reversi.open(options.db, manifests=options.manifests, config=options.config, durability=options.durability)


async def serve_stdio(options: GatewayOptions, ledger: Ledger, *, operator: bool) -> None:
    """One agent (or operator) on stdin/stdout until it hangs up."""
    from reversi.gateway.compensation_check import warn_of_misfits, warn_of_missing_compensations
    from reversi.gateway.operator import Operator
    from reversi.gateway.proxy import Proxy
    from reversi.gateway.relay import Relay
    from reversi.gateway.stdio import agent_stdio
    from reversi.gateway.upstream import UpstreamPool

    async with anyio.create_task_group() as tg:
        # The operator relays nothing: a compensation's upstream has no agent to ask.
        relay = None if operator else Relay(one_agent=True, wait_s=options.call_timeout)
        pool = UpstreamPool(options.upstreams, relay)
        await pool.start(tg)
        warn_of_misfits(pool, options.manifests, ledger.manifests)
        # Whoever starts a stdio gateway holds the store: it acts as the local admin, under its own name.
        door = ledger.as_local_admin(Surface.GATEWAY)

        def door_for(ctx: ServerRequestContext[Any, Any]) -> PrincipalLedger:
            return door

        if operator:
            warn_of_missing_compensations(pool, ledger.manifests)
            server = Operator(door_for, pool, options.call_timeout).server()
        else:
            run, _ = await anyio.to_thread.run_sync(
                lambda: door.open_run(
                    options.run_id,
                    actor=options.actor,
                    tenant=options.tenant,
                    environment=options.environment,
                    mode=options.mode,
                )
            )
            print(f"{PROG}: journaling run {run.id}", file=sys.stderr, flush=True)
            record = run.record

            async def run_for(ctx: ServerRequestContext[Any, Any]) -> RunRecord:
                return record

            server = Proxy(pool, door_for, run_for, options.call_timeout,
                           checkpoint_tool=options.checkpoint_tool).server()
        async with agent_stdio() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()


_UVLOOP = {"use_uvloop": True}


def main(argv: Sequence[str] | None = None) -> None:
    """The `reversi-gateway` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    operator = bool(args) and args[0] == "operator"
    if operator:
        args = args[1:]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TerminalFormatter(f"{PROG}: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        options = parse_options(args, operator=operator)
        with open_ledger(options) as ledger:
            if options.http is not None and not operator:
                from reversi.gateway.http import serve_http

                anyio.run(serve_http, options, ledger, backend_options=_UVLOOP)
            else:
                anyio.run(lambda: serve_stdio(options, ledger, operator=operator), backend_options=_UVLOOP)
    except* ReversiError as group:  # anyio's task groups wrap what ends a run in an exception group
        first: BaseException = group.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        print(f"{PROG}: error: {for_terminal(cast(ReversiError, first).message)}", file=sys.stderr)
        sys.exit(1)
    except* KeyboardInterrupt:
        sys.exit(130)
