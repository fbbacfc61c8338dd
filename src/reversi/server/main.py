"""`reversi-server`: serve the HTTP API with uvicorn until SIGTERM or Ctrl-C.

Errors at start print `reversi-server: error: MESSAGE` and exit 1.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

import click

from reversi.core.printable import TerminalFormatter, for_terminal
from reversi.distribution import NAME


def _say(message: str) -> None:
    click.echo(f"reversi-server: {for_terminal(message)}", err=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--db", metavar="URL", help="Store URL (default: REVERSI_DB, reversi.yaml, sqlite:///.reversi/reversi.db).")
@click.option("--config", metavar="FILE", help="Config file (default: REVERSI_CONFIG, else ./reversi.yaml).")
@click.option("-m", "--manifest", "manifests", multiple=True, metavar="FILE", help="Manifest file (repeatable).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]), help="How much to log.")
@click.version_option(package_name=NAME, prog_name="reversi-server")
def serve(host: str, port: int, db: str | None, config: str | None, manifests: tuple[str, ...], log_level: str) -> None:
    """Serve Reversi's web console (/) and HTTP API (/v1/..., /healthz, /metrics, /openapi.json).

    Rollback jobs run REVERSI_COMPENSATOR_CMD (and REVERSI_READER_CMD for declared read-backs).
    """
    import uvicorn

    import reversi
    from reversi.engine.config import load_settings
    from reversi.engine.keys import is_loopback
    from reversi.errors import ConfigError
    from reversi.listening import listen
    from reversi.server.app import create_app

    _log_to_stderr(log_level)
    settings = load_settings(config=config, db=db, manifests=manifests)
    # bound first: an address in use is one line of error, not uvicorn's traceback
    with reversi.open(settings.db, manifests=settings.manifests, config=config) as ledger, listen(host, port) as sock:
        port = sock.getsockname()[1]
        if not ledger.has_keys():
            if not is_loopback(host):
                raise ConfigError(
                    f"the store holds no API keys: refusing to serve {host} without them; create one with "
                    "`reversi keys create NAME --role admin`, or serve 127.0.0.1"
                )
            _say("the store holds no API keys: serving loopback only; every request acts as the admin `local`")
        if not settings.compensator_cmd:
            _say("no REVERSI_COMPENSATOR_CMD: POST /v1/runs/{id}/rollback with confirm: true answers 409")
        app = create_app(ledger)
        _say(f"console at http://{host}:{port}/, API under /v1 (Ctrl-C to stop)")
        server = _server_class()(
            uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="on")
        )
        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:  # uvloop, as uvicorn.run
            runner.run(_serve(server, host, sock))
    _say("stopped")


def _log_to_stderr(level: str) -> None:
    import logging

    handler = logging.StreamHandler()
    handler.setFormatter(TerminalFormatter("reversi-server: %(message)s"))
    logger = logging.getLogger("reversi")
    logger.addHandler(handler)
    logger.setLevel(level.upper())


def _server_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that after a graceful shutdown on SIGTERM the process exits 0."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            self._captured_signals.clear()

    return Server


async def _serve(server: Any, host: str, sock: socket.socket) -> None:
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if server.started:
        bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else server.config.port
        shown = f"[{host}]" if ":" in host else host
        _say(f"listening on http://{shown}:{bound}")
    await task


def main(argv: Sequence[str] | None = None) -> None:
    """Run the server; exit 1 with a one-line error when it cannot start."""
    from reversi.errors import ReversiError

    try:
        serve.main(args=list(argv) if argv is not None else None, prog_name="reversi-server", standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as exc:
        _say(f"error: {exc.format_message()}")
        sys.exit(1)
    except ReversiError as exc:
        _say(f"error: {exc.message}")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(0)
