"""`reversi`: the operator's command line. Errors become output here, and only here.

Exit codes: 0 done (fully reversible, complete), 2 done but not fully (not reversible, incomplete),
1 an error (`reversi: error: MESSAGE` on stderr, never a traceback for a user's mistake).
Commands import the engine only when they run, so `reversi --help` starts fast.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from reversi.cli.context import CliState, echo, echo_json
from reversi.cli.groups import LazyGroup
from reversi.distribution import NAME

COMMANDS = {
    "runs": "reversi.cli.runs:runs",
    "show": "reversi.cli.runs:show",
    "export": "reversi.cli.runs:export",
    "prune": "reversi.cli.prune:prune",
    "erase": "reversi.cli.erase:erase",
    "plan": "reversi.cli.rollback:plan",
    "rollback": "reversi.cli.rollback:rollback",
    "resolve": "reversi.cli.rollback:resolve",
    "reconcile": "reversi.cli.reconcile:reconcile",
    "follow-ups": "reversi.cli.follow_ups:follow_ups",
    "checkpoint": "reversi.cli.rollback:checkpoint",
    "halt": "reversi.cli.stopping:halt",
    "kill-switch": "reversi.cli.stopping:kill_switch",
    "approvals": "reversi.cli.approvals:approvals",
    "manifest": "reversi.cli.manifest:manifest",
    "demo": "reversi.cli.demo:demo",
    "keys": "reversi.cli.keys:keys",
    "doctor": "reversi.cli.doctor:doctor",
    "completion": "reversi.cli.completion:completion",
    "hook": "reversi.cli.hook:hook",
}


GLOBAL_OPTIONS = ("--db", "--config")


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", metavar="URL", help="Store URL (default: REVERSI_DB, reversi.yaml, sqlite:///.reversi/reversi.db).")
@click.option("--config", metavar="FILE", help="Config file (default: REVERSI_CONFIG, else ./reversi.yaml).")
@click.version_option(package_name=NAME, prog_name="reversi")
@click.pass_context
def cli(ctx: click.Context, db: str | None, config: str | None) -> None:
    """Journal an agent's side-effecting calls; plan and roll back its runs."""
    for flag, value in (("--db", db), ("--config", config)):
        if value is not None and not value.strip():
            raise click.UsageError(f"{flag} is empty: give a value, or leave the flag out", ctx)
    ctx.obj = CliState(db=db, config=config)


def _one_line(message: str) -> str:
    """A message of several lines (PyYAML's, psycopg's, a manifest's problems) as one line."""
    out = ""
    for line in (part.strip() for part in message.splitlines()):
        if line:
            out += line if not out else (" " if out.endswith(":") else "; ") + line
    return out


def _fail(message: str, code: int = 1, *, kind: str = "error", as_json: bool = False) -> int:
    """Say what went wrong in one line on stderr; with `--json`, also as the HTTP API's error object on stdout."""
    line = _one_line(message)
    if as_json:
        echo_json({"error": {"code": kind, "message": line}})
    echo(f"reversi: error: {line}", err=True)
    return code


def _wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asked for JSON (`--json` before any `--`), even if parsing it failed."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def _usage_message(exc: click.UsageError) -> str:
    hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
    if isinstance(exc, click.NoSuchOption) and exc.option_name in GLOBAL_OPTIONS and exc.ctx is not None \
            and exc.ctx.parent is not None:
        return (f"{exc.option_name} is a global option: put it before the command "
                f"(reversi {exc.option_name} VALUE {exc.ctx.info_name} ...)")
    return exc.format_message() + hint


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI and exit with its code."""
    from reversi.errors import ReversiError

    # A name that came in as bytes that are not UTF-8 (a file's, from argv) goes out as those bytes,
    # as other Unix tools print it, even where the locale made stdout strict.
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="surrogateescape")
    args = list(argv) if argv is not None else sys.argv[1:]
    as_json = _wants_json(args)
    try:
        result = cli.main(args=args, prog_name="reversi", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except click.exceptions.Exit as done:
        code = done.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:  # `reversi` (or `reversi halt`) alone: its help,
        echo(exc.ctx.get_help(), err=True)     # as no command ran (exit 2 means "done, not fully")
        code = 1
    except click.UsageError as exc:
        code = _fail(_usage_message(exc), kind="bad_input", as_json=as_json)
    except click.ClickException as exc:
        code = _fail(exc.format_message(), kind="bad_input", as_json=as_json)
    except click.Abort as exc:  # click turns Ctrl-C into Abort: exit as an interrupted program does
        code = 130 if isinstance(exc.__cause__, KeyboardInterrupt) else _fail("aborted", as_json=as_json)
    except ReversiError as exc:
        code = _fail(exc.message, exc.exit_code, kind=exc.code, as_json=as_json)
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (`| head`): not an error worth a traceback
        code = 0
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
