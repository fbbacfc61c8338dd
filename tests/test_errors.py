"""`reversi.errors` is the one error tree: every error the package defines is there, and drawn in its
docstring."""

from __future__ import annotations

import importlib
import pkgutil

import reversi
import reversi.errors
from reversi.errors import ReversiError

# Integrations whose framework cannot be installed beside the test environment (tests/integrations/own_env.py),
# and the package each needs; they define no error of their own.
OWN_ENV_MODULES = {"reversi.integrations.crewai": "crewai"}


def every_module() -> None:
    for module in pkgutil.walk_packages(reversi.__path__, "reversi."):
        if module.name.endswith(".__main__"):  # importing one runs its program
            continue
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as missing:  # an integration whose framework has a venv of its own
            if module.name not in OWN_ENV_MODULES or (missing.name or "").split(".")[0] != OWN_ENV_MODULES[module.name]:
                raise


def subclasses(cls: type) -> list[type]:
    found: list[type] = []
    direct_subclasses: list[type] = cls.__subclasses__()
    for direct in direct_subclasses:
        found += [direct, *subclasses(direct)]
    return found


def test_every_reversi_error_is_defined_in_reversi_errors_and_drawn_in_its_tree() -> None:
    every_module()
    found = subclasses(ReversiError)
    assert found, "the walk found no errors at all"
    elsewhere = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in found if cls.__module__ != "reversi.errors")
    assert elsewhere == []
    tree = reversi.errors.__doc__ or ""
    undrawn = sorted(cls.__name__ for cls in found if f"── {cls.__name__} " not in tree)
    assert undrawn == []


def test_every_public_exception_is_an_error_or_a_signal_defined_in_reversi_errors_and_drawn() -> None:
    every_module()
    found = [cls for cls in subclasses(Exception) if cls.__module__.startswith("reversi.")]
    public = [cls for cls in found if not cls.__name__.startswith("_") and not _a_frameworks(cls)]
    elsewhere = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in public if cls.__module__ != "reversi.errors")
    assert elsewhere == [], "define it in reversi.errors, under ReversiError or Signal, and draw it in the tree"
    signals = subclasses(reversi.errors.Signal)
    assert signals
    tree = reversi.errors.__doc__ or ""
    assert sorted(cls.__name__ for cls in signals if f"── {cls.__name__} " not in tree) == []
    assert not set(signals) & set(subclasses(ReversiError)), "a signal is caught by name, never shown as an error"


def _a_frameworks(cls: type) -> bool:
    """An integration's exception that must be one of its framework's kinds (LangChain's ToolException):
    it lives beside the integration, which alone may import the framework."""
    return any(base.__module__.split(".")[0] not in ("builtins", "reversi") for base in cls.__mro__[1:-1])
