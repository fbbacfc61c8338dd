"""The layers keep to their side. The surfaces go through the ledger: no CLI, server, gateway or
integration module touches the store, or a ledger's store and recorder, behind its back (where the
access policy would be skipped); and past the few modules that open the store, authenticate a request
or run background work (`RAW_LEDGER`, each with its reason), a surface acts only through the door a
principal is given (`PrincipalLedger`): it cannot name the raw `Ledger` (under mypy strict, it then
cannot hold one), nor call what only the raw ledger has. Core and engine speak of values and settings,
never of a surface's flags (the CLI adds its own wording where it renders them)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).parent.parent / "src" / "reversi"
SURFACES = ("cli", "server", "gateway", "integrations")
BEHIND_THE_LEDGER = {"store", "recorder", "_base"}  # `_base`: the raw ledger behind a `PrincipalLedger`
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def reaches_behind_the_ledger(source: str) -> list[str]:
    """What a module's code does that only the engine may: import `reversi.store`, or name the
    `.store` or `.recorder` of an object (a ledger's, in practice)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.startswith("reversi.store")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith("reversi.store") or (module == "reversi" and any(a.name == "store"
                                                                               for a in node.names)):
                found.append(f"from {module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr in BEHIND_THE_LEDGER:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_no_surface_module_imports_the_store_or_names_a_ledgers_store_or_recorder() -> None:
    modules = [path for surface in SURFACES for path in sorted((SRC / surface).rglob("*.py"))]
    assert len(modules) > 20
    offending = {str(p.relative_to(SRC)): found for p in modules if (found := reaches_behind_the_ledger(p.read_text()))}
    assert offending == {}


def test_the_check_sees_each_way_of_reaching_behind_the_ledger() -> None:
    for source in ("import reversi.store.keys", "from reversi.store.base import Store", "from reversi import store",
                   "ledger.store.read()", "x = self.ledger.recorder", "server.ledger.store"):
        assert reaches_behind_the_ledger(source), source
    assert reaches_behind_the_ledger("ledger.for_principal(p).list_runs()\nfrom reversi.engine import access") == []


# The surface modules that may hold the raw `Ledger` (a path, or a folder ending in /), and why. Any other
# surface module acts through a `PrincipalLedger`.
RAW_LEDGER = {
    "cli/context.py": "opens the store for each command, and gives it the local admin's door",
    "cli/hook.py": "Claude Code's hook records through the SDK's adapter (integrations/), with the Ledger it opens",
    "integrations/": "the SDK's agent-framework adapters: they record with the Ledger the application opened",
    "server/main.py": "opens the store the server serves",
    "server/app.py": "builds the server over the store; answers a refused call with its own approval, and "
                     "counts the windows closing for /metrics (of no principal)",
    "server/endpoint.py": "authenticates each request (who it is comes before any door) and gives it its door",
    "server/console/session.py": "who a console session is, and signing it out: before any door",
    "server/console/views.py": "every page, signed in or not, shows whether the kill file is on: no principal's",
    "server/jobs.py": "the job worker runs the rollback jobs principals queued, off any request",
    "server/retention.py": "retention runs over every run, off any request",
    "gateway/main.py": "opens the store; a stdio gateway's door is the local admin's (it holds the store)",
    "gateway/http.py": "authenticates each request and hands it its door in the ASGI scope",
    "gateway/drill.py": "`reversi manifest drill` records in a scratch store it opens itself",
}
# Calls of what only the raw ledger has, made elsewhere on purpose.
RAW_CALLS = {
    "server/console/pages.py": {
        "for_principal": "the console gives each request the door of its session's principal",
        "authenticate": "signing in checks the key typed in, before there is a principal",
    },
}
_RAW_NAMES = {"Ledger", "open", "open_with", "RunFilter"}
# What hands a CLI command the raw ledger without naming it (`CliState.ledger`, not its `door`).
CLI_RAW_CALLS = {"ledger"}


def names_the_raw_ledger(source: str) -> list[str]:
    """Where a module's code names the raw ledger: imports from `reversi.engine.ledger`, or the SDK's
    `reversi.open` / `reversi.Ledger`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "reversi.engine.ledger":
            found.append(f"line {node.lineno}: from reversi.engine.ledger import ...")
        elif isinstance(node, ast.ImportFrom) and node.module == "reversi":
            found += [f"line {node.lineno}: from reversi import {a.name}" for a in node.names if a.name in _RAW_NAMES]
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name == "reversi.engine.ledger"]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "reversi"
              and node.attr in _RAW_NAMES):
            found.append(f"line {node.lineno}: reversi.{node.attr}")
    return found


def raw_only_methods() -> set[str]:
    """What the raw ledger has and a principal's door has not (less `close`, which files have too)."""
    from reversi.engine.ledger import Ledger
    from reversi.engine.principal_ledger import PrincipalLedger

    return {n for n in dir(Ledger) if not n.startswith("_")} - set(dir(PrincipalLedger)) - {"close"}


def calls_of(source: str, names: set[str]) -> list[str]:
    """The calls of a method of one of `names`, whatever the object."""
    return [f"line {node.lineno}: .{node.func.attr}()" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names]


def _surface_modules() -> dict[str, str]:
    return {p.relative_to(SRC).as_posix(): p.read_text()
            for surface in SURFACES for p in sorted((SRC / surface).rglob("*.py"))}


def _may_hold_the_raw_ledger(module: str) -> bool:
    return any(module == allowed or (allowed.endswith("/") and module.startswith(allowed)) for allowed in RAW_LEDGER)


def test_only_the_listed_surface_modules_name_the_raw_ledger() -> None:
    modules = _surface_modules()
    offending = {m: found for m, text in modules.items()
                 if not _may_hold_the_raw_ledger(m) and (found := names_the_raw_ledger(text))}
    assert offending == {}
    unused = [allowed for allowed in RAW_LEDGER if allowed.endswith(".py")
              and (allowed not in modules or not (names_the_raw_ledger(modules[allowed])
                                                  or calls_of(modules[allowed], CLI_RAW_CALLS)))]
    assert unused == []  # an exception no longer needed is taken off the list


def test_no_other_surface_module_calls_what_only_the_raw_ledger_has() -> None:
    raw = raw_only_methods()
    assert {"start_run", "for_principal", "authenticate", "acting_as"} <= raw
    found = {}
    for module, text in _surface_modules().items():
        if _may_hold_the_raw_ledger(module):
            continue
        listed = RAW_CALLS.get(module, {})
        extra = CLI_RAW_CALLS if module.startswith("cli/") else set()
        if calls := calls_of(text, (raw | extra) - set(listed)):
            found[module] = calls
    assert found == {}


def test_the_checks_see_each_way_of_naming_or_using_the_raw_ledger() -> None:
    for source in ("from reversi.engine.ledger import Ledger", "import reversi.engine.ledger",
                   "from reversi import open", "import reversi\nreversi.open(url)", "x: reversi.Ledger"):
        assert names_the_raw_ledger(source), source
    assert names_the_raw_ledger("from reversi.engine.principal_ledger import PrincipalLedger\nreversi.Retry()") == []
    raw = raw_only_methods()
    assert calls_of("self.ledger.start_run(run_id)", raw) and calls_of("ledger.for_principal(p)", raw)
    assert calls_of("door.open_run(run_id)\nfile.close()", raw) == []
    assert calls_of("with state(ctx).ledger(manifests) as ledger: ...", CLI_RAW_CALLS)
    assert calls_of("with state(ctx).door(manifests) as door: ...", CLI_RAW_CALLS) == []
    assert reaches_behind_the_ledger("door._base.recorder")


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_core_and_engine_messages_name_no_cli_flag() -> None:
    found = []
    for path in sorted([*(SRC / "core").rglob("*.py"), *(SRC / "engine").rglob("*.py")]):
        where = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        found += [f"{where}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                  and FLAG.search(node.value)]
    assert found == []


# Where the ledger's time form and compact JSON are made.
ONE_PLACE = {'.replace("+00:00", "Z")': {"core/times.py"},
             'separators=(",", ":")': {"core/json_values.py"}}


def test_times_are_formatted_and_json_is_compacted_in_one_place_each() -> None:
    found: dict[str, set[str]] = {pattern: set() for pattern in ONE_PLACE}
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        for pattern, places in found.items():
            if pattern in text:
                places.add(path.relative_to(SRC).as_posix())
    assert found == ONE_PLACE


# What the store's interface may not reach, even inside a function: a back end (which imports the interface)
# or the factory that picks one (which imports them).
BACK_ENDS = {"reversi.store.sqlite", "reversi.store.postgres", "reversi.store.factory", "sqlite3", "psycopg"}


def imported_modules(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return found


def test_the_store_interface_imports_no_back_end() -> None:
    imported = imported_modules((SRC / "store" / "base.py").read_text())

    assert {m for m in imported if m in BACK_ENDS or m.split(".")[0] in BACK_ENDS} == set()
    assert imported_modules("def f():\n    from reversi.store import sqlite\n") & BACK_ENDS


# What core may not import: the layers above it, and the modules that reach disks, networks, processes or
# event loops. Core decides; the store and the engine do the I/O.
NOT_IN_CORE = ("reversi.store", "reversi.engine", "reversi.server", "reversi.gateway", "reversi.cli",
               "reversi.integrations", "reversi.connectors", "sqlite3", "psycopg", "httpx", "socket", "subprocess",
               "asyncio", "anyio", "pathlib", "shutil", "tempfile", "urllib.request", "mcp", "starlette")


def impure_imports(source: str) -> list[str]:
    """The imports of a core module that reach outside core's bounds, and any call of `open`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found += [n for n in names if any(n == bad or n.startswith(bad + ".") for bad in NOT_IN_CORE)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            found.append(f"line {node.lineno}: open()")
    return found


def test_core_is_pure_it_imports_no_layer_above_it_and_no_io() -> None:
    modules = sorted((SRC / "core").rglob("*.py"))
    assert len(modules) > 30
    offending = {str(p.relative_to(SRC)): found for p in modules if (found := impure_imports(p.read_text()))}
    assert offending == {}
    for source in ("import sqlite3", "from reversi.store.base import Store", "import asyncio.tasks",
                   "from pathlib import Path", "data = open('x').read()"):
        assert impure_imports(source), source
