"""The frameworks are optional extras: the core never imports them, only their own integration does."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import reversi

FRAMEWORKS = ("langchain", "langchain_core", "langgraph", "agents", "pydantic_ai", "crewai", "google.adk",
              "opentelemetry.sdk")
CHECK = """
import importlib, sys
for name in sys.argv[2:]:
    importlib.import_module(name)
bad = sorted(m for m in sys.modules for f in sys.argv[1].split(",") if m == f or m.startswith(f + "."))
print(",".join(bad))
"""


def imported_frameworks(frameworks: tuple[str, ...], modules: list[str]) -> str:
    p = subprocess.run([sys.executable, "-c", CHECK, ",".join(frameworks), *modules],
                       capture_output=True, text=True, timeout=120, check=True)
    return p.stdout.strip()


def core_modules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(reversi.__path__, "reversi.")
            if not m.name.startswith("reversi.integrations.") and not m.name.endswith("__main__")]


def test_no_module_outside_the_integrations_imports_a_framework() -> None:
    modules = core_modules()
    assert len(modules) > 50 and {"reversi.engine.tracing", "reversi.integrations"} <= set(modules)
    assert imported_frameworks(FRAMEWORKS, modules) == ""


def test_importing_reversi_does_not_import_opentelemetry() -> None:
    # The MCP SDK imports opentelemetry's API for its own spans; the SDK surface does not.
    assert imported_frameworks(("opentelemetry",), ["reversi"]) == ""



def test_the_tracing_hooks_do_nothing_when_the_application_has_not_imported_opentelemetry(tmp_path: Path) -> None:
    script = f"""
import sys, reversi
with reversi.open("sqlite:///{tmp_path / 'r.db'}") as ledger:
    run = ledger.start_run(actor="a")
    run.call("x.y", {{"n": 1}}, lambda n: n)
    run.rollback()
    intended = [e for e in run.events() if e.type == "intended"][0]
print("trace_id" in intended.data, any(m.startswith("opentelemetry") for m in sys.modules))
"""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert p.stdout.split() == ["False", "False"]
