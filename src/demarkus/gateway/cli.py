"""`demarkus gateway --config gateway.toml`: serve the gateway with uvicorn.

Plain HTTP only on a loopback address (development); any other address needs the
configuration's cert and key (HTTPS). Prints `gateway listening on <url>/mcp` once the
socket is bound; access-log lines (JSON) go to stderr.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
from pathlib import Path

import click

from ..errors import ConfigError, DemarkusError
from ..logs import configure_logging
from .config import GatewayConfig


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(512)
    sock.setblocking(False)
    return sock


async def serve(config: GatewayConfig, host: str, port: int, banner: bool = True) -> None:
    """Run the gateway until SIGINT/SIGTERM."""
    import uvicorn

    from .app import create_app

    tls = config.cert is not None
    if not tls and not _loopback(host):
        raise ConfigError(
            f"{config.source}: plain HTTP is for loopback only and --host is {host}; "
            "set cert and key in [gateway] for HTTPS, or listen on 127.0.0.1"
        )
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    app = create_app(config, host=host)
    uv_config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ssl_certfile=str(config.cert) if config.cert else None,
        ssl_keyfile=str(config.key) if config.key else None,
    )
    server = uvicorn.Server(uv_config)
    if banner:
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"gateway listening on {'https' if tls else 'http'}://{shown}:{bound}/mcp")
        sys.stdout.flush()
    await server.serve(sockets=[sock])


@click.command(name="gateway")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Gateway configuration (TOML): worlds, callers, limits, TLS.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (plain HTTP only on loopback)."
)
@click.option("--port", default=8787, show_default=True, type=int, help="TCP port; 0 picks a free one.")
def gateway(config_path: Path, host: str, port: int) -> None:
    """Serve many worlds to remote agents: MCP over streamable HTTP at /mcp, with bearer tokens."""
    configure_logging("demarkus.gateway.access")
    try:
        config = GatewayConfig.load(config_path)
        asyncio.run(serve(config, host, port))
    except DemarkusError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except OSError as exc:
        click.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # python -m demarkus.gateway.cli, until `demarkus gateway` is registered
    gateway()
