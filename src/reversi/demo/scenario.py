"""`reversi demo`: an agent's run through the gateway, halted, settled and rolled back, in one folder.

Everything is real except the far end of Stripe, Slack and the mail API, which are the bundled fakes
(`reversi.demo.fakes`), served on 127.0.0.1 for the length of the demo. The agent is an MCP client of
`reversi-gateway`, whose upstream is `reversi-connectors serve`: its files land in `demo-shop/files/`,
its rows in `demo-shop/shop.db`, its run in `.reversi/reversi.db`. The rollback runs through the
gateway's operator endpoint, which calls each compensation on the same connectors server.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TextIO

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from reversi.demo.agent import Tour
from reversi.demo.fakes.base import serving
from reversi.demo.fakes.mail import TOKEN as MAIL_TOKEN
from reversi.demo.fakes.slack import TOKEN as SLACK_TOKEN
from reversi.demo.fakes.stripe import KEY as STRIPE_KEY
from reversi.demo.shop import SHOP, Fakes, Shop
from reversi.engine.config import load_settings
from reversi.errors import ConfigError, DemoFailed
from reversi.store.factory import DEFAULT_URL

Echo = Callable[[str], None]

BIN = Path(sys.executable).parent
CONNECTORS = ("fs", "sql", "stripe", "slack", "http")
CALL_TIMEOUT_S = 3
UPSTREAM_SHOWN = f"shop=reversi-connectors serve {' '.join(CONNECTORS)}"


@dataclass(frozen=True)
class DemoPaths:
    """Where the demo keeps its things, under the folder it runs in."""

    workdir: Path

    @property
    def db(self) -> Path:
        return self.workdir / ".reversi" / "reversi.db"

    @property
    def demo(self) -> Path:
        return self.workdir / ".reversi" / "demo"

    @property
    def manifest(self) -> Path:
        return self.demo / "tools.yaml"

    @property
    def mail_tools(self) -> Path:
        return self.demo / "mail.yaml"

    @property
    def log(self) -> Path:
        return self.demo / "gateway.log"

    def shown(self, path: Path) -> str:
        """`path` as the user would type it from the demo's folder."""
        return path.relative_to(self.workdir).as_posix()


def run_demo(workdir: Path, echo: Echo) -> int:
    """Run the demo in `workdir` (the user's current folder); return the exit code.

    0 when the demo ran as designed (its rollback ends INCOMPLETE on purpose: an email cannot be
    unsent), 1 when something did not happen as it should have.

    Raises:
        reversi.errors.ConfigError: the folder cannot hold the demo's files, or
            `reversi-connectors manifest` failed. A call refused (a halt, the kill switch) or a
            gateway that does not start is printed and ends the demo with 1.
    """
    paths = DemoPaths(workdir.resolve())
    shop = Shop(paths.workdir)
    try:
        shop.reset()
        paths.demo.mkdir(parents=True, exist_ok=True)
        paths.mail_tools.write_text(_packaged("mail.yaml"), encoding="utf-8")
        paths.log.write_text("", encoding="utf-8")
    except OSError as exc:  # a folder the user may not write in, or a file where .reversi/ should be
        raise ConfigError(f"the demo cannot set up its files in {workdir}: {exc.strerror or exc} "
                          f"({exc.filename}); run it in a folder you can write to") from None
    fakes = Fakes()
    with ExitStack() as stack:
        urls = [stack.enter_context(serving(fake.app(), fake)) for fake in fakes.each()]
        env = _environment(paths, shop, *urls)
        _write_manifest(paths, env)
        tour = Tour(run_id=f"run_demo_{secrets.token_hex(6)}", db_url=f"sqlite:///{paths.db}", shop=shop,
                    fakes=fakes, echo=echo)
        echo("Reversi demo: an agent's run on real files and rows, journaled, halted, settled and rolled back")
        echo(f"Run {tour.run_id}, journaled in {paths.shown(paths.db)}; the agent works in {SHOP}/")
        echo(f"Stripe, Slack and the mail API are bundled fakes on 127.0.0.1 (URLs in {paths.shown(paths.log)})")
        try:
            problem = anyio.run(_run_tour, tour, paths, env)
        except Exception as exc:  # a refused call, or a gateway that would not start: say so, exit 1
            problem = _reason(exc)
        finally:
            for fake in fakes.each():
                fake.release()
    _explore(paths, tour, echo)
    if problem:
        echo("")
        echo(f"The demo did not go as designed: {problem} (the gateways' log: {paths.shown(paths.log)})")
        return 1
    return 0


def _reason(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:  # anyio's task groups wrap it
        error = error.exceptions[0]
    return str(error) if isinstance(error, DemoFailed) else f"{type(error).__name__}: {error}"


def _packaged(name: str) -> str:
    return resources.files("reversi.demo").joinpath(name).read_text(encoding="utf-8")


def _environment(paths: DemoPaths, shop: Shop, stripe_url: str, slack_url: str, mail_url: str) -> dict[str, str]:
    """The settings the connectors read: the shop's folder and database, and the fakes' URLs and keys."""
    with paths.log.open("a", encoding="utf-8") as log:
        log.write(f"fakes: stripe {stripe_url}, slack {slack_url}, mail {mail_url}\n")
    return {
        **os.environ,
        "REVERSI_FS_ROOT": str(shop.files),
        "REVERSI_SQL_URL": shop.db_url,
        "REVERSI_CONNECTOR_DIR": str(paths.workdir / ".reversi" / "connectors"),
        "REVERSI_HTTP_TOOLS": str(paths.mail_tools),
        "STRIPE_API_BASE": stripe_url,
        "STRIPE_API_KEY": STRIPE_KEY,
        "SLACK_API_URL": slack_url,
        "SLACK_BOT_TOKEN": SLACK_TOKEN,
        "REVERSI_DEMO_MAIL_URL": mail_url,
        "REVERSI_DEMO_MAIL_TOKEN": MAIL_TOKEN,
    }


REFUND_POLICY = "    undo_window: 30d    # the shop refunds a charge within 30 days of it, not after\n"


def _write_manifest(paths: DemoPaths, env: dict[str, str]) -> None:
    """The connectors' own manifests, the email's `irreversible: true` among them (from mail.yaml)."""
    made = subprocess.run([str(BIN / "reversi-connectors"), "manifest", *CONNECTORS], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    if made.returncode != 0:
        raise ConfigError(f"reversi-connectors manifest failed: {made.stderr.strip()}")
    header = ("# The manifest of `reversi demo` (`reversi-connectors manifest fs sql stripe slack http`, with\n"
              "# REVERSI_HTTP_TOOLS naming .reversi/demo/mail.yaml), and the shop's refund policy as the charges'\n"
              "# undo window. The demo writes it afresh each time it runs.\n")
    charge = "  stripe.create_charge:\n"
    if charge not in made.stdout:
        raise ConfigError("reversi-connectors manifest has no stripe.create_charge entry to give a window")
    text = made.stdout.replace(charge, charge + REFUND_POLICY, 1)
    paths.manifest.write_text(header + text, encoding="utf-8")


async def _run_tour(tour: Tour, paths: DemoPaths, env: dict[str, str]) -> str | None:
    upstream = shlex.join([str(BIN / "reversi-connectors"), "serve", *CONNECTORS])
    common = ["--upstream", f"shop={upstream}", "--db", tour.db_url, "-m", str(paths.manifest)]
    scope = ["--run-id", tour.run_id, "--call-timeout", str(CALL_TIMEOUT_S), *tour.scope_flags]
    with paths.log.open("a", encoding="utf-8") as log:
        async with _gateway(["operator", *common], env, paths.workdir, log) as operator:
            async with _gateway(common + scope, env, paths.workdir, log) as agent:
                tour.introduce(f"reversi-gateway --upstream \"{UPSTREAM_SHOWN}\" -m {paths.shown(paths.manifest)}"
                               f" --call-timeout {CALL_TIMEOUT_S}")
                await tour.work(agent)
            await tour.settle_and_roll_back(operator, f"reversi-gateway operator --upstream \"{UPSTREAM_SHOWN}\" ...")
        problem = tour.what_went_wrong()
        if problem is None:
            yours = ["--run-id", tour.yours, "--call-timeout", str(CALL_TIMEOUT_S), *tour.scope_flags]
            async with _gateway(common + yours, env, paths.workdir, log) as agent:
                await tour.leave_one(agent, tour.yours, f"reversi plan {tour.yours} -m {paths.shown(paths.manifest)}")
    return problem


@asynccontextmanager
async def _gateway(args: list[str], env: dict[str, str], cwd: Path, log: TextIO) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=str(BIN / "reversi-gateway"), args=args, env=env, cwd=str(cwd))
    async with Client(stdio_client(params, errlog=log), cache=None) as client:
        yield client


def _explore(paths: DemoPaths, tour: Tour, echo: Echo) -> None:
    run_id = tour.run_id
    echo("")
    echo("Explore it yourself, from this folder")
    echo(f"  journal: {paths.db} (SQLite)")
    echo(f"  run:     {run_id}")
    if tour.left:
        echo(f"  yours:   {tour.left} (not rolled back)")
    # The commands below read the default store; if REVERSI_DB or reversi.yaml points elsewhere, name ours.
    db = "" if load_settings().db == DEFAULT_URL else f"--db {DEFAULT_URL} "
    echo(f"  reversi {db}runs")
    echo(f"  reversi {db}show {run_id}")
    echo(f"  reversi {db}plan {run_id} -m {paths.shown(paths.manifest)}")
    echo(f"  reversi {db}export --run {run_id}")
