"""A tool's answer that came as text and was read as JSON, with the text kept beside it. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from reversi.core.json_values import LooseJSON

__all__ = ["TextAnswer"]


@dataclass(frozen=True)
class TextAnswer:
    """An answer whose text parsed as JSON: `value`, what `$result` (or `$before`) names, and `text`, the
    text as it came, what `$result_text` (`$before_text`) names. Text that happens to parse (`"[]"`,
    `"42"`) changes type in `value`; `text` keeps what the tool said."""

    value: LooseJSON
    text: str
