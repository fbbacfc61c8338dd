"""`reversi plan`, `rollback` and `resolve`: undoing a run, and settling what is unknown."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from reversi.cli.context import echo, echo_json, json_option, manifest_option, state
from reversi.core import redaction
from reversi.core.surfaces import Surface

if TYPE_CHECKING:
    from reversi.cli.progress import RollbackProgress
    from reversi.core.checkpoints import RollbackScope
    from reversi.core.json_values import JSONView, LooseJSON
    from reversi.core.plan import Plan
    from reversi.core.scopes import ScopePlan, ScopeReport, Selection
    from reversi.engine.run import Run
    from reversi.errors import Interrupted

NO_RUN = "give a RUN, or a scope of runs: --actor, --key, --tenant, --label, --tool or --since"
NO_MANIFESTS = "no manifests in force: pass -m FILE, set manifests: in reversi.yaml or REVERSI_MANIFEST"
F = TypeVar("F", bound=Callable[..., Any])


def scope_options(fn: F) -> F:
    """`--to NAME` and `--after-step N`: the part of the run to plan or roll back (one of them, or neither)."""
    fn = click.option("--after-step", type=click.IntRange(min=-1), metavar="N",
                      help="Only the steps after step N (earlier steps are kept).")(fn)
    return click.option("--to", "to", metavar="NAME",
                        help="Only the steps after checkpoint NAME (earlier steps are kept).")(fn)


def selection_options(fn: F) -> F:
    """The scope of a rollback of many runs, instead of RUN (`--actor` selects only then)."""
    for option in reversed([
        click.option("--key", metavar="NAME", help="Runs of the key (principal) NAME."),
        click.option("--tenant", metavar="T", help="Runs of tenant T."),
        click.option("--label", "labels", multiple=True, metavar="K=V", help="Runs labelled K=V (repeatable)."),
        click.option("--tool", metavar="GLOB", help="Only steps of tools matching GLOB."),
        click.option("--since", metavar="TIME", help="Only steps journaled from TIME (30m, 2h, 7d or a date)."),
        click.option("--until", metavar="TIME", help="Only steps journaled until TIME."),
    ]):
        fn = option(fn)
    return fn


def _selection(run_id: str | None, actor: str | None, key: str | None, tenant: str | None,
               labels: tuple[str, ...], tool: str | None, since: str | None, until: str | None) -> Selection | None:
    """The scope of many runs the flags give; None when RUN is given (then `--actor` is not a scope)."""
    from reversi.core.scopes import Selection
    from reversi.errors import BadInput

    given = [flag for flag, value in (("--key", key), ("--tenant", tenant), ("--label", labels), ("--tool", tool),
                                      ("--since", since), ("--until", until)) if value]
    if run_id is not None:
        if given:
            raise BadInput(f"give a RUN or a scope of runs ({', '.join(given)}), not both")
        return None
    if not given and actor is None:
        raise BadInput(NO_RUN)
    return Selection.typed(actor=actor, key=key, tenant=tenant, labels=Selection.label_pairs(labels, "--label"),
                           tool=tool, since=_flag_time(since, "--since"), until=_flag_time(until, "--until"))


def _flag_time(text: str | None, flag: str) -> str | None:
    """A time flag, read (and named in its error) as the CLI's own."""
    from reversi.core.times import parse_since

    return parse_since(text, what=flag) if text else None


def _scope(to: str | None, after_step: int | None) -> dict[str, Any]:
    from reversi.errors import BadInput

    if to is not None and after_step is not None:
        raise BadInput("give --to or --after-step, not both")
    return {"to": to, "after_step": after_step}


def deadline_option(fn: F) -> F:
    """`--deadline-first`: take the steps whose undo windows close soonest first."""
    return click.option("--deadline-first", is_flag=True,
                        help="With RUN: undo the steps whose undo windows close soonest first, never one while a "
                             "step that depends on it stands.")(fn)


@click.command()
@click.argument("run_id", metavar="RUN")
@click.argument("name")
@json_option
@click.pass_context
def checkpoint(ctx: click.Context, run_id: str, name: str, as_json: bool) -> int:
    """Mark a checkpoint after the run's last step, to roll back to later (rollback --to NAME)."""
    from reversi.core.models import check_run_id

    check_run_id(run_id)
    with state(ctx).door() as door:
        made = door.checkpoint(run_id, name)
    if as_json:
        echo_json(made.to_dict())
    else:
        echo(f"checkpoint {made.name!r} after step {made.after_step} of {run_id}")
    return 0


@click.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@manifest_option
@scope_options
@click.option("--actor", help="Without RUN: runs of this actor.")
@selection_options
@deadline_option
@json_option
@click.pass_context
def plan(ctx: click.Context, run_id: str | None, manifests: tuple[str, ...], to: str | None, after_step: int | None,
         actor: str | None, key: str | None, tenant: str | None, labels: tuple[str, ...], tool: str | None,
         since: str | None, until: str | None, deadline_first: bool, as_json: bool) -> int:
    """Show what a rollback would do (a dry run), of one RUN or of a scope of runs (--actor, --key,
    --tenant, --label, --tool, --since, --until). Exit 2 when it is not fully reversible."""
    selection = _selection(run_id, actor, key, tenant, labels, tool, since, until)
    if selection is not None:
        _no_checkpoint(to, after_step, deadline_first)
        with state(ctx).door(manifests) as door:
            many = door.plan_scope(selection)
        _show(many, as_json)
        return 0 if many.fully_reversible else 2
    assert run_id is not None  # `_selection` refuses neither a RUN nor a scope
    scope = _scope(to, after_step)
    with state(ctx).door(manifests) as door:
        run = door.get_run(run_id)
        result = run.plan(**scope, deadline_first=deadline_first)
        result = redaction.plan(redaction.learn(door.masker(), run.snapshot().steps), result)
        if not door.settings.manifests and result.unmanifested:
            result = result.noting(NO_MANIFESTS)
    _show(result, as_json)
    return 0 if result.fully_reversible else 2


def _show(shown: Plan | ScopePlan | ScopeReport, as_json: bool) -> None:
    if as_json:
        echo_json(shown.to_dict())
    else:
        echo(shown.to_text())


def _no_checkpoint(to: str | None, after_step: int | None, deadline_first: bool) -> None:
    from reversi.errors import BadInput

    if to is not None or after_step is not None:
        raise BadInput("--to and --after-step are for one RUN: a scope of runs takes --since and --tool")
    if deadline_first:
        raise BadInput("--deadline-first and --reconcile are for one RUN: a scope of runs is undone newest first, "
                       "as it stands")



@click.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@manifest_option
@click.option("--compensator-cmd", metavar="CMD", help="Runs each undo: the call JSON on stdin.")
@click.option("--verify-cmd", metavar="CMD", help="Checks each undo is visible: exit 0 confirms.")
@click.option("--reader-cmd", metavar="CMD", help="Runs declared read-backs: {tool, arguments} on stdin, JSON out.")
@click.option("--retries", "attempts", type=int, default=Surface.CLI.attempts, show_default=True,
              help="Attempts per compensation, 1-10.")
@click.option("--retry-base-ms", type=click.IntRange(min=0), default=250, show_default=True,
              help="First backoff delay.")
@click.option("--retry-max-ms", type=click.IntRange(min=0), default=10_000, show_default=True,
              help="Longest backoff delay.")
@click.option("--cmd-timeout", type=float, default=30.0, show_default=True, help="Seconds each command may take.")
@click.option("--approve-compensations", is_flag=True, help="Grant every pending compensation approval.")
@click.option("--actor", help="With RUN: who is rolling back (default: REVERSI_ACTOR, else the principal); "
                               "without: runs of this actor.")
@scope_options
@selection_options
@click.option("--contain", is_flag=True, help="Without RUN: first halt the scope (and revoke --key's keys).")
@click.option("--reason", metavar="TEXT", help="With --contain: the halt's reason.")
@click.option("--by", metavar="WHO",
              help="Without RUN: who is rolling back (default: REVERSI_ACTOR, else the principal).")
@deadline_option
@click.option("--concurrency", type=int, default=1, show_default=True, metavar="N",
              help="Undo up to N independent steps at once, 1-64 (never one while a step that depends on it "
                   "stands); the commands then run side by side.")
@click.option("--reconcile", is_flag=True, help="With RUN: first settle unresolved steps from their probes (the "
                                                 "reader is --reader-cmd).")
@json_option
@click.pass_context
def rollback(ctx: click.Context, run_id: str | None, manifests: tuple[str, ...], compensator_cmd: str | None,
             verify_cmd: str | None, reader_cmd: str | None, attempts: int, retry_base_ms: int, retry_max_ms: int,
             cmd_timeout: float, approve_compensations: bool, actor: str | None, to: str | None,
             after_step: int | None, key: str | None, tenant: str | None, labels: tuple[str, ...], tool: str | None,
             since: str | None, until: str | None, contain: bool, reason: str | None, by: str | None,
             deadline_first: bool, concurrency: int, reconcile: bool, as_json: bool) -> int:
    """Undo the standing steps of one RUN, or of a scope of runs (--actor, --key, --tenant, --label, --tool,
    --since, --until), newest first. Exit 2 when the rollback is incomplete."""
    from reversi.core.backoff import Retry
    from reversi.engine.access import Access
    from reversi.engine.commands import command_check_undo, command_compensator, command_read_back
    from reversi.engine.rollback import MAX_CONCURRENCY
    from reversi.errors import BadInput

    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise BadInput(f"--concurrency must be from 1 to {MAX_CONCURRENCY}, not {concurrency}")
    selection = _selection(run_id, actor, key, tenant, labels, tool, since, until)
    _check_mode(selection, run_id, to, after_step, contain, reason, by, deadline_first or reconcile)
    scope = _scope(to, after_step)
    for flag, value in (("--compensator-cmd", compensator_cmd), ("--verify-cmd", verify_cmd),
                        ("--reader-cmd", reader_cmd)):
        if value is not None and not value.strip():
            raise BadInput(f"{flag} is empty: give a command, or leave the flag out")
    retry = Retry(attempts=attempts, base_ms=retry_base_ms, max_ms=retry_max_ms)
    if not cmd_timeout > 0:
        raise BadInput("--cmd-timeout must be a positive number of seconds")
    settings = state(ctx).settings(manifests)
    compensator_cmd = compensator_cmd or settings.compensator_cmd
    reader_cmd = reader_cmd or settings.reader_cmd
    compensate = command_compensator(compensator_cmd, cmd_timeout, what="--compensator-cmd") \
        if compensator_cmd else None
    check_undo = command_check_undo(verify_cmd, cmd_timeout, what="--verify-cmd") if verify_cmd else None
    read_back = command_read_back(reader_cmd, cmd_timeout, what="--reader-cmd") if reader_cmd else None
    if reconcile and read_back is None:
        raise BadInput("--reconcile reads with the probes' reader: pass --reader-cmd, or set reader_cmd in the config")
    if selection is not None:
        with state(ctx).door(manifests) as door, _needs_compensator():
            many = door.rollback_scope(selection, compensate, contain=contain, reason=reason, retry=retry,
                                         verify=check_undo, verifier=read_back, actor=by,
                                         approve_compensations=approve_compensations, concurrency=concurrency)
            masker = door.masker()
            shown = redaction.report(masker, many.to_dict())
            text = masker.text(many.to_text())
        if as_json:
            echo_json(shown)
        else:
            echo(text)
        return 0 if many.complete else 2
    assert run_id is not None
    with state(ctx).door(manifests) as door:
        run = door.get_run(run_id, Access.OPERATE)
        if reconcile:
            assert read_back is not None
            run.reconcile_by_probes(read_back)
        covered = run.scope(**scope)
        try:
            with _progress(run, covered, concurrency) as progress, _needs_compensator():
                report = run.rollback(compensate, retry=retry, verify=check_undo, verifier=read_back,
                                      approve_compensations=approve_compensations, actor=actor, progress=progress,
                                      deadline_first=deadline_first, concurrency=concurrency, **scope)
        except KeyboardInterrupt:
            raise _interrupted(run) from None
        masker = redaction.learn(door.masker(), run.snapshot().steps)
    if as_json:
        echo_json(redaction.report(masker, report.to_dict()))
    else:
        echo(masker.text(report.to_text(read_back_hint="pass --reader-cmd")))
    return 0 if report.complete else 2


def _check_mode(selection: Selection | None, run_id: str | None, to: str | None, after_step: int | None,
                contain: bool, reason: str | None, by: str | None, deadline_first: bool) -> None:
    """The flags of one run and those of a scope of runs are not mixed."""
    from reversi.core.models import check_run_id
    from reversi.errors import BadInput

    if selection is None:
        assert run_id is not None  # `_selection` refuses neither a RUN nor a scope
        check_run_id(run_id)
        if contain or reason is not None or by is not None:
            raise BadInput("--contain, --reason and --by are for a scope of runs: with RUN, --actor says who acts")
        return
    _no_checkpoint(to, after_step, deadline_first)
    if reason is not None and not contain:
        raise BadInput("--reason is the halt's reason: give it with --contain")


@contextlib.contextmanager
def _needs_compensator() -> Iterator[None]:
    """A rollback's ConfigError (the only one it raises: nothing to run the undo with), with the fix."""
    from reversi.errors import ConfigError

    try:
        yield
    except ConfigError as exc:
        raise ConfigError(f"{exc.message}: pass --compensator-cmd, or set compensator_cmd in reversi.yaml") from None


def _progress(run: Run, scope: RollbackScope | None,
              concurrency: int) -> AbstractContextManager[RollbackProgress | None]:
    """A progress bar when stderr is a terminal, else nothing."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    from reversi.cli.progress import RollbackProgress

    after = scope.after_step if scope is not None else -1
    return RollbackProgress(run.id, len(run.steps()) - 1 - after, after, one_at_a_time=concurrency == 1)


def _interrupted(run: Run) -> Interrupted:
    """Ctrl-C during a rollback: say which steps it left `compensating` (a re-run retries them with the same
    idempotency key)."""
    from reversi.core.models import StepStatus
    from reversi.errors import Interrupted

    left = [s.index for s in run.snapshot().steps if s.status is StepStatus.COMPENSATING]
    if not left:
        where = "no step was left compensating"
    elif len(left) == 1:
        where = f"step {left[0]} was left compensating"
    else:
        where = f"steps {', '.join(map(str, left))} were left compensating"
    return Interrupted(f"rollback interrupted: {where}; run the rollback again to finish it")


def _refuse_unrecoverable(run: Run, step: int, result: JSONView) -> None:
    """Refuse to settle a step as succeeded without what its undo needs from the result: it could never be undone."""
    from reversi.errors import BadInput

    missing = run.missing_from_result(step, result)
    if missing:
        them = "it" if len(missing) == 1 else "them"
        raise BadInput(f"step {step}'s undo needs {', '.join(missing)} from its result, which --result does not give: "
                       f"without {them} the step can never be undone. Give {them} in --result, or add --force to "
                       "settle it anyway")


@click.command()
@click.argument("run_id", metavar="RUN")
@click.argument("step", type=int)
@click.option("--status", type=click.Choice(["succeeded", "failed"]), required=True, help="What really happened.")
@click.option("--result", "result_json", metavar="JSON", help="The result found downstream (lets the step be undone).")
@click.option("--note", help="How you know (required; kept in the journal).")
@click.option("--actor", help="Who settled it (default: REVERSI_ACTOR, else the principal).")
@click.option("--force", is_flag=True, help="Settle as succeeded even without what its undo needs from --result.")
@manifest_option
@json_option
@click.pass_context
def resolve(ctx: click.Context, run_id: str, step: int, status: str, result_json: str | None, note: str | None,
            actor: str | None, force: bool, manifests: tuple[str, ...], as_json: bool) -> int:
    """Settle an unresolved (intended or uncertain) step after checking the downstream system; resolve
    it again to correct a settlement before any undo of it."""
    from reversi.core.json_values import parse_json
    from reversi.core.models import check_run_id
    from reversi.engine.access import Access
    from reversi.errors import BadInput

    check_run_id(run_id)
    if not note or not note.strip():
        raise BadInput("a note is required (--note): say how you settled the step")
    kwargs: dict[str, LooseJSON] = {}  # the parsed --result, when given
    if result_json is not None:
        kwargs["result"] = parse_json(result_json, "--result")
    with state(ctx).door(manifests) as door:
        run = door.get_run(run_id, Access.OPERATE)
        if status == "succeeded" and not force:
            _refuse_unrecoverable(run, step, kwargs.get("result"))
        settled = run.resolve(step, status, note=note, actor=actor, **kwargs)
    if as_json:
        echo_json(settled.to_dict())
    else:
        echo(f"step {step} is now {settled.status.value}")
    return 0
