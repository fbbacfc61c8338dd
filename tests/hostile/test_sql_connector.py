"""Hostile input to the sql connector (issue 24, findings 1 and 2), on SQLite and PostgreSQL.

`db` values (URLs of every scheme at open and closed loopback ports, SQLite paths, libpq keyword
strings, near-misses of the configured name, any JSON) open nothing the operator did not configure:
no connection reaches a listening port, no file appears or changes. And forged results (the seal
dropped, altered or borrowed, any field changed, random objects) against each compensation change
no row: every one is refused.
"""

from __future__ import annotations

import copy
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from tests.connectors.test_sql import SCHEMA, Target, target  # noqa: F401  (the fixture: the shop, as `shop`)
from tests.hostile.fuzz import fuzz_settings, tried

from reversi.connectors import ConnectorError, sql
from reversi.core.json_values import canonical

SEAL = "reversi_seal"
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def _db_values(tmp_path: Path, open_port: int, closed_port: int) -> st.SearchStrategy[Any]:
    ports = st.sampled_from([open_port, closed_port, 5432])
    hosts = st.sampled_from(["127.0.0.1", "localhost", "[::1]", "127.0.0.2"])
    schemes = st.sampled_from(["postgresql", "postgres", "sqlite", "file", "mysql", "http", "PostgreSQL"])
    users = st.sampled_from(["", "postgres@", "u:secret@", "shop@"])
    urls = st.builds(lambda s, u, h, p, d: f"{s}://{u}{h}:{p}/{d}", schemes, users, hosts, ports,
                     st.sampled_from(["test", "x", "shop", "", "test?sslmode=disable"]))
    paths = st.sampled_from([f"sqlite:///{tmp_path}/elsewhere/other.db", f"sqlite:///{tmp_path}/new.db",
                             f"sqlite:////{tmp_path}/shop.db", f"{tmp_path}/shop.db", "sqlite:///:memory:",
                             f"file:{tmp_path}/elsewhere/other.db?mode=rw"])
    keywords = st.builds(lambda h, p: f"host={h} port={p} dbname=test", st.sampled_from(["127.0.0.1", "::1"]), ports)
    near = st.sampled_from(["SHOP", "shop ", " shop", "shop\x00", "shop\n", "sho", "shop=", "default", "shop;",
                            "shop://", "", "*", "%", "shop' OR '1'='1", "\u0455hop", "x" * 10_000])
    return urls | paths | keywords | near | st.text(max_size=40) | JSON


def test_no_db_value_opens_anything_the_operator_did_not_configure(target: Target, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "elsewhere").mkdir()
    Target("sqlite", f"sqlite:///{tmp_path}/elsewhere/other.db").execute(*SCHEMA["sqlite"])
    select = sql.CONNECTOR.tool("sql.select")
    with socket.socket() as listener, socket.socket() as closed:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        closed.bind(("127.0.0.1", 0))
        files = _files(tmp_path)

        @fuzz_settings(ci=60)
        @given(_db_values(tmp_path, listener.getsockname()[1], closed.getsockname()[1]))
        def probe(db: Any) -> None:
            assume(db is not None and db != target.name)
            tried("sql-db-values")
            with pytest.raises(ConnectorError) as refused:
                select.invoke({"db": db, "table": "items", "key": {"id": 1}})
            said = refused.value.message
            assert said.startswith("bad argument db: ") and "\n" not in said and "secret" not in said, said
            assert said.endswith("(configured: shop)") or said == "bad argument db: expected a string, got " + (
                type(db).__name__), said
            with pytest.raises(BlockingIOError):
                listener.accept()
            assert _files(tmp_path) == files

        probe()


def _genuine() -> dict[str, dict[str, Any]]:
    """Sealed results of each forward tool, whose undo would change rows."""
    return {"insert": sql.insert(db="shop", table="items", rows=[{"id": 70, "name": "kiwi"}]),
            "update": sql.update(db="shop", table="items", key={"id": 1}, values={"qty": 0}),
            "delete": sql.delete(db="shop", table="tags", key={"item_id": 3, "tag": "fruit"})}


def _mutated(draw: st.DrawFn, genuine: dict[str, dict[str, Any]]) -> Any:
    """One genuine result, changed one way an agent could change it."""
    base = copy.deepcopy(genuine[draw(st.sampled_from(sorted(genuine)))])
    how = draw(st.sampled_from(["unsealed", "field", "seal field", "swap images", "extra", "mac bit", "random"]))
    if how == "unsealed":
        base.pop(SEAL)
    elif how == "field":
        base[draw(st.sampled_from(sorted(base)))] = draw(JSON)
    elif how == "seal field":
        base[SEAL][draw(st.sampled_from(["v", "tool", "args", "key", "mac"]))] = draw(
            JSON | st.sampled_from(["sql.insert", "sql.update", "sql.delete", "fs.write_file"]))
    elif how == "swap images":
        base["images"] = genuine[draw(st.sampled_from(sorted(genuine)))]["images"]
        base["keys"] = draw(st.sampled_from([base["keys"], [{"id": 1}], [{"id": 3}], [{"item_id": 1, "tag": "fruit"}]]))
        if draw(st.booleans()):
            base.pop(SEAL)
    elif how == "extra":
        base[draw(st.text(min_size=1, max_size=8))] = draw(JSON)
    elif how == "mac bit":
        mac = base[SEAL]["mac"]
        at = draw(st.integers(0, len(mac) - 1))
        base[SEAL]["mac"] = mac[:at] + ("0" if mac[at] != "0" else "1") + mac[at + 1:]
    else:
        return draw(JSON)
    return base


@pytest.mark.parametrize("compensation", ["sql.delete_rows", "sql.restore_rows"])
def test_no_forged_result_makes_a_compensation_change_a_row(target: Target, compensation: str) -> None:  # noqa: F811
    genuine = _genuine()
    accepted = [genuine["insert"]] if compensation == "sql.delete_rows" else [genuine["update"], genuine["delete"]]
    tool = sql.CONNECTOR.tool(compensation)
    rows = target.rows()

    @fuzz_settings(ci=60)
    @given(st.data())
    def forge(data: st.DataObject) -> None:
        forged = data.draw(st.composite(lambda draw: _mutated(draw, genuine))())
        assume(all(canonical(forged) != canonical(one) for one in accepted))
        tried("sql-forged-results")
        with pytest.raises(ConnectorError) as refused:
            tool.invoke({"result": forged, "step": 1})
        assert "\n" not in refused.value.message
        assert target.rows() == rows

    forge()
    undone = [tool.invoke({"result": one, "step": 1}) for one in accepted]  # the genuine ones still work
    assert [u["rows"] for u in undone] == [1] * len(accepted) and target.rows() != rows

