"""`reversi demo`: an agent's run journaled, planned, settled by an operator and rolled back, in one folder.

Everything happens for real, on a small scale: the run is journaled in the folder's default store
(`.reversi/reversi.db`), the agent's calls change a stand-in world (`.reversi/demo/world.json` and a
real file under `demo-output/`), and the rollback runs the bundled compensator and reader as
external commands, exactly as `reversi rollback --compensator-cmd ... --reader-cmd ...` would.
"""

from __future__ import annotations

import shlex
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import reversi
from reversi.demo.world import OUTPUT_DIR, World
from reversi.engine.commands import command_compensator, command_reader
from reversi.engine.config import load_settings
from reversi.errors import ConfigError
from reversi.store.base import DEFAULT_URL

Echo = Callable[[str], None]

AGENT, TENANT, ENVIRONMENT, OPERATOR = "billing-agent", "acme", "demo", "dana"
CHECKOUT = f"{OUTPUT_DIR}/invoice-bot"
README = f"{CHECKOUT}/README.md"
CHARGE: dict[str, Any] = {
    "customer": "cus_acme_42",
    "amount": 4900,
    "currency": "usd",
    "description": "INV-2041 Pro plan, March",
}
LATE_CHARGE: dict[str, Any] = {
    "customer": "cus_acme_42",
    "amount": 1900,
    "currency": "usd",
    "description": "INV-2042 extra seats",
}
REPO: dict[str, Any] = {"org": "acme", "name": "invoice-bot", "private": True, "clone_to": CHECKOUT}
FILE: dict[str, Any] = {
    "path": README,
    "content": "# invoice-bot\n\nWritten by billing-agent in `reversi demo`; the rollback deletes it.\n",
}
EMAIL: dict[str, Any] = {
    "to": "ap@acme.example",
    "subject": "Receipt for INV-2041",
    "body": "Thank you: we charged $49.00.",
}
TIMED_OUT, EMAIL_STEP = 4, 3


@dataclass(frozen=True)
class DemoPaths:
    """Where the demo keeps its things, under the folder it runs in."""

    workdir: Path

    @property
    def db(self) -> Path:
        return self.workdir / ".reversi" / "reversi.db"

    @property
    def manifest(self) -> Path:
        return self.workdir / ".reversi" / "demo" / "tools.yaml"

    @property
    def world(self) -> Path:
        return self.workdir / ".reversi" / "demo" / "world.json"

    def shown(self, path: Path) -> str:
        """`path` as the user would type it from the demo's folder."""
        return path.relative_to(self.workdir).as_posix()


def run_demo(workdir: Path, echo: Echo) -> int:
    """Run the demo in `workdir` (the user's current folder); return the exit code.

    0 when the demo ran as designed (its rollback ends INCOMPLETE on purpose: an email cannot be
    unsent), 1 when something did not happen as it should have.

    Raises:
        reversi.errors.ReversiError: the store or the folder's configuration stopped the demo
            (a halt or the kill switch refusing the agent's calls, a bad reversi.yaml, ...).
    """
    paths = DemoPaths(workdir.resolve())
    try:
        world = _prepare(paths)
    except OSError as exc:  # a folder the user may not write in, or a file where .reversi/ should be
        raise ConfigError(f"the demo cannot set up its files in {workdir}: {exc.strerror or exc} "
                          f"({exc.filename}); run it in a folder you can write to") from None
    with reversi.open("sqlite:///" + str(paths.db), manifests=[str(paths.manifest)]) as ledger:
        run = ledger.start_run(
            actor=AGENT, tenant=TENANT, environment=ENVIRONMENT, mode="observe", labels={"source": "reversi demo"}
        )
        echo("Reversi demo: an agent's run, journaled, planned and rolled back")
        echo(f"Run {run.id}, journaled in {paths.shown(paths.db)}; stand-in world in {paths.shown(paths.world)}")
        _record(run, world, echo)
        _show_plan(run, echo)
        _settle(run, world, echo)
        report = _roll_back(run, paths, echo)
    _show_world(world, paths, echo)
    _explore(paths, run.id, echo)
    problem = _what_went_wrong(report, paths)
    if problem:
        echo("")
        echo(f"The demo did not go as designed: {problem}")
        return 1
    return 0


def _prepare(paths: DemoPaths) -> World:
    """Copy the manifest out and start the stand-in world afresh (a second demo starts clean too)."""
    paths.manifest.parent.mkdir(parents=True, exist_ok=True)
    paths.manifest.write_text(resources.files("reversi.demo").joinpath("tools.yaml").read_text(encoding="utf-8"))
    readme, checkout = paths.workdir / README, paths.workdir / CHECKOUT
    readme.unlink(missing_ok=True)
    if checkout.is_dir() and not any(checkout.iterdir()):
        checkout.rmdir()
    return World.reset(paths.world, paths.workdir)


def _heading(echo: Echo, title: str) -> None:
    echo("")
    echo(title)


def _explain(echo: Echo, text: str) -> None:
    echo(textwrap.fill(text, width=100))


def _indented(echo: Echo, text: str) -> None:
    for line in text.splitlines():
        echo(f"  {line}")


def _dollars(cents: int) -> str:
    return f"${cents / 100:.2f}"


def _times_out(create_charge: Callable[..., Any]) -> Callable[..., Any]:
    """A client whose charge goes through but whose answer never comes back."""

    def call(**args: Any) -> Any:
        create_charge(**args)
        raise TimeoutError("stripe: read timed out after 10 s")

    return call


def _record(run: reversi.Run, world: World, echo: Echo) -> None:
    _heading(echo, f"1. The agent works ({AGENT}, tenant {TENANT}); each call is journaled before and after it runs")
    calls: list[tuple[str, dict[str, Any], Callable[..., Any], Callable[[Any], str]]] = [
        ("stripe.create_charge", CHARGE, world.create_charge, lambda r: f"charged {_dollars(r['amount'])}: {r['id']}"),
        ("github.create_repo", REPO, world.create_repo, lambda r: f"created {r['full_name']}, cloned to {CHECKOUT}/"),
        ("fs.write_file", FILE, world.write_file, lambda r: f"wrote {r['path']} (a real file: look)"),
        ("email.send", EMAIL, world.send_email, lambda r: f"sent {r['id']} to {EMAIL['to']}"),
        ("stripe.create_charge", LATE_CHARGE, _times_out(world.create_charge), str),
    ]
    for index, (tool, args, fn, say) in enumerate(calls):
        try:
            said = say(run.call(tool, args, fn))
        except TimeoutError as exc:
            said = f"no answer ({exc}): journaled uncertain"
        echo(f"  step {index}  {tool:<21} {said}")


def _show_plan(run: reversi.Run, echo: Echo) -> None:
    _heading(echo, "2. The plan: what a rollback would do, newest step first (`reversi plan`)")
    _indented(echo, run.plan().to_text())
    _explain(
        echo,
        f"Step {TIMED_OUT} timed out, so nobody knows whether it charged the card: Reversi will not guess, and "
        f"leaves it unresolved. Step {EMAIL_STEP} cannot be undone: an email stays sent. The file (step 2) is "
        "undone before the repository it lives in (step 1), because the manifest says fs.write_file requires "
        "github.create_repo.",
    )


def _settle(run: reversi.Run, world: World, echo: Echo) -> None:
    _heading(echo, f"3. An operator ({OPERATOR}) checks the timed-out charge and settles it (`reversi resolve`)")
    found = world.find_charges(LATE_CHARGE["customer"], LATE_CHARGE["description"])
    if found:
        charge = found[0]
        note = f"found {charge['id']} ({LATE_CHARGE['description']}) in the Stripe dashboard"
        run.resolve(TIMED_OUT, status="succeeded", result=charge, note=note, actor=OPERATOR)
        echo(f"  {OPERATOR}: {note}: it went through.")
        echo(f"  step {TIMED_OUT} settled: succeeded, with that charge as its result. The new plan:")
    else:
        note = f"no charge for {LATE_CHARGE['description']} in the Stripe dashboard"
        run.resolve(TIMED_OUT, status="failed", note=note, actor=OPERATOR)
        echo(f"  {OPERATOR}: {note}: it never happened. The new plan:")
    _indented(echo, run.plan().to_text())
    _explain(
        echo, "With its result known, the late charge can be refunded like the first. The email still cannot be unsent."
    )


def _roll_back(run: reversi.Run, paths: DemoPaths, echo: Echo) -> reversi.RollbackReport:
    _heading(echo, "4. The rollback: each undo runs as an external command, its result read back")
    python, world = shlex.quote(sys.executable), shlex.quote(str(paths.world))
    echo(f"  --compensator-cmd 'python -m reversi.demo.compensator {paths.shown(paths.world)}'")
    echo(f"  --reader-cmd      'python -m reversi.demo.reader {paths.shown(paths.world)}'")
    report = run.rollback(
        compensate=command_compensator(f"{python} -m reversi.demo.compensator {world}"),
        verifier=command_reader(f"{python} -m reversi.demo.reader {world}"),
        retry=reversi.Retry(attempts=3, base_ms=100, max_ms=1_000),
        actor=OPERATOR,
    )
    _indented(echo, report.to_text())
    _explain(
        echo,
        "Both charges are refunded and read back as refunded, and the file and the repository are gone. The report "
        "still ends INCOMPLETE, because the email cannot be unsent and Reversi does not pretend otherwise.",
    )
    return report


def _show_world(world: World, paths: DemoPaths, echo: Echo) -> None:
    _heading(echo, f"5. The world afterwards ({paths.shown(paths.world)} and {OUTPUT_DIR}/)")
    data = world.load()
    for charge in data["charges"].values():
        state = f"refunded ({charge.get('refund')})" if charge["refunded"] else "NOT refunded"
        echo(f"  charge {charge['id']}  {_dollars(charge['amount'])}  {state}")
    for repo in data["repos"].values():
        echo(f"  repository {repo['full_name']}  {'deleted' if repo['deleted'] else 'still there'}")
    gone = not world.output_path(README).exists()
    echo(f"  file {README}  {'deleted from disk' if gone else 'STILL ON DISK'}")
    for message in data["outbox"]:
        echo(f"  email {message['id']} to {message['to']}  still sent (cannot be undone)")


def _explore(paths: DemoPaths, run_id: str, echo: Echo) -> None:
    _heading(echo, "6. Explore it yourself, from this folder")
    echo(f"  journal: {paths.db} (SQLite)")
    echo(f"  run:     {run_id}")
    # The commands below read the default store; if REVERSI_DB or reversi.yaml points elsewhere, name ours.
    db = "" if load_settings().db == DEFAULT_URL else f"--db {DEFAULT_URL} "
    echo(f"  reversi {db}runs")
    echo(f"  reversi {db}show {run_id}")
    echo(f"  reversi {db}plan {run_id} -m {paths.shown(paths.manifest)}")
    echo(f"  reversi {db}export --run {run_id}")


def _what_went_wrong(report: reversi.RollbackReport, paths: DemoPaths) -> str | None:
    if sorted(report.compensated) != [0, 1, 2, TIMED_OUT]:
        return f"expected steps 0, 1, 2 and {TIMED_OUT} compensated, got {report.to_dict()}"
    if [u.step for u in report.unrecoverable] != [EMAIL_STEP] or report.failed or report.unverified:
        return f"unexpected rollback report {report.to_dict()}"
    if (paths.workdir / README).exists():
        return f"{README} is still on disk"
    return None
