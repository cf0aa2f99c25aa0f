"""The strace reader behind the OpenCode containment check, on lines strace 6 prints."""

from __future__ import annotations

from .syscalls import Change, Reach, parse_trace, split_arguments

LOG = """\
100  execve("/opt/opencode", ["opencode", "mcp", "list"], 0x7ffe9b69eab8 /* 8 vars */) = 0
100  openat(AT_FDCWD</t/work>, "/t/data/opencode/opencode.db", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 14</t/data/opencode/opencode.db>
100  openat(AT_FDCWD</t/work>, "/etc/passwd", O_RDONLY|O_CLOEXEC) = 3</etc/passwd>
100  openat(AT_FDCWD</t/work>, "/home/me/.config/x.json", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EACCES (Permission denied)
101  mkdir("/t/state/opencode", 0777 <unfinished ...>
100  openat(AT_FDCWD</t/work>, "notes.txt", O_WRONLY|O_CREAT|O_APPEND, 0666) = 5</t/work/notes.txt>
101  <... mkdir resumed>)              = 0
101  unlinkat(18</t/state/opencode/locks/a.lock>, "meta.json", 0) = 0
101  utimensat(7</home/me/.cache/stamp>, NULL, NULL, 0) = 0
102  rename("/t/tmp/x.tmp", "/home/me/.local/share/x") = 0
102  mkdir("/t", 0777)                 = -1 EEXIST (File exists)
103  connect(9<socket:[1]>, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("203.0.113.80")}, 16) = -1 EINPROGRESS (Operation now in progress)
103  connect(9<socket:[2]>, {sa_family=AF_INET, sin_port=htons(6309), sin_addr=inet_addr("127.0.0.1")}, 16) = 0
103  sendto(10<socket:[3]>, "\\x01", 1, 0, {sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "2001:db8::1", &sin6_addr), sin6_scope_id=0}, 28) = 1
103  sendto(19<socket:[4]>, "{\\"method\\":\\"initialize\\"}", 24, MSG_DONTWAIT, NULL, 0) = 24
104  openat(AT_FDCWD</t/work>, "/t/odd\\"name, with comma", O_WRONLY|O_CREAT, 0600) = 6</t/odd"name, with comma>
+++ exited with 0 +++
"""


def test_changes_are_the_successful_writes_with_their_paths_resolved():
    trace = parse_trace(LOG.splitlines(keepends=True), cwd="/t/work")
    assert trace.changes == (
        Change("openat", "/t/data/opencode/opencode.db"),
        Change("openat", "/t/work/notes.txt"),
        Change("mkdir", "/t/state/opencode"),
        Change("unlinkat", "/t/state/opencode/locks/a.lock/meta.json"),
        Change("utimensat", "/home/me/.cache/stamp"),
        Change("rename", "/t/tmp/x.tmp"),
        Change("rename", "/home/me/.local/share/x"),
        Change("openat", '/t/odd"name, with comma'),
    )
    assert trace.calls == 15  # the unfinished mkdir and its resumption are one call
    assert trace.executed == ("/opt/opencode",)


def test_changes_outside_the_given_roots_are_named():
    trace = parse_trace(LOG.splitlines(keepends=True), cwd="/t/work")
    assert trace.changed_outside("/t") == [
        Change("utimensat", "/home/me/.cache/stamp"),
        Change("rename", "/home/me/.local/share/x"),
    ]
    assert trace.changed_outside("/t", "/home/me") == []
    assert trace.changed_outside("/t/data") != []


def test_every_attempt_at_an_internet_address_counts_and_loopback_does_not():
    trace = parse_trace(LOG.splitlines(keepends=True), cwd="/t/work")
    assert trace.reaches == (
        Reach("connect", "203.0.113.80"),
        Reach("connect", "127.0.0.1"),
        Reach("sendto", "2001:db8::1"),
    )
    assert trace.internet() == [Reach("connect", "203.0.113.80"), Reach("sendto", "2001:db8::1")]


def test_arguments_split_only_at_top_level_commas():
    assert split_arguments('AT_FDCWD</a,b>, "x, \\"y\\"", {a=1, b=[2, 3]}, 0') == [
        "AT_FDCWD</a,b>",
        '"x, \\"y\\""',
        "{a=1, b=[2, 3]}",
        "0",
    ]
