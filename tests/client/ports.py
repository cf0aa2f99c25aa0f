"""UDP ports on 127.0.0.1 for the connection tests: one where nothing listens, and one that
takes every datagram and never answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


def free_udp_port() -> int:
    """A port where nothing listens: bound to get a free number, then released, so the
    kernel answers a datagram sent there with "port unreachable"."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SilentPort:
    """A bound socket nobody reads: datagrams queue up, nothing answers and no ICMP comes
    back, as with an authority behind a firewall that drops them."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.port = int(sock.getsockname()[1])

    def senders(self) -> set[tuple[str, int]]:
        """The addresses that sent datagrams so far: one per dial, since every dial has a
        socket of its own."""
        seen: set[tuple[str, int]] = set()
        while True:
            try:
                _, sender = self._sock.recvfrom(65536)
            except BlockingIOError:
                return seen
            seen.add(sender)


@contextmanager
def silent_udp_port() -> Iterator[SilentPort]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        yield SilentPort(sock)
