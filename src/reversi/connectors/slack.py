"""The `slack` connector: messages over Slack's Web API.

Requests go to `SLACK_API_URL` (default https://slack.com/api) with `SLACK_BOT_TOKEN`. Slack answers
errors as HTTP 200 `{"ok": false, "error": "..."}`; they are failures naming that error. Slack has
no idempotency header, so deleting a message reads it first: a message already gone is already
undone. A message that has replies since is not deleted (that would orphan other people's thread).
A posted message comes back sealed (`reversi.connectors._seal`); the undo takes that whole result and
deletes only the message its seal covers, so a forged or altered result deletes nothing.
"""

from __future__ import annotations

from reversi.connectors._base import STEP, Connector, Param, Setting, Tool, sealed_result
from reversi.connectors._base import ToolKind as Kind
from reversi.connectors._http import Service
from reversi.connectors._seal import sealed, unseal
from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON, LooseJSONObject
from reversi.errors import ChangedSince, DownstreamError, UntrustedResult

__all__ = ["CONNECTOR", "delete_message", "get_message", "post_message"]


def _message(body: LooseJSON) -> str | None:
    return str(body.get("error")) if isinstance(body, dict) and body.get("error") else None


SLACK = Service(
    "Slack",
    Setting("SLACK_API_URL", "Slack's Web API", "https://slack.com/api"),
    Setting("SLACK_BOT_TOKEN", "a bot token (xoxb-...) with chat:write and channels:history", "none: required"),
    _message,
)


def _call(http: str, method: str, **fields: LooseJSON) -> LooseJSONObject:
    """One Web API method; `ok: false` raises with Slack's error."""
    sent = {k: v for k, v in fields.items() if v is not None}
    answer = SLACK.request(http, f"/{method}", json=sent if http == "POST" else None,
                           params=sent if http == "GET" else None)
    body = answer.body if isinstance(answer.body, dict) else {}
    if not body.get("ok"):
        raise DownstreamError(f"Slack {method}: {body.get('error') or 'no ok in the answer'}", answer.status)
    return body


def _find(channel: str, ts: str, thread_ts: str | None) -> LooseJSONObject | None:
    try:
        if thread_ts:
            found = _call("GET", "conversations.replies", channel=channel, ts=thread_ts, latest=ts, oldest=ts,
                          inclusive="true", limit=1)
        else:
            found = _call("GET", "conversations.history", channel=channel, latest=ts, oldest=ts, inclusive="true",
                          limit=1)
    except DownstreamError as exc:
        if exc.message.endswith(": thread_not_found"):
            return None
        raise
    return next((m for m in found.get("messages", []) if m.get("ts") == ts), None)


@sealed("slack.post_message")
def post_message(channel: str, text: str, thread_ts: str | None = None) -> JSONObject:
    """Post a message (in a thread with `thread_ts`). Undo: `slack.delete_message`."""
    posted = _call("POST", "chat.postMessage", channel=channel, text=text, thread_ts=thread_ts)
    return {**posted, "thread_ts": thread_ts}


def delete_message(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Delete the message `result` (the sealed result of `slack.post_message`) names; one already gone
    is already undone.

    Raises:
        UntrustedResult: the result is not one this connector's `slack.post_message` made.
        ChangedSince: people replied to it since.
    """
    posted = unseal(result, {"slack.post_message"}).result
    channel, ts, thread_ts = posted.get("channel"), posted.get("ts"), posted.get("thread_ts")
    if not isinstance(channel, str) or not isinstance(ts, str) or not isinstance(thread_ts, str | None):
        raise UntrustedResult("the sealed result of slack.post_message names no channel and ts")
    found = _find(channel, ts, thread_ts)
    if found is not None:
        replies = int(found.get("reply_count") or 0)
        if replies:
            raise ChangedSince(step, f"message {ts} in {channel} has {replies} repl{'y' if replies == 1 else 'ies'}")
        try:
            _call("POST", "chat.delete", channel=channel, ts=ts)
        except DownstreamError as exc:
            if not exc.message.endswith(": message_not_found"):
                raise
    return {"ok": True, "channel": channel, "ts": ts}


def get_message(channel: str, ts: str, thread_ts: str | None = None) -> LooseJSONObject:
    """`{"found", "message"}` for the message with this timestamp."""
    found = _find(channel, ts, thread_ts)
    return {"channel": channel, "ts": ts, "found": found is not None, "message": found}


_CHANNEL = Param("channel", "string", "the channel's id (C...)")
_TS = Param("ts", "string", "the message's timestamp (its id)")
_THREAD = Param("thread_ts", "string", "the thread's parent timestamp", required=False, nullable=True)

CONNECTOR = Connector(
    name="slack",
    description="Slack messages",
    settings=SLACK.settings,
    tools=(
        Tool("slack.post_message", Kind.FORWARD, post_message, "Post a message.",
             (_CHANNEL, Param("text", "string", "the message"), _THREAD)),
        Tool("slack.delete_message", Kind.COMPENSATION, delete_message, "Delete a message nobody replied to.",
             (sealed_result("slack.post_message"), STEP), destructive=True, idempotent=True),
        Tool("slack.get_message", Kind.READ, get_message, "A message, or found: false.", (_CHANNEL, _TS, _THREAD)),
    ),
)
