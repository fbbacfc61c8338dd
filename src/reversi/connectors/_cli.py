"""`reversi-connectors`: the connectors as a compensator, a reader, a manifest and an MCP server.

    reversi-connectors list [--json]
    reversi-connectors compensate < call.json        the call JSON of a rollback -> the result
    reversi-connectors read < request.json           {"tool", "arguments"} -> the read tool's answer
    reversi-connectors seal < forward.json           {"tool", "arguments", "result"} -> the result, sealed
    reversi-connectors manifest [NAME...]
    reversi-connectors serve [NAME...] [--http HOST:PORT]   (--http: REVERSI_CONNECTORS_TOKEN required)

Every failure is exit 1 with one line on stderr (the line a rollback journals as the error).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from contextlib import nullcontext

import click

from reversi.connectors._base import ToolKind
from reversi.connectors._errors import one_line
from reversi.connectors._registry import connectors, find_tool
from reversi.connectors._seal import seal as seal_result
from reversi.core.calls import CallId, making
from reversi.core.json_values import JSONObject, JSONView, LooseJSONObject
from reversi.distribution import NAME
from reversi.errors import BadArgument

__all__ = ["main"]


def _stdin_object(what: str) -> JSONObject:
    text = sys.stdin.read()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise BadArgument("stdin", f"expected {what} as JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise BadArgument("stdin", f"expected {what} as a JSON object")
    return value


def _print_json(value: JSONView) -> None:
    click.echo(json.dumps(value, ensure_ascii=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name=NAME, prog_name="reversi-connectors")
def cli() -> None:
    """Ready-made compensators, readers and MCP tools that make real systems reversible."""


@cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_connectors(as_json: bool) -> None:
    """Every connector, its tools (forward, compensation, read) and the settings it reads."""
    listing: list[LooseJSONObject] = [
        {"name": c.name, "description": c.description,
         **{str(kind): [tool.name for tool in c.of_kind(kind)] for kind in ToolKind},
         "settings": [{"name": s.name, "description": s.description, "default": s.default} for s in c.settings]}
        for c in connectors()
    ]
    if as_json:
        _print_json(listing)
        return
    for item in listing:
        click.echo(f"{item['name']}: {item['description']}")
        for kind in ToolKind:
            click.echo(f"  {kind + ':':14}{' '.join(item[str(kind)]) or '-'}")
        for setting in item["settings"]:
            click.echo(f"  setting       {setting['name']} (default {setting['default']}): {setting['description']}")


@cli.command()
def compensate() -> None:
    """Undo one step: the call JSON of a rollback on stdin, the compensation's result on stdout."""
    call = _stdin_object("the compensation call")
    tool = find_tool(_string(call, "tool"), ToolKind.COMPENSATION)
    args = call.get("args", {})
    if not isinstance(args, dict):
        raise BadArgument("args", "expected an object")
    step = call.get("step")
    if isinstance(step, int) and not isinstance(step, bool) and any(p.name == "step" for p in tool.params):
        args = {**args, "step": step}
    key = call.get("idempotency_key")
    _print_json(tool.invoke(args, idempotency_key=key if isinstance(key, str) else None))


@cli.command()
def read() -> None:
    """Run a read-back: {"tool", "arguments"} on stdin, the read tool's answer on stdout; with
    "call": {"run_id", "step"}, the read is made for that step (a probe, whose answer is sealed for it)."""
    request = _stdin_object('{"tool", "arguments"}')
    tool = find_tool(_string(request, "tool"), ToolKind.READ)
    made_for = CallId.of(request.get("call"))
    with making(made_for.run_id, made_for.step) if made_for else nullcontext():
        _print_json(tool.invoke(request.get("arguments") or {}))


@cli.command()
def seal() -> None:
    """Seal a forward result you vouch for: {"tool", "arguments", "result"} on stdin, the sealed result on stdout.

    For a step settled by hand (`reversi resolve` with the result read from the system itself), so
    that its compensation accepts it. It signs with the connector's key: only who holds that key can.
    """
    request = _stdin_object('{"tool", "arguments", "result"}')
    tool = find_tool(_string(request, "tool"), ToolKind.FORWARD)
    arguments = tool.check(request.get("arguments") or {})
    result = request.get("result")
    if not isinstance(result, dict):
        raise BadArgument("result", "expected the forward call's result as a JSON object")
    _print_json(seal_result(tool.name, result, arguments))


def _string(call: LooseJSONObject, name: str) -> str:
    value = call.get(name)
    if not isinstance(value, str):
        raise BadArgument(name, "expected a string" if name in call else "required")
    return value


@cli.command()
@click.argument("names", nargs=-1, metavar="[NAME...]")
def manifest(names: tuple[str, ...]) -> None:
    """Print the shipped manifest (YAML) of those connectors (all without a name), ready for -m."""
    chosen = connectors(names)
    if len(chosen) == 1:
        click.echo(chosen[0].manifest_text(), nl=False)
        return
    chosen = [c for c in chosen if c.tools]  # http without a tools file has nothing to add
    click.echo(f"# The manifest of the reversi connectors {', '.join(c.name for c in chosen)}.\nversion: 1\ntools:")
    for connector in chosen:
        entries = connector.manifest_text().split("\ntools:\n", 1)[1].rstrip()
        click.echo(f"  # --- {connector.name} ---\n{entries}\n")


@cli.command()
@click.argument("names", nargs=-1, metavar="[NAME...]")
@click.option("--http", "http", metavar="HOST:PORT",
              help="Serve streamable HTTP at /mcp instead of stdio, to requests bearing REVERSI_CONNECTORS_TOKEN.")
def serve(names: tuple[str, ...], http: str | None) -> None:
    """An MCP server offering those connectors' tools (all without a name), on stdio by default.

    Over HTTP every request must carry `Authorization: Bearer $REVERSI_CONNECTORS_TOKEN`.
    """
    import anyio

    from reversi.connectors import _mcp

    chosen = connectors(names)
    if http is None:
        anyio.run(_mcp.serve_stdio, chosen)
        return
    host, _, port = http.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise BadArgument("--http", f"expected HOST:PORT, got {http!r}")
    _mcp.serve_http(chosen, host.strip("[]"), int(port), _mcp.serving_token())


def main(argv: Sequence[str] | None = None) -> None:
    """The `reversi-connectors` console script."""
    try:
        cli.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="reversi-connectors",
                 standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as exc:  # a bad flag or a missing value: exit 1 like any bad argument
        click.echo(exc.format_message(), err=True)
        sys.exit(1)
    except (click.exceptions.Abort, KeyboardInterrupt):
        sys.exit(130)
    except Exception as exc:  # never a traceback: whatever failed is one line
        click.echo(one_line(_first(exc)), err=True)
        sys.exit(1)


def _first(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


if __name__ == "__main__":
    main()
