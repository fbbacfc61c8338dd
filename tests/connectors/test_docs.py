"""docs/connectors.md names every tool there is and no tool there is not; its http example loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reversi.connectors import NAMES, connector, connectors

DOC = (Path(__file__).parents[2] / "docs" / "connectors.md").read_text()


def test_the_doc_names_every_tool_and_every_setting() -> None:
    for found in connectors():
        for tool in found.tools:
            assert f"`{tool.name}" in DOC, tool.name
        for setting in found.settings:
            assert f"`{setting.name}`" in DOC, setting.name


def test_every_tool_the_doc_names_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = DOC.split("```yaml\n")[1].split("```")[0]
    (tmp_path / "tools.yaml").write_text(example)
    monkeypatch.setenv("REVERSI_HTTP_TOOLS", str(tmp_path / "tools.yaml"))
    known = {tool.name for name in NAMES for tool in connector(name).tools}
    named = set(re.findall(rf"`((?:{'|'.join(NAMES)})\.[a-z_]+)", DOC))
    assert named and named <= known, named - known
