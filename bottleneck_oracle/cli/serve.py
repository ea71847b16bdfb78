"""``oracle serve``: the HTTP API and the page, on 127.0.0.1 unless told otherwise (then with a token)."""

from __future__ import annotations

import ipaddress
import signal
from pathlib import Path
from typing import Annotated, Optional

import typer

from bottleneck_oracle.cli._render import spinner, stderr
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError

__all__ = ["serve_command"]

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) can be reached from this machine only."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(path: Path) -> str:
    """The token kept in ``path`` (its first line, stripped).

    Raises:
        ConfigError: the file is missing, unreadable or empty.
    """
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise ConfigError(f"--token-file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--token-file {path}: cannot read it ({type(e).__name__})") from None
    token = lines[0].strip() if lines else ""
    if not token:
        raise ConfigError(f"--token-file {path}: empty; put the token on its first line")
    return token


def serve_command(
    host: Annotated[str, typer.Option(help="The address to listen on; anything but loopback needs --token-file.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on.", min=1, max=65535)] = 8765,
    token_file: Annotated[Optional[Path], typer.Option(
        "--token-file", help="A file whose first line is the token every API request must carry "
                             "(Authorization: Bearer TOKEN); the page takes it from its URL (#token=...).")] = None,
    max_upload_mb: Annotated[int, typer.Option(help="The most one trace upload may send, all files together.",
                                               min=1)] = 256,
) -> None:
    """Serve the HTTP API and the page: traces, steps, timelines, findings, what-if, optimize and the chat."""
    token = read_token(token_file) if token_file is not None else None
    if token is None and not is_loopback(host):
        raise ConfigError(f"--host {host}: not a loopback address; serving it needs --token-file "
                          "(every request must then carry the token)")
    import uvicorn

    from bottleneck_oracle.graphdb import open_store
    from bottleneck_oracle.server import create_app

    settings = Settings.from_env()
    with spinner(stderr(), "starting the graph database..."), open_store(settings, start=True):
        pass  # a database that cannot start fails here, in one line, before the server listens
    app = create_app(settings, token=token, max_upload_mb=max_upload_mb)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"#token={token}" if token else "")
    stderr().print(f"Bottleneck Oracle on [bold]{url}[/] (Ctrl-C stops it)", highlight=False, soft_wrap=True)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.run()
    except KeyboardInterrupt:
        pass  # Ctrl-C or SIGTERM: uvicorn has shut down (the database connection closed), then passed it on
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not server.started:
        raise ConfigError(f"the server did not start on {host}:{port} (see the log above)")
    stderr().print("stopped")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
