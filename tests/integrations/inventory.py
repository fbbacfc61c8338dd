"""The inventory agent each framework test drives (issue 29): it writes a stock note (a file), sets an item's
stock (a SQLite row) and emails the supplier (irreversible). The file and the row change through the real
fs and sql connectors, in process, so each result is sealed for its step; the rollback undoes them with
the same connectors and reads them back. `Shop.state()` is the files' bytes and the rows: after the
rollback it is what it was before the agent, byte for byte, and the email stays sent.

    shop = Shop.make(tmp_path, monkeypatch)
    ... the framework's agent calls write_file, update_stock, email_supplier ...
    report = shop.roll_back(run)
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.connectors import fs, sql
from reversi.connectors._base import ToolKind
from reversi.connectors._registry import find_tool

NOTE = "stock/notes.md"
NAMES = {"write_file": "fs.write_file", "update_stock": "sql.update", "email_supplier": "email.send"}
EMAIL = """
  email.send:
    irreversible: "an email stays sent"
"""
# What the model of each test asks for, in order: the calls of the inventory agent.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"path": NOTE, "content": "lamps: 0 left, reorder\n"}),
    ("update_stock", {"sku": "lamp", "qty": 0}),
    ("email_supplier", {"to": "supplier@example.com", "body": "please send 12 lamps"}),
]


@dataclass
class Shop:
    """The shop's folder and database, the connectors' settings, and the emails sent."""

    root: Path
    db: Path
    manifest: Path
    sent: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def make(cls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Shop:
        root = tmp_path / "shop"
        (root / "stock").mkdir(parents=True)
        (root / NOTE).write_bytes(b"lamps: 3 left\r\n\xe2\x9c\x93 counted\n")  # bytes as they are, CRLF included
        db = tmp_path / "shop.db"
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE items (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL, note BLOB)")
            conn.executemany("INSERT INTO items VALUES (?, ?, ?)", [("lamp", 3, b"\x00\x01"), ("desk", 5, None)])
        conn.close()
        monkeypatch.setenv("REVERSI_FS_ROOT", str(root))
        monkeypatch.setenv("REVERSI_SQL_URL", f"sqlite:///{db}")
        monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(tmp_path / "connectors"))
        monkeypatch.setenv("REVERSI_CONNECTOR_KEY", "i" * 40)
        manifest = tmp_path / "inventory.yaml"
        here = Path(fs.__file__).parent / "manifests"
        entries = [(here / f"{name}.yaml").read_text().split("\ntools:\n", 1)[1] for name in ("fs", "sql")]
        manifest.write_text("version: 1\ntools:\n" + "\n".join(entries) + EMAIL)
        return cls(root, db, manifest)

    def open(self, db_url: str) -> reversi.Ledger:
        return reversi.open(db_url, manifests=[str(self.manifest)])

    # -- the agent's tools, as plain functions each framework makes its own tools of -------------------

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        """Write a file of the shop (its previous bytes are kept)."""
        return fs.write_file(path=path, content=content)

    def update_stock(self, sku: str, qty: int) -> dict[str, Any]:
        """Set how many of an item are in stock."""
        return sql.update(table="items", key={"sku": sku}, values={"qty": qty})

    def email_supplier(self, to: str, body: str) -> str:
        """Email the supplier (it cannot be unsent)."""
        self.sent.append({"to": to, "body": body})
        return f"sent to {to}"

    # -- the world, and its rollback ---------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Every file's bytes and every row, as they are now."""
        files = {p.relative_to(self.root).as_posix(): p.read_bytes() for p in sorted(self.root.rglob("*"))
                 if p.is_file()}
        with sqlite3.connect(self.db) as conn:
            rows = conn.execute("SELECT sku, qty, note FROM items ORDER BY sku").fetchall()
        conn.close()
        return {"files": files, "rows": rows}

    def roll_back(self, run: reversi.Run) -> reversi.RollbackReport:
        """Roll `run` back with the fs and sql connectors as compensator and reader."""
        return run.rollback(compensate=compensate, verifier=read)

    def check_rolled_back(self, run: reversi.Run, before: dict[str, Any]) -> None:
        """The agent's three calls journaled; after the rollback, the shop as before, byte for byte, and
        the email still sent (the report says so)."""
        assert [(s.tool, s.status.value) for s in run.steps()] == [
            ("fs.write_file", "succeeded"), ("sql.update", "succeeded"), ("email.send", "succeeded")]
        assert self.state() != before and len(self.sent) == 1
        report = self.roll_back(run)
        assert report.compensated == [1, 0] and [u.step for u in report.unrecoverable] == [2], report.to_text()
        assert not report.complete and report.unverified == []
        assert self.state() == before
        assert len(self.sent) == 1


def compensate(call: dict[str, Any]) -> Any:
    """A rollback's compensation, run by the connector that owns it (as `reversi-connectors compensate`)."""
    tool = find_tool(call["tool"], ToolKind.COMPENSATION)
    return tool.invoke({**call["args"], "step": call["step"]}, idempotency_key=call["idempotency_key"])


def read(tool: str, arguments: Any) -> Any:
    """A read-back, made by the connector that owns it (as `reversi-connectors read`)."""
    return find_tool(tool, ToolKind.READ).invoke(arguments)
