"""An upstream's stderr reaches the gateway's terminal with its control characters escaped: a server
(or what an agent made it print) cannot clear the operator's screen or write to their clipboard."""

from __future__ import annotations

import io

from reversi.gateway.stderr_relay import StderrRelay


def test_an_upstreams_stderr_line_is_passed_on_with_its_escapes_made_visible() -> None:
    out = io.StringIO()
    relay = StderrRelay(out)
    relay.release()
    relay.file.write("boom \x1b[2J\x1b]52;c;cHduZWQ=\x07 \u202eedit\n")
    relay.file.flush()
    assert relay.last_line() is not None  # reads what was written
    shown = out.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert shown == "boom \\x1b[2J\\x1b]52;c;cHduZWQ=\\x07 \\u202eedit\n"
    relay.file.close()
