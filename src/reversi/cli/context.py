"""What every command shares: the global flags, the door to the ledger, printing text and JSON.

Whoever runs the CLI holds the store: a command acts through the door of the local admin
(`Ledger.as_local_admin`), as every other surface acts through its principal's, so the rules of who may
do what, the defaults of a surface and what is masked in what is shown are decided in one place.

Every line the CLI prints goes through `echo` or `echo_json` (a test keeps it so): text with its
control characters escaped (`reversi.core.printable`), since much of it came from agents, upstream
servers and commands; JSON exact, its characters that a terminal would act on written as JSON escapes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from reversi.core.json_values import JSONView
    from reversi.engine.config import Settings
    from reversi.engine.ledger import Ledger
    from reversi.engine.principal_ledger import PrincipalLedger

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
manifest_option = click.option(
    "-m", "--manifest", "manifests", multiple=True, metavar="FILE", help="Manifest file (repeatable)."
)


@dataclass
class CliState:
    db: str | None = None
    config: str | None = None

    def settings(self, manifests: Sequence[str] = ()) -> Settings:
        from reversi.engine.config import load_settings

        return load_settings(config=self.config, db=self.db, manifests=tuple(manifests))

    def ledger(self, manifests: Sequence[str] = (), *, reading: bool = False) -> Ledger:
        """Open the ledger with the manifests in force (`-m`, else the config's, else REVERSI_MANIFEST).

        A command that only reads what was recorded (`reading`) goes on without a manifest file that is
        not there, with a warning: the journal can be shown without it.
        """
        from dataclasses import replace
        from pathlib import Path

        from reversi.engine.ledger import open_with

        settings = self.settings(manifests)
        if reading:
            present = tuple(path for path in settings.manifests if Path(path).is_file())
            for path in settings.manifests:
                if path not in present:
                    echo(f"reversi: warning: manifest {path} not found: shown without it", err=True)
            settings = replace(settings, manifests=present)
        return open_with(settings)

    @contextlib.contextmanager
    def door(self, manifests: Sequence[str] = (), *, reading: bool = False) -> Iterator[PrincipalLedger]:
        """The local admin's door to the ledger `ledger` opens, closed on the way out."""
        from reversi.core.surfaces import Surface

        with self.ledger(manifests, reading=reading) as ledger:
            yield ledger.as_local_admin(Surface.CLI)


def state(ctx: click.Context) -> CliState:
    obj = ctx.find_root().obj
    assert isinstance(obj, CliState)
    return obj


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print `text` (to stderr with `err`) with its control characters escaped, newline and tab kept."""
    from reversi.core.printable import for_terminal

    click.echo(for_terminal(text), err=err, nl=nl)


def echo_json(value: JSONView | Mapping[str, object]) -> None:
    """Print `value` (JSON, or a TypedDict of a JSON object, which is no JSONView to the type checker) as
    indented JSON: the exact value, with nothing in it a terminal would act on."""
    echo_json_text(json.dumps(value, indent=2, ensure_ascii=False))


def echo_json_text(text: str) -> None:
    """Print text that `json.dumps` wrote (a line of `export`), as `echo_json` prints it."""
    from reversi.core.printable import json_for_terminal

    click.echo(json_for_terminal(text))

