"""Every error Reversi raises, in one tree.

    ReversiError
    ├── BadInput                 a value from outside is wrong (ids, flags, JSON, step numbers)
    │   ├── ManifestError        a manifest file is invalid; `.problems` lists each as FILE:LINE
    │   ├── ConfigError          something needed is not configured (kill file, compensator)
    │   └── BodyTooLarge         a request body over the HTTP surfaces' limit (1 MiB)
    ├── Unauthorized             no API key, or one that is unknown or revoked
    ├── NotFound                 no such run, step, approval or halt
    ├── Forbidden                the run belongs to another principal, or the role is too low
    │   └── CsrfRefused          a console form without its session's token
    ├── Conflict                 the request clashes with the state of the run
    │   ├── RollbackInProgress   another process holds the run's rollback lock
    │   ├── Fenced               this rollback's hold on its run was taken over: it stops, journaling nothing more
    │   ├── NotCompensable       a step cannot be claimed for a remote compensation
    │   ├── NoCompensator        a rollback job was asked for and no compensator is configured
    │   └── NoReader             probes were asked for and no reader is configured
    ├── StoreUnavailable         the store cannot be reached or stays locked
    │   └── WriteConflict        the database undid a write to break a deadlock (it is retried)
    ├── Interrupted              Ctrl-C stopped a command part way; the message says what it left
    ├── DrillFailed              a drill could not be carried out: the server refused a call or went away
    ├── ConnectorError           a connector could not do what it was asked
    │   ├── UnknownTool          no connector offers the tool (`unknown tool: NAME`)
    │   ├── BadArgument          an argument is missing, of the wrong type, or unacceptable
    │   ├── ChangedSince         the world changed since the forward call: the undo would clobber it
    │   ├── UntrustedResult      the forward result an undo was given is not one this connector sealed
    │   └── DownstreamError      the external system answered with an error (status and its message)
    │       └── ToolAnsweredError  a tool answered with an error of its own (MCP `isError`), e.g. a read of what is gone
    └── Refused                  a new call stopped before it ran (journaled as `refused`)
        ├── CaptureFailed        the manifest's capture (the read before the call) failed
        ├── Halted               a halt or the kill file
        ├── Duplicate            the same logical call still stands
        ├── NoManifestEntry      enforce mode and no manifest entry for the tool
        ├── ApprovalRequired     the call waits for an approval (`.approval_id`)
        └── ApprovalDenied       the approval for the call was denied

Each class carries a stable `code`, the HTTP status a server answers with and the CLI exit code.

Signals are the other kind: exceptions that carry a finding from one layer to the one that called it,
are caught there by name, and never reach a user as they are (each catcher turns it into a reason, a
report line or one of the errors above). They have no code or status.

    Signal
    ├── MissingReference         a manifest's `$` reference names nothing in the call (`.ref`)
    ├── WindowUnknown            an undo window's moment cannot be read from what the call journaled
    ├── KeepWrites               a write function's refusal: commit what it wrote, then raise `.error`
    ├── CommandFailed            an operator's command exited non-zero, timed out or printed nothing usable
    ├── UpstreamUnavailable      the gateway's upstream is not connected: the request was never sent
    ├── UpstreamLost             the upstream's connection ended with the request in flight: it may have run
    ├── SchemaFilesError         the package's SQL files break their naming rules (a packaging mistake)
    └── DemoFailed               a call of the demo did not answer as designed

A module-private exception (named `_Like_this`) never leaves its module and is not drawn here.
"""

from __future__ import annotations

from collections.abc import Sequence


class ReversiError(Exception):
    """Base of every error the library raises."""

    code = "error"
    http_status = 500
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        """The error as the JSON object the HTTP API and `--json` output use."""
        return {"code": self.code, "message": self.message}


class BadInput(ReversiError):
    """A value that came from outside is not acceptable; nothing was changed."""

    code = "bad_input"
    http_status = 400


class ManifestError(BadInput):
    """One or more manifests are invalid; `problems` holds each `FILE:LINE: message`."""

    code = "bad_manifest"

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid manifest:\n" + "\n".join(self.problems))


class ConfigError(BadInput):
    """Something the command needs is not configured."""

    code = "not_configured"


class BodyTooLarge(BadInput):
    """A request body over the limit (1 MiB)."""

    code = "too_large"
    http_status = 413

    def __init__(self, limit: int = 1 << 20) -> None:
        super().__init__(f"the body is larger than {limit} bytes")


class Unauthorized(ReversiError):
    """No key, or a key that is unknown or revoked."""

    code = "unauthorized"
    http_status = 401


class NotFound(ReversiError):
    """No such run, step, approval or halt."""

    code = "not_found"
    http_status = 404


class Forbidden(ReversiError):
    """The principal may not act on this run."""

    code = "forbidden"
    http_status = 403


class CsrfRefused(Forbidden):
    """A console form posted without the token of its session."""

    code = "csrf"


class Conflict(ReversiError):
    """The request clashes with the current state."""

    code = "conflict"
    http_status = 409


class RollbackInProgress(Conflict):
    """Another rollback of the same run holds its lock."""

    code = "rollback_in_progress"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"rollback already in progress for {run_id}")
        self.run_id = run_id


class Fenced(Conflict):
    """This process's hold on a run's rollback was taken over (its lease ran out while it was stopped or
    cut off): its journal writes are refused, and it stops."""

    code = "fenced"

    def __init__(self, run_id: str, token: int, current: int | None) -> None:
        now = f"it is {current} now" if current is not None else "it holds the run no more"
        super().__init__(
            f"the rollback of {run_id} was taken over by another process (this one held fencing token {token}; "
            f"{now}): stopped without journaling more"
        )
        self.run_id, self.token, self.current = run_id, token, current


class NotCompensable(Conflict):
    """The step cannot be claimed for a remote compensation."""

    code = "not_compensable"


class NoReader(Conflict):
    """Probes were asked for, and nothing is configured to read with."""

    code = "no_reader"

    def __init__(self) -> None:
        super().__init__("no reader configured: start the server with REVERSI_READER_CMD (or reader_cmd: in "
                         "reversi.yaml) to read the probes")


class NoCompensator(Conflict):
    """A rollback job was asked for, and nothing is configured to run the compensations."""

    code = "no_compensator"

    def __init__(self) -> None:
        super().__init__(
            "no compensator configured: start the server with REVERSI_COMPENSATOR_CMD (or compensator_cmd: "
            "in reversi.yaml) to run rollbacks"
        )


class StoreUnavailable(ReversiError):
    """The store could not be reached, or stayed locked, after brief retries.

    Its message is one line, whatever the driver said (psycopg's run over several), as every
    surface shows it: a CLI error line, a JSON error, an MCP tool error.
    """

    code = "store_unavailable"
    http_status = 503

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class WriteConflict(StoreUnavailable):
    """The database undid a write to break a lock cycle between two writers; running it again works."""

    code = "write_conflict"


class Interrupted(ReversiError):
    """The operator stopped a command part way (Ctrl-C); the message says what it left and what to do."""

    code = "interrupted"
    exit_code = 130  # as a program ended by SIGINT


class DrillFailed(ReversiError):
    """A drill could not be carried out (the server refused the forward call, a setup call or a read,
    or went away); nothing is recorded."""

    code = "drill_failed"


class Refused(ReversiError):
    """A new call was stopped before it ran; it was journaled as `refused` and nothing was called."""

    code = "refused"
    http_status = 403


class CaptureFailed(Refused):
    """The read the manifest makes before the call (`capture`) failed; the call was not made."""

    code = "capture_failed"


class Halted(Refused):
    """A halt or the kill file stops new calls (`kill switch: REASON`, then the halt and what it stops);
    `.halt_id` names the halt (None: the kill file)."""

    code = "halted"

    def __init__(self, message: str, halt_id: str | None = None) -> None:
        super().__init__(message)
        self.halt_id = halt_id


class Duplicate(Refused):
    """The same logical call (same idempotency key) still stands."""

    code = "duplicate"
    http_status = 409


class NoManifestEntry(Refused):
    """Enforce mode refuses a tool with no manifest entry."""

    code = "no_manifest_entry"


class ApprovalRequired(Refused):
    """The call waits for a person to approve it (`approval required: apr_...`)."""

    code = "approval_required"
    http_status = 202

    def __init__(self, message: str, approval_id: str) -> None:
        super().__init__(message)
        self.approval_id = approval_id


class ApprovalDenied(Refused):
    """The approval for this call was denied (`approval denied: NOTE`)."""

    code = "approval_denied"


class ConnectorError(ReversiError):
    """A connector could not do what it was asked; nothing was changed unless the message says so."""

    code = "connector_error"


class UnknownTool(ConnectorError):
    """No connector offers this tool."""

    code = "unknown_tool"
    http_status = 404

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown tool: {name}")


class BadArgument(ConnectorError):
    """An argument is missing, has the wrong type, or names something the connector refuses."""

    code = "bad_argument"
    http_status = 400

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"bad argument {name}: {problem}")
        self.argument = name


class ChangedSince(ConnectorError):
    """The world differs from what the forward call left, so the undo does not clobber it."""

    code = "changed_since"
    http_status = 409

    def __init__(self, step: int | None, what: str) -> None:
        since = f"step {step}" if step is not None else "the forward call"
        super().__init__(f"changed since {since}: {what}")


class UntrustedResult(ConnectorError):
    """The forward result an undo was handed carries no valid seal of this connector: it was forged,
    changed, or made under another key. Nothing was changed."""

    code = "untrusted_result"
    http_status = 400

    def __init__(self, problem: str) -> None:
        super().__init__(f"untrusted result: {problem}")


class DownstreamError(ConnectorError):
    """The external system refused or failed the request; `status` is its HTTP status (0: no answer)."""

    code = "downstream_error"
    http_status = 502

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class ToolAnsweredError(DownstreamError):
    """A tool answered with an error of its own (MCP `isError`): the answer `expect: {$error: ...}` looks
    for (a read of something deleted), and what a capture's `absent_on_error` looks into. Raise it from a
    `verifier=` or `capture=` callable for such an answer; any other exception is a failed read."""

    code = "tool_error"


class Signal(Exception):
    """Base of the exceptions that carry a finding between layers, caught by name (see the tree above)."""


class MissingReference(Signal):
    """A reference named nothing (e.g. `$result.id` when the result has no `id`).

    Attributes:
        ref: The reference as written, `${...}` parts given in their `$...` form.
    """

    def __init__(self, ref: str) -> None:
        super().__init__(f"reference {ref} names nothing")
        self.ref = ref


class WindowUnknown(Signal, ValueError):
    """The window's moment could not be read from what the call journaled."""


class KeepWrites(Signal):
    """Raised by a write function to commit what it wrote and still raise `error` to its caller.

    A refusal is such an error: the `refused` event must land, and the caller must still hear no.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


class CommandFailed(Signal):
    """The command exited non-zero, timed out, could not start, or printed something unusable."""


class UpstreamUnavailable(Signal):
    """The upstream is not connected: the request was never sent."""


class UpstreamLost(Signal):
    """The connection ended while the request was in flight: it may have taken effect."""


class SchemaFilesError(Signal):
    """The package's SQL files break the naming rules (a packaging mistake, not a user's)."""


class DemoFailed(Signal):
    """A call of the demo did not answer as designed."""
