"""The demo's shop: the files and the SQLite database its agent changes, and their state as lines.

`demo-shop/` is the demo's own folder, made afresh on each run: `files/` is the fs connector's root
and `shop.db` the sql connector's database. `state` lists them, with what the bundled fakes hold,
one line per thing, so two states can be compared with `diff`.
"""

from __future__ import annotations

import difflib
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from reversi.demo.fakes.base import FakeBase
from reversi.demo.fakes.mail import FakeMail
from reversi.demo.fakes.slack import FakeSlack
from reversi.demo.fakes.stripe import FakeStripe

SHOP = "demo-shop"
PRICES = "sku,plan,price\nPRO,Pro plan,49.00\nSEAT,extra seat,19.00\n"
SCHEMA = """
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, total INTEGER NOT NULL, status TEXT NOT NULL);
CREATE TABLE payments (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, amount INTEGER NOT NULL, charge TEXT);
INSERT INTO orders VALUES (2041, 'acme', 4900, 'open'), (2042, 'acme', 1900, 'open');
"""


@dataclass(frozen=True)
class Fakes:
    """The bundled fakes of Stripe, Slack and a mail API, as the demo serves them."""

    stripe: FakeStripe = field(default_factory=FakeStripe)
    slack: FakeSlack = field(default_factory=FakeSlack)
    mail: FakeMail = field(default_factory=FakeMail)

    def each(self) -> tuple[FakeBase, ...]:
        return self.stripe, self.slack, self.mail


@dataclass(frozen=True)
class Shop:
    """Where the shop lives under the demo's folder."""

    workdir: Path

    @property
    def files(self) -> Path:
        return self.workdir / SHOP / "files"

    @property
    def db(self) -> Path:
        return self.workdir / SHOP / "shop.db"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.db}"

    def reset(self) -> None:
        """Make `demo-shop/` afresh: a price list and an invoices folder, and two open orders."""
        shutil.rmtree(self.workdir / SHOP, ignore_errors=True)
        (self.files / "invoices").mkdir(parents=True)
        (self.files / "prices.csv").write_text(PRICES, encoding="utf-8")
        with sqlite3.connect(self.db) as conn:
            conn.executescript(SCHEMA)
        conn.close()

    def state(self, fakes: Fakes) -> list[str]:
        """Every file, row, charge, message and email, one line each."""
        lines = [f"file {path.relative_to(self.files).as_posix()}: {_flat(path.read_text(encoding='utf-8'))}"
                 for path in sorted(self.files.rglob("*")) if path.is_file()]
        with sqlite3.connect(self.db) as conn:
            for table in ("orders", "payments"):
                cursor = conn.execute(f"SELECT * FROM {table} ORDER BY id")  # our own table names
                names = [c[0] for c in cursor.description]
                lines += [f"row {table} " + " ".join(f"{n}={v}" for n, v in zip(names, row, strict=True))
                          for row in cursor]
        conn.close()
        for charge in fakes.stripe.charges.values():
            refunded = "refunded" if charge["refunded"] else "not refunded"
            amount = f"${charge['amount'] / 100:.2f}"
            lines.append(f"stripe charge {charge['id']} {amount} {charge['description']}: {refunded}")
        lines += [f"slack message {channel} {ts}: {message['text']}"
                  for channel, messages in fakes.slack.messages.items() for ts, message in sorted(messages.items())]
        lines += [f"email {m['id']} to {m['to']}: {m['subject']}" for m in fakes.mail.outbox]
        return lines


def diff(before: list[str], after: list[str]) -> list[str]:
    """The lines that differ, `- ` gone and `+ ` new (a unified diff without its headers)."""
    changed = difflib.unified_diff(before, after, lineterm="", n=0)
    return [f"{line[0]} {line[1:]}" for line in changed if not line.startswith(("---", "+++", "@@"))]


def _flat(text: str) -> str:
    return " | ".join(text.splitlines())
