"""What an `strace -f -y` log says a process tree did to the world outside it: the paths it
changed on disk and the network addresses it tried to reach.

Pure: the test runs strace, this reads its output. Only what the checks need is decoded:
the path arguments of the calls that change files (resolved against the directory file
descriptor strace prints with `-y`, `AT_FDCWD</cwd>` included) and the addresses of the
calls that send to or connect a socket.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

STRACE_OPTIONS = ("-f", "-qq", "-y", "-s", "256", "-e", "trace=%file,%network", "-e", "signal=none")
"""Follow children, say nothing of attaching or exits, print the path behind every file
descriptor, and trace the file and network calls only."""

WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")

# call name -> positions of (directory fd, path) pairs it changes; a fd position of None
# means the path is relative to the process's working directory
CHANGES: dict[str, tuple[tuple[int | None, int], ...]] = {
    "creat": ((None, 0),),
    "mkdir": ((None, 0),),
    "mkdirat": ((0, 1),),
    "rmdir": ((None, 0),),
    "unlink": ((None, 0),),
    "unlinkat": ((0, 1),),
    "rename": ((None, 0), (None, 1)),
    "renameat": ((0, 1), (2, 3)),
    "renameat2": ((0, 1), (2, 3)),
    "link": ((None, 1),),
    "linkat": ((2, 3),),
    "symlink": ((None, 1),),
    "symlinkat": ((1, 2),),
    "truncate": ((None, 0),),
    "chmod": ((None, 0),),
    "fchmodat": ((0, 1),),
    "chown": ((None, 0),),
    "lchown": ((None, 0),),
    "fchownat": ((0, 1),),
    "utime": ((None, 0),),
    "utimes": ((None, 0),),
    "utimensat": ((0, 1),),
    "futimesat": ((0, 1),),
    "mknod": ((None, 0),),
    "mknodat": ((0, 1),),
    "setxattr": ((None, 0),),
    "lsetxattr": ((None, 0),),
    "removexattr": ((None, 0),),
    "lremovexattr": ((None, 0),),
}
OPENS: dict[str, tuple[int | None, int, int]] = {"open": (None, 0, 1), "openat": (0, 1, 2), "openat2": (0, 1, 2)}
SENDS = frozenset({"connect", "sendto", "sendmsg", "sendmmsg"})

CALL = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<result>-?\d+|\?)")
FD = re.compile(r"^(?:\d+|AT_FDCWD)<(?P<path>[^>]*)>")
IPV4 = re.compile(r'inet_addr\("(?P<address>[^"]+)"\)')
IPV6 = re.compile(r'inet_pton\(AF_INET6,\s*"(?P<address>[^"]+)"')
ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)")
SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", '"': '"', "\\": "\\"}


@dataclass(frozen=True)
class Change:
    """A call that changed (or succeeded in opening for writing) a path."""

    call: str
    path: str


@dataclass(frozen=True)
class Reach:
    """A call that sent to or connected a socket with an internet address."""

    call: str
    address: str

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.address).is_loopback


@dataclass(frozen=True)
class Trace:
    changes: tuple[Change, ...]
    reaches: tuple[Reach, ...]
    executed: tuple[str, ...]
    """The programs the traced processes started, to tell that children were followed."""
    calls: int
    """How many complete calls the log held, to tell an empty log from a quiet process."""

    def changed_outside(self, *roots: str) -> list[Change]:
        """The changes to paths under none of `roots` (each an absolute directory)."""
        return [change for change in self.changes if not any(inside(change.path, root) for root in roots)]

    def internet(self) -> list[Reach]:
        return [reach for reach in self.reaches if not reach.loopback]


def inside(path: str, root: str) -> bool:
    return PurePosixPath(path).is_relative_to(PurePosixPath(root))


def parse_trace(lines: Iterable[str], cwd: str) -> Trace:
    """Read an strace log; `cwd` resolves a relative path given to a call without a
    directory fd (the traced tree is started there; strace does not print it for them)."""
    changes: list[Change] = []
    reaches: list[Reach] = []
    executed: list[str] = []
    calls = 0
    for line in joined(lines):
        found = CALL.match(line)
        if not found:
            continue
        calls += 1
        name, args, result = found["name"], split_arguments(found["args"]), found["result"]
        if name in SENDS:
            reaches.extend(Reach(name, address) for address in addresses(found["args"]))
            continue
        if result == "?" or int(result) < 0:
            continue  # nothing changed
        if name == "execve":
            executed.extend(path for path in (unquoted(args[0]),) if path is not None)
        elif name in OPENS:
            fd, path, flags = OPENS[name]
            if len(args) > flags and any(flag in args[flags] for flag in WRITE_FLAGS):
                changes.extend(resolved(name, args, ((fd, path),), cwd))
        elif name in CHANGES:
            changes.extend(resolved(name, args, CHANGES[name], cwd))
    return Trace(changes=tuple(changes), reaches=tuple(reaches), executed=tuple(executed), calls=calls)


def joined(lines: Iterable[str]) -> Iterable[str]:
    """Whole calls: `strace -f` splits a call that another process interrupts into
    `... <unfinished ...>` and `<... name resumed>...`; join the two halves by pid."""
    pending: dict[str, str] = {}
    for raw in lines:
        line = raw.rstrip("\n")
        pid, _, rest = line.partition(" ")
        rest = rest.lstrip()
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        resumed = re.match(r"<\.\.\. \w+ resumed>\s?(.*)$", rest)
        if resumed:
            rest = pending.pop(pid, "") + resumed[1]
        yield f"{pid} {rest}"


def split_arguments(text: str) -> list[str]:
    """Top-level arguments: commas inside quotes, (), [], {} and <> do not split."""
    arguments: list[str] = []
    depth, quoted, escaped, start = 0, False, False, 0
    for index, char in enumerate(text):
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        elif char == "," and depth == 0:
            arguments.append(text[start:index].strip())
            start = index + 1
    arguments.append(text[start:].strip())
    return arguments


def resolved(name: str, args: list[str], pairs: tuple[tuple[int | None, int], ...], cwd: str) -> list[Change]:
    changes = []
    for fd_position, path_position in pairs:
        if path_position >= len(args):
            continue
        base = cwd
        if fd_position is not None and fd_position < len(args):
            fd = FD.match(args[fd_position])
            if fd:
                base = fd["path"]
        path = unquoted(args[path_position])
        if path is None:  # NULL: the call acts on the directory fd itself
            changes.append(Change(name, base))
        else:
            changes.append(Change(name, str(PurePosixPath(base, path))))
    return changes


def unquoted(argument: str) -> str | None:
    """An strace string argument as the path it names (C escapes undone), None for NULL."""
    if not argument.startswith('"'):
        return None
    body = argument[1 : argument.rindex('"')]
    return ESCAPE.sub(unescape, body)


def unescape(found: re.Match[str]) -> str:
    code = found[1]
    if code.startswith("x"):
        return chr(int(code[1:], 16))
    if code.isdigit():
        return chr(int(code, 8))
    return SIMPLE_ESCAPES.get(code, code)


def addresses(args: str) -> list[str]:
    return [found["address"] for found in (*IPV4.finditer(args), *IPV6.finditer(args))]
