"""The gateway configuration: the documented example parses into frozen values, and every
mistake is a ConfigError naming the file, the table and the field."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from demarkus import auth
from demarkus.errors import ConfigError
from demarkus.gateway import GatewayConfig
from demarkus.gateway.config import SESSION_IDLE_TIMEOUT, SESSIONS_PER_CALLER

HASH = auth.hash_token("alice-token")
OTHER = auth.hash_token("bob-token")


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "store").mkdir()
    (tmp_path / "ca.pem").write_text("not checked here\n", encoding="utf-8")
    (tmp_path / "tokens.toml").write_text("", encoding="utf-8")
    return tmp_path


def example(files: Path) -> str:
    return f"""
[gateway]
rate_per_minute = 120
max_upstream = 8
upstream_wait = 0
max_sessions_per_caller = 4
session_idle_timeout = 60
[worlds.peps]
authority = "mark://localhost:7000"
ca = "ca.pem"
dial = "127.0.0.1"
[worlds.alice-private]
root = "store"
tokens = "tokens.toml"
[callers.alice]
hash = "{HASH}"
read = ["peps", "alice-private"]
write = ["alice-private"]
expires = 2027-01-01T00:00:00Z
[callers.alice.upstream]
peps = "capability-for-peps"
[callers.bob]
hash = "{OTHER}"
read = ["peps"]
expires = "2027-06-01T00:00:00+02:00"
rate_per_minute = 5
"""


def test_the_example_parses_into_frozen_values_with_paths_from_the_files_folder(files: Path):
    path = files / "gateway.toml"
    path.write_text(example(files), encoding="utf-8")
    config = GatewayConfig.load(path)
    assert config.source == str(path)
    assert (config.rate_per_minute, config.max_upstream, config.max_upstream_per_world, config.upstream_wait) == (
        120,
        8,
        6,
        0.0,
    )
    assert config.upstream_timeout == 5.0 and config.cert is None and config.key is None
    assert config.upstream_answer_timeout == 30.0
    assert (config.max_sessions_per_caller, config.session_idle_timeout) == (4, 60.0)
    peps, private = config.worlds["peps"], config.worlds["alice-private"]
    assert (peps.authority, peps.ca, peps.dial, peps.root) == (
        "mark://localhost:7000",
        files / "ca.pem",
        "127.0.0.1",
        None,
    )
    assert (private.root, private.tokens, private.authority) == (files / "store", files / "tokens.toml", None)
    alice = config.callers["alice"]
    assert alice.read == ("alice-private", "peps") and alice.write == ("alice-private",)
    assert dict(alice.upstream) == {"peps": "capability-for-peps"}
    assert alice.expires == datetime(2027, 1, 1, tzinfo=UTC)
    assert config.callers["bob"].rate_per_minute == 5
    assert config.callers["bob"].expires == datetime(2027, 5, 31, 22, tzinfo=UTC)
    assert config.caller_by_hash(HASH) is alice and config.caller_by_hash(auth.hash_token("nope")) is None
    assert alice.expired(datetime(2027, 1, 1, tzinfo=UTC)) is False
    assert alice.expired(datetime(2027, 1, 1, 0, 0, 1, tzinfo=UTC)) is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.rate_per_minute = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.worlds["x"] = peps  # type: ignore[index]


def test_a_default_per_world_bound_is_three_quarters_of_the_total(files: Path):
    config = GatewayConfig.parse(f'[worlds.w]\nroot = "{files / "store"}"\n')
    assert (config.max_upstream, config.max_upstream_per_world, config.rate_per_minute) == (32, 24, 600)
    assert config.max_sessions_per_caller == SESSIONS_PER_CALLER
    assert config.session_idle_timeout == SESSION_IDLE_TIMEOUT
    assert config.callers == {}


WORLD = '[worlds.w]\nroot = "store"\n'
CALLER = f'[callers.c]\nhash = "{HASH}"\nread = ["w"]\n'

MISTAKES = [
    ("not-toml", "[gateway\n", "is not valid TOML"),
    ("unknown-table", WORLD + "[servers.x]\n", "the file has unknown table(s) servers"),
    ("no-worlds", CALLER, "[worlds] is empty"),
    ("world-name", '[worlds.Peps]\nroot = "store"\n', "[worlds.Peps] is not a world name"),
    ("world-name-hyphen", '[worlds.-x]\nroot = "store"\n', "[worlds.-x] is not a world name"),
    (
        "world-both",
        '[worlds.w]\nroot = "store"\nauthority = "mark://h:1"\n',
        "[worlds.w] needs exactly one of authority",
    ),
    ("world-neither", "[worlds.w]\n", "[worlds.w] needs exactly one of authority"),
    ("world-unknown-key", '[worlds.w]\nroot = "store"\nport = 1\n', "[worlds.w] has unknown key(s) port"),
    ("world-bad-authority", '[worlds.w]\nauthority = "http://h"\n', "[worlds.w] authority is not a mark:// URL"),
    (
        "world-authority-path",
        '[worlds.w]\nauthority = "mark://h:1/docs"\n',
        "[worlds.w] authority must name only host and port",
    ),
    ("world-missing-root", '[worlds.w]\nroot = "nowhere"\n', "[worlds.w] root"),
    ("world-missing-ca", '[worlds.w]\nauthority = "mark://h:1"\nca = "missing.pem"\n', "[worlds.w] ca"),
    ("world-root-ca", '[worlds.w]\nroot = "store"\nca = "ca.pem"\n', "ca, insecure and dial apply to an authority"),
    (
        "world-authority-tokens",
        '[worlds.w]\nauthority = "mark://h:1"\ntokens = "tokens.toml"\n',
        "[worlds.w] tokens applies to an embedded root only",
    ),
    ("caller-name", WORLD + f'[callers."a b"]\nhash = "{HASH}"\n', "is not a caller name"),
    (
        "caller-raw-token",
        WORLD + '[callers.c]\nhash = "alice-token"\nread = ["w"]\n',
        "[callers.c] hash must be 'sha256-'",
    ),
    (
        "caller-unknown-world",
        WORLD + f'[callers.c]\nhash = "{HASH}"\nread = ["x"]\n',
        "[callers.c] read names unknown world x",
    ),
    (
        "caller-write-not-read",
        WORLD + '[worlds.v]\nroot = "store"\n' + f'[callers.c]\nhash = "{HASH}"\nread = ["w"]\nwrite = ["v"]\n',
        "[callers.c] write names v, which is not in read",
    ),
    (
        "caller-read-type",
        WORLD + f'[callers.c]\nhash = "{HASH}"\nread = "w"\n',
        "[callers.c] read must be a list of world names",
    ),
    (
        "caller-upstream-unread",
        WORLD + '[worlds.v]\nroot = "store"\n' + CALLER + '[callers.c.upstream]\nv = "t"\n',
        "[callers.c].upstream has a token for v, which is not in read",
    ),
    (
        "caller-upstream-empty",
        WORLD + CALLER + '[callers.c.upstream]\nw = ""\n',
        "[callers.c].upstream w must be a non-empty string",
    ),
    ("caller-expires", WORLD + CALLER + 'expires = "tomorrow"\n', "[callers.c] expires must be an RFC 3339 date-time"),
    (
        "caller-expires-naive",
        WORLD + CALLER + "expires = 2027-01-01T00:00:00\n",
        "[callers.c] expires must be an RFC 3339 date-time",
    ),
    (
        "caller-duplicate-hash",
        WORLD + CALLER + f'[callers.d]\nhash = "{HASH}"\nread = ["w"]\n',
        "[callers.d] hash is the same as [callers.c]'s",
    ),
    ("caller-unknown-key", WORLD + CALLER + "admin = true\n", "[callers.c] has unknown key(s) admin"),
    (
        "rate",
        "[gateway]\nrate_per_minute = 0\n" + WORLD,
        "[gateway] rate_per_minute must be a whole number of at least 1",
    ),
    ("max-upstream", "[gateway]\nmax_upstream = true\n" + WORLD, "[gateway] max_upstream must be a whole number"),
    (
        "timeout",
        "[gateway]\nupstream_timeout = 0\n" + WORLD,
        "[gateway] upstream_timeout must be a number of seconds, more than 0",
    ),
    (
        "wait",
        "[gateway]\nupstream_wait = -1\n" + WORLD,
        "[gateway] upstream_wait must be a number of seconds, 0 or more",
    ),
    (
        "answer-timeout",
        "[gateway]\nupstream_answer_timeout = 0\n" + WORLD,
        "[gateway] upstream_answer_timeout must be a number of seconds, more than 0",
    ),
    (
        "sessions",
        "[gateway]\nmax_sessions_per_caller = 0\n" + WORLD,
        "[gateway] max_sessions_per_caller must be a whole number of at least 1",
    ),
    (
        "idle",
        "[gateway]\nsession_idle_timeout = 0\n" + WORLD,
        "[gateway] session_idle_timeout must be a number of seconds, more than 0",
    ),
    (
        "idle-infinite",
        "[gateway]\nsession_idle_timeout = inf\n" + WORLD,
        "[gateway] session_idle_timeout must be a number of seconds, more than 0, not inf",
    ),
    ("cert-without-key", '[gateway]\ncert = "ca.pem"\n' + WORLD, "[gateway] needs both cert and key"),
    ("gateway-unknown-key", "[gateway]\nworkers = 4\n" + WORLD, "[gateway] has unknown key(s) workers"),
]


@pytest.mark.parametrize("text, message", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_each_mistake_is_a_config_error_naming_file_table_and_field(files: Path, text: str, message: str):
    with pytest.raises(ConfigError) as caught:
        GatewayConfig.parse(text, source="gw.toml", base=files)
    assert str(caught.value).startswith("gw.toml")
    assert message in str(caught.value)


def test_a_raw_token_pasted_as_hash_is_never_echoed(files: Path):
    with pytest.raises(ConfigError) as caught:
        GatewayConfig.parse(WORLD + '[callers.c]\nhash = "alice-token"\nread = ["w"]\n', source="gw.toml", base=files)
    assert "alice-token" not in str(caught.value)


def test_a_missing_file_names_the_option(tmp_path: Path):
    with pytest.raises(ConfigError, match="gateway config .* is missing; create it or fix --config"):
        GatewayConfig.load(tmp_path / "absent.toml")
