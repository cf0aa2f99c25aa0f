"""A bare aioquic server for the QUIC baseline: same configuration, certificate and ALPN as
demarkus, but no protocol parsing, no store, no service.

Every stream: read the request to EOF, write back a fixed response (a Mark-style
`---\\nstatus: ok\\n---\\n` header plus a 2 KiB body, or a 1 MiB body when the request path
contains `/1m`), close. Prints `listening on 127.0.0.1:<port>` once bound; stops on SIGTERM.

    .venv/bin/python -m bench.echo_server --cert CERT --key KEY [--port 0]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol

from demarkus.tls import server_configuration

SMALL = 2048
LARGE = 1024 * 1024
HEADER = b"---\nstatus: ok\n---\n"


def body(size: int) -> bytes:
    line = b"The quick brown fox jumps over the lazy dog; markdown text for the bench.\n"
    return (line * (size // len(line) + 1))[:size]


SMALL_RESPONSE = HEADER + body(SMALL)
LARGE_RESPONSE = HEADER + body(LARGE)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()

    tasks: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.read()  # to EOF
        line = request.split(b"\n", 1)[0]
        writer.write(LARGE_RESPONSE if b"/1m" in line else SMALL_RESPONSE)
        writer.write_eof()

    def spawn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # aioquic calls the stream handler synchronously: run the work as a task.
        task = asyncio.ensure_future(handle(reader, writer))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    server = await serve(
        args.host,
        args.port,
        configuration=server_configuration(args.cert, args.key),
        create_protocol=QuicConnectionProtocol,
        stream_handler=spawn,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    port = server._transport.get_extra_info("sockname")[1]
    print(f"listening on {args.host}:{port}", flush=True)
    try:
        await stop.wait()
    finally:
        server.close()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
