"""The manifests Reversi ships for MCP servers people run (`reversi manifest show NAME`).

Each is a YAML file beside this module, named after its server (`memory.yaml` for
@modelcontextprotocol/server-memory), saying in a comment which server version it was checked against.
"""

from __future__ import annotations

from pathlib import Path

from reversi.errors import BadInput

__all__ = ["names", "path"]

_HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """The shipped manifests' names, sorted."""
    return sorted(found.stem for found in _HERE.glob("*.yaml"))


def path(name: str) -> Path:
    """Where the shipped manifest `name` is (a file of the installed package).

    Raises:
        BadInput: no manifest of that name is shipped.
    """
    if name not in names():
        raise BadInput(f"no shipped manifest {name!r} (shipped: {', '.join(names())})")
    return _HERE / f"{name}.yaml"
