"""What each framework's `journaled()` is given (issue 29, item 5): plain functions are made tools as
the framework would, an OpenAI hosted tool passes through with a warning (it runs on OpenAI's side), and
anything else is refused in one line naming it, before any run is touched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import FunctionTool, WebSearchTool
from langchain_core.tools import BaseTool
from pydantic_ai.toolsets import FunctionToolset

import reversi
from reversi.errors import BadInput
from reversi.integrations import langchain, openai_agents, pydantic_ai


def restock(sku: str, count: int) -> str:
    """Put items back in stock."""
    return f"{count} x {sku}"


def test_plain_functions_are_made_tools_and_journaled(tmp_path: Path) -> None:
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        run = ledger.start_run()
        (lc,) = langchain.journaled([restock], run)
        assert isinstance(lc, BaseTool) and lc.name == "restock"
        assert lc.invoke({"sku": "lamp", "count": 2}) == "2 x lamp"
        (oa,) = openai_agents.journaled([restock], run)
        assert isinstance(oa, FunctionTool) and oa.name == "restock"
        toolset = pydantic_ai.journaled([restock], run)
        assert isinstance(toolset.wrapped, FunctionToolset)
        assert [s.args for s in run.steps()] == [{"sku": "lamp", "count": 2}]


def test_a_hosted_tool_passes_through_with_a_warning_and_the_rest_is_refused(tmp_path: Path) -> None:
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        run = ledger.start_run()
        hosted = WebSearchTool()
        with pytest.warns(UserWarning, match="WebSearchTool is not a function tool: its calls are not journaled"):
            assert openai_agents.journaled([hosted], run) == [hosted]
        odd: Any = "restock"
        with pytest.raises(BadInput, match=r"^journaled: int 42 is neither a LangChain tool nor a function$"):
            langchain.journaled([42], run)  # type: ignore[list-item]
        with pytest.raises(BadInput, match=r"^journaled: str 'not a tool' is neither a tool nor a function$"):
            openai_agents.journaled(["not a tool"], run)  # type: ignore[list-item]
        with pytest.raises(BadInput, match=r"^journaled: str 'restock' is neither a Pydantic AI toolset nor a list"):
            pydantic_ai.journaled(odd, run)
        assert [e.type for e in run.events()] == ["run_opened"]
