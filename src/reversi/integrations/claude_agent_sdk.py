"""Claude Agent SDK hooks: every tool call of an agent built on `claude-agent-sdk` journaled in a run,
and refused there when a halt, the kill switch, a duplicate or an approval says so.

    options = ClaudeAgentOptions(hooks=reversi.integrations.claude_agent_sdk.hooks(ledger))

The SDK runs Claude Code, which hands each hook event to the callbacks in this process, as the same
JSON a command hook reads on stdin; so the rule is `reversi hook`'s (`reversi.integrations.claude_code`):
a session is one run, `run_claude-<session id>`; `PreToolUse` journals the call `intended` before it
runs, and a refusal denies it (`permissionDecision: deny`, with the reason Claude reads);
`PostToolUse` journals its result, `PostToolUseFailure` its error, tied by the tool call id. A call
that cannot be journaled is denied too; an outcome that cannot be journaled is said to the user
(`systemMessage`), and blocks nothing.

With `files=True`, what the agent's `Write`, `Edit` and `Bash` calls change is kept for the undo, as
`reversi hook --files` keeps it, under the fs connector's root: `REVERSI_FS_ROOT`, else this
process's working directory. Set it to the agent's folder (`ClaudeAgentOptions(cwd=...)`).

The store is read and written in a worker thread, never on the SDK's event loop.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import cast

import anyio.to_thread
from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher
from claude_agent_sdk.types import HookEvent

from reversi.core.json_values import LooseJSON
from reversi.engine.async_ledger import AsyncLedger
from reversi.engine.ledger import Ledger
from reversi.integrations.claude_code import HookAnswer, answer_hook, denial

__all__ = ["EVENTS", "hooks", "sdk_answer"]

EVENTS: tuple[HookEvent, ...] = ("PreToolUse", "PostToolUse", "PostToolUseFailure")


def hooks(ledger: Ledger | AsyncLedger, *, matcher: str | None = None, timeout: float | None = None,
          files: bool = False) -> dict[HookEvent, list[HookMatcher]]:
    """The hooks to give `ClaudeAgentOptions(hooks=...)`: each tool call journaled in `ledger`.

    Args:
        ledger: where to journal (its manifests and halts apply).
        matcher: which tools, as Claude Code matches them (`"Write|Edit|Bash"`); every tool when None.
        timeout: seconds Claude Code waits for each callback (its default when None: 60).
        files: keep what the calls change under the fs root, so that a rollback undoes it.

    The `PreToolUse` matcher fails closed (`on_failure="block"`): a callback that raises or does not
    answer in time blocks the call, as one that cannot journal it does. To add hooks of your own,
    extend the lists this returns.
    """
    sync = ledger.sync if isinstance(ledger, AsyncLedger) else ledger

    async def journal(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        event = dict(cast(Mapping[str, LooseJSON], input_data))
        if tool_use_id is not None:
            event.setdefault("tool_use_id", tool_use_id)
        answer = await anyio.to_thread.run_sync(functools.partial(answer_hook, sync, event, files=files))
        return sdk_answer(answer)

    return {event: [HookMatcher(matcher=matcher, hooks=[journal], timeout=timeout,
                                on_failure="block" if event == "PreToolUse" else None)]
            for event in EVENTS}


def sdk_answer(answer: HookAnswer) -> HookJSONOutput:
    """A command hook's answer as a callback returns it: its JSON; exit 2 (block) as a denial with the
    reason; another error as a message to the user; else no opinion (`{}`)."""
    if answer.output is not None:
        return cast(HookJSONOutput, answer.output)
    if answer.exit_code == 2:
        return cast(HookJSONOutput, denial(answer.error))
    if answer.error:
        return {"systemMessage": answer.error}
    return {}
