"""Token auth: globs, the token file, authorization outcomes, add_grant and hot reload."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Generic, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from demarkus.auth import (
    MANIFEST_PATH,
    PUBLISH,
    READ,
    Authorizer,
    TokenGrant,
    TokenStore,
    add_grant,
    generate_token,
    hash_token,
    match_path,
)
from demarkus.errors import ConfigError, NotPermittedError, UnauthorizedError

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
EXPIRES = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)
T = TypeVar("T")


def table(
    label: str,
    token: str,
    paths: list[str],
    operations: list[str],
    expires: str | None = None,
) -> str:
    """One [tokens.<label>] table, written by hand so tests do not depend on add_grant."""
    quoted = lambda items: ", ".join(f'"{i}"' for i in items)  # noqa: E731
    text = (
        f'[tokens.{label}]\nhash = "{hash_token(token)}"\n'
        f"paths = [{quoted(paths)}]\noperations = [{quoted(operations)}]\n"
    )
    return text + (f'expires = "{expires}"\n' if expires else "") + "\n"


STORE_TEXT = (
    table("reader", "read-secret", ["/private/**"], [READ])
    + table("writer", "write-secret", ["/docs/*"], [PUBLISH])
    + table("both", "both-secret", ["/notes/**"], [READ, PUBLISH], "2026-12-31T23:59:59Z")
)


class Clock(Generic[T]):
    """A settable clock (a datetime for expiry, seconds for the wall), so time is tested
    without sleeping."""

    def __init__(self, now: T) -> None:
        self.now = now

    def __call__(self) -> T:
        return self.now


def rewrite(path: Path, text: str) -> None:
    """Replace the file atomically (a new inode), as `add_grant` and editors do."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text, encoding="utf-8")
    os.replace(fresh, path)


# --- globs -------------------------------------------------------------------

GLOBS = [
    ("/docs/*", "/docs/a.md", True, "star-matches-one-segment"),
    ("/docs/*", "/docs/sub/a.md", False, "star-stops-at-slash"),
    ("/docs/*", "/docs", False, "star-needs-the-slash"),
    ("/docs/*.md", "/docs/a.b.md", True, "star-with-suffix"),
    ("/docs/*.md", "/docs/a.txt", False, "star-suffix-mismatch"),
    ("/docs/?.md", "/docs/a.md", True, "question-one-char"),
    ("/docs/?.md", "/docs/ab.md", False, "question-not-two-chars"),
    ("/a?b", "/a/b", False, "question-not-slash"),
    ("/docs/a.md", "/docs/a.md", True, "exact-path"),
    ("/docs/a.md", "/docs/aXmd", False, "dot-is-literal"),
    ("/docs/a.md", "/docs/a.md/v3", False, "exact-is-whole-path"),
    ("/a+b/(c).md", "/a+b/(c).md", True, "regex-chars-are-literal"),
    ("/docs/**", "/docs/a.md", True, "globstar-one-level"),
    ("/docs/**", "/docs/x/y/z.md", True, "globstar-deep"),
    ("/docs/**", "/docs", False, "globstar-not-the-prefix-itself"),
    ("/docs/**", "/docs/", False, "globstar-needs-a-tail"),
    ("/docs/**", "/docsx/a.md", False, "globstar-prefix-is-a-segment"),
    ("/**", "/anything.md", True, "root-globstar"),
    ("/**", "/a/b/c", True, "root-globstar-deep"),
    ("/*/**", "/team/a.md", True, "wildcard-prefix"),
    ("/*/**", "/team", False, "wildcard-prefix-not-itself"),
    ("/docs/**/a.md", "/docs/a.md", True, "infix-zero-segments"),
    ("/docs/**/a.md", "/docs/x/y/a.md", True, "infix-many-segments"),
    ("/docs/**/a.md", "/docs/x/ba.md", False, "infix-tail-at-segment-boundary"),
    ("/docs/**/a.md", "/other/a.md", False, "infix-prefix-mismatch"),
    ("/docs/**/*.md", "/docs/x/y.md", True, "infix-wildcard-suffix"),
    ("/docs/**/sub/*.md", "/docs/a/sub/x.md", True, "infix-multi-segment-suffix"),
    ("/docs/**/sub/*.md", "/docs/a/sub/b/x.md", False, "infix-suffix-star-stays-in-segment"),
    ("/**/index.md", "/index.md", True, "root-infix-zero"),
    ("/**/index.md", "/a/b/index.md", True, "root-infix-deep"),
]


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [g[:3] for g in GLOBS],
    ids=[g[3] for g in GLOBS],
)
def test_match_path_follows_the_glob_table(pattern: str, path: str, expected: bool) -> None:
    assert match_path(pattern, path) is expected


BAD_PATTERNS = {
    "star-star-glued-to-name": "/a**",
    "star-star-before-name": "/**a",
    "two-globstars": "/a/**/b/**",
    "triple-star": "/a/***",
    "relative": "docs/*",
    "empty": "",
    "character-class": "/docs/[ab].md",
    "escape": "/a\\*",
    "globstar-then-nothing": "/a/**/",
}


@pytest.mark.parametrize("pattern", BAD_PATTERNS.values(), ids=BAD_PATTERNS.keys())
def test_match_path_rejects_invalid_patterns(pattern: str) -> None:
    with pytest.raises(ValueError, match="path pattern"):
        match_path(pattern, "/a/b")


SEGMENT = st.text(st.characters(blacklist_characters="/*?[]\\", blacklist_categories=("Cs",)))


@given(st.lists(SEGMENT, min_size=1, max_size=6))
def test_every_wildcard_free_absolute_path_matches_itself(segments: list[str]) -> None:
    path = "/" + "/".join(segments)
    assert match_path(path, path)


TAIL = st.lists(SEGMENT, min_size=1, max_size=5).filter(lambda segments: "/".join(segments))


@given(SEGMENT.filter(bool), TAIL)
def test_globstar_matches_all_strictly_under_its_prefix(prefix: str, tail: list[str]) -> None:
    pattern = f"/{prefix}/**"
    assert not match_path(pattern, f"/{prefix}")
    assert match_path(pattern, f"/{prefix}/" + "/".join(tail))


# --- tokens ------------------------------------------------------------------


def test_generate_token_gives_distinct_url_safe_tokens_with_32_random_bytes() -> None:
    first, second = generate_token(), generate_token()
    assert first != second
    assert re.fullmatch(r"[A-Za-z0-9_-]{43,}", first)


def test_hash_token_is_the_prefixed_sha256_hex_of_the_token() -> None:
    assert hash_token("s3cret") == "sha256-" + hashlib.sha256(b"s3cret").hexdigest()


# --- parse and load ----------------------------------------------------------


def test_parse_reads_labelled_grants_into_values() -> None:
    store = TokenStore.parse(STORE_TEXT)
    assert store.grants == (
        TokenGrant("reader", hash_token("read-secret"), ("/private/**",), frozenset({READ})),
        TokenGrant("writer", hash_token("write-secret"), ("/docs/*",), frozenset({PUBLISH})),
        TokenGrant("both", hash_token("both-secret"), ("/notes/**",), frozenset({READ, PUBLISH}), EXPIRES),
    )


def test_an_empty_token_file_holds_no_grants() -> None:
    assert TokenStore.parse("").grants == ()


def test_parse_accepts_a_toml_offset_datetime_for_expires() -> None:
    text = table("a", "t", ["/x"], [READ]).replace("\n\n", "\nexpires = 2026-12-31T23:59:59Z\n")
    assert TokenStore.parse(text).grants[0].expires == EXPIRES


BROKEN = {
    "missing-hash": '[tokens.bad]\npaths = ["/a"]\noperations = ["read"]\n',
    "missing-paths": f'[tokens.bad]\nhash = "{hash_token("t")}"\noperations = ["read"]\n',
    "missing-operations": f'[tokens.bad]\nhash = "{hash_token("t")}"\npaths = ["/a"]\n',
    "uppercase-hash": table("bad", "t", ["/a"], [READ]).replace("sha256-", "sha256-AB", 1),
    "short-hash": '[tokens.bad]\nhash = "sha256-abc"\npaths = ["/a"]\noperations = ["read"]\n',
    "hash-not-a-string": '[tokens.bad]\nhash = 5\npaths = ["/a"]\noperations = ["read"]\n',
    "unknown-operation": table("bad", "t", ["/a"], ["write"]),
    "empty-operations": table("bad", "t", ["/a"], []),
    "empty-paths": table("bad", "t", [], [READ]),
    "paths-not-a-list": table("bad", "t", ["/a"], [READ]).replace('["/a"]', '"/a"'),
    "bad-pattern": table("bad", "t", ["/a**"], [READ]),
    "relative-pattern": table("bad", "t", ["a/*"], [READ]),
    "bad-expires": table("bad", "t", ["/a"], [READ], "next tuesday"),
    "expires-without-offset": table("bad", "t", ["/a"], [READ], "2026-12-31T23:59:59"),
    "expires-a-date": table("bad", "t", ["/a"], [READ]).replace("\n\n", "\nexpires = 2026-12-31\n"),
    "unknown-field": table("bad", "t", ["/a"], [READ]).replace("\n\n", '\npath = "/b"\n'),
    "not-a-table": "[tokens]\nbad = 3\n",
}


@pytest.mark.parametrize("text", BROKEN.values(), ids=BROKEN.keys())
def test_load_rejects_a_broken_grant_naming_the_file_and_label(tmp_path: Path, text: str) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(table("good", "g", ["/ok"], [READ]) + text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        TokenStore.load(path)
    assert str(caught.value).startswith(f"{path}: token 'bad' ")


def test_malformed_hash_error_never_echoes_the_value() -> None:
    text = '[tokens.oops]\nhash = "raw-secret-pasted"\npaths = ["/a"]\noperations = ["read"]\n'
    with pytest.raises(ConfigError) as caught:
        TokenStore.parse(text)
    assert "raw-secret-pasted" not in str(caught.value)


def test_duplicate_hashes_are_a_load_error_naming_both_labels() -> None:
    text = table("first", "same", ["/a"], [READ]) + table("second", "same", ["/b"], [PUBLISH])
    with pytest.raises(ConfigError) as caught:
        TokenStore.parse(text, source="t.toml")
    assert str(caught.value).startswith("t.toml: token 'second' has the same hash as token 'first'")


@pytest.mark.parametrize(
    "text",
    ["[tokens.a\nhash = 1\n", '[token.a]\nhash = "x"\n', 'tokens = "x"\n'],
    ids=["invalid-toml", "misspelt-tokens-table", "tokens-not-a-table"],
)
def test_parse_rejects_files_that_are_not_token_tables(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^t\.toml"):
        TokenStore.parse(text, source="t.toml")


def test_load_of_a_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        TokenStore.load(path)


# --- authorize ---------------------------------------------------------------

STORE = TokenStore.parse(STORE_TEXT)


def test_authorize_returns_the_grant_when_operation_and_path_match() -> None:
    assert STORE.authorize("write-secret", "/docs/a.md", PUBLISH, NOW).label == "writer"
    assert STORE.authorize("both-secret", "/notes/x/y.md", READ, NOW).label == "both"


@pytest.mark.parametrize("token", [None, ""], ids=["none", "empty"])
def test_authorize_without_a_token_is_unauthorized(token: str | None) -> None:
    with pytest.raises(UnauthorizedError, match="carried none"):
        STORE.authorize(token, "/docs/a.md", PUBLISH, NOW)


def test_authorize_with_an_unknown_token_is_unauthorized_without_echoing_it() -> None:
    with pytest.raises(UnauthorizedError) as caught:
        STORE.authorize("guess-me", "/docs/a.md", PUBLISH, NOW)
    assert "does not know the token" in str(caught.value)
    assert "guess-me" not in str(caught.value)


def test_authorize_with_an_expired_token_says_it_expired_and_when() -> None:
    with pytest.raises(UnauthorizedError) as caught:
        STORE.authorize("both-secret", "/notes/a.md", READ, EXPIRES + timedelta(days=1))
    assert "expired at 2026-12-31T23:59:59Z" in str(caught.value)
    assert "both-secret" not in str(caught.value)


def test_token_is_valid_at_its_expiry_instant_and_expired_a_microsecond_later() -> None:
    assert STORE.authorize("both-secret", "/notes/a.md", READ, EXPIRES).label == "both"
    with pytest.raises(UnauthorizedError):
        STORE.authorize("both-secret", "/notes/a.md", READ, EXPIRES + timedelta(microseconds=1))


def test_authorize_for_an_operation_not_granted_is_not_permitted() -> None:
    with pytest.raises(NotPermittedError) as caught:
        STORE.authorize("read-secret", "/private/a.md", PUBLISH, NOW)
    assert "grants read but not publish" in str(caught.value)
    assert "read-secret" not in str(caught.value)


def test_authorize_outside_the_grant_paths_is_not_permitted_and_names_the_path() -> None:
    with pytest.raises(NotPermittedError) as caught:
        STORE.authorize("write-secret", "/docs/sub/a.md", PUBLISH, NOW)
    assert "whose paths cover /docs/sub/a.md" in str(caught.value)


def test_read_protected_only_where_a_read_grant_covers_the_path() -> None:
    assert STORE.read_protected("/private/a.md")
    assert STORE.read_protected("/notes/deep/a.md")
    assert not STORE.read_protected("/docs/a.md")  # covered by a publish-only grant
    assert not STORE.read_protected("/private")


# --- Authorizer --------------------------------------------------------------


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.toml"
    path.write_text(STORE_TEXT, encoding="utf-8")
    return path


def test_without_a_token_file_reads_are_public_and_writes_not_permitted() -> None:
    authorizer = Authorizer(None)
    authorizer.check_read(None, "/private/a.md")
    with pytest.raises(NotPermittedError) as caught:
        authorizer.check_write("write-secret", "/docs/a.md")
    assert str(caught.value) == (
        "this authority accepts no writes: it was started without a token file; start it with --tokens FILE"
    )


def test_a_missing_token_file_at_start_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is missing"):
        Authorizer(tmp_path / "nope.toml")


def test_reads_are_public_where_no_read_grant_covers_the_path(tokens_file: Path) -> None:
    authorizer = Authorizer(tokens_file, clock=Clock(NOW))
    authorizer.check_read(None, "/docs/a.md")
    authorizer.check_read("not-a-real-token", "/docs/a.md")


def test_a_read_protected_path_needs_a_valid_read_grant(tokens_file: Path) -> None:
    authorizer = Authorizer(tokens_file, clock=Clock(NOW))
    with pytest.raises(UnauthorizedError):
        authorizer.check_read(None, "/private/a.md")
    with pytest.raises(UnauthorizedError):
        authorizer.check_read("not-a-real-token", "/private/a.md")
    with pytest.raises(NotPermittedError):
        authorizer.check_read("write-secret", "/private/a.md")
    with pytest.raises(NotPermittedError):
        authorizer.check_read("both-secret", "/private/a.md")
    authorizer.check_read("read-secret", "/private/a.md")


def test_an_expired_read_grant_still_protects_its_paths(tokens_file: Path) -> None:
    clock = Clock(EXPIRES + timedelta(seconds=1))
    authorizer = Authorizer(tokens_file, clock=clock)
    with pytest.raises(UnauthorizedError, match="expired"):
        authorizer.check_read("both-secret", "/notes/a.md")
    with pytest.raises(UnauthorizedError, match="carried none"):
        authorizer.check_read(None, "/notes/a.md")


def test_the_agent_manifest_is_always_publicly_readable(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(table("all", "s", ["/**"], [READ]), encoding="utf-8")
    authorizer = Authorizer(path, clock=Clock(NOW))
    authorizer.check_read(None, MANIFEST_PATH)
    with pytest.raises(UnauthorizedError):
        authorizer.check_read(None, "/.well-known/other.md")


def test_a_write_needs_a_publish_grant_covering_the_path(tokens_file: Path) -> None:
    authorizer = Authorizer(tokens_file, clock=Clock(NOW))
    authorizer.check_write("write-secret", "/docs/a.md")
    with pytest.raises(UnauthorizedError):
        authorizer.check_write(None, "/docs/a.md")
    with pytest.raises(NotPermittedError):
        authorizer.check_write("read-secret", "/private/a.md")
    with pytest.raises(NotPermittedError):
        authorizer.check_write("write-secret", "/notes/a.md")


def test_the_injected_clock_decides_expiry_on_each_check(tokens_file: Path) -> None:
    clock = Clock(EXPIRES)
    authorizer = Authorizer(tokens_file, clock=clock)
    authorizer.check_write("both-secret", "/notes/a.md")
    clock.now = EXPIRES + timedelta(microseconds=1)
    with pytest.raises(UnauthorizedError, match="expired"):
        authorizer.check_write("both-secret", "/notes/a.md")


def test_the_authorizer_picks_up_a_new_grant_when_the_file_changes(tokens_file: Path) -> None:
    authorizer = Authorizer(tokens_file, clock=Clock(NOW))
    with pytest.raises(UnauthorizedError):
        authorizer.check_write("new-secret", "/docs/a.md")
    rewrite(tokens_file, STORE_TEXT + table("new", "new-secret", ["/docs/**"], [PUBLISH]))
    authorizer.check_write("new-secret", "/docs/a.md")


def test_a_broken_reload_keeps_the_last_good_grants_and_warns(
    tokens_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    authorizer = Authorizer(tokens_file, clock=Clock(NOW))
    rewrite(tokens_file, table("bad", "x", ["/a**"], [PUBLISH]))
    with caplog.at_level(logging.WARNING, logger="demarkus.auth"):
        authorizer.check_write("write-secret", "/docs/a.md")
        authorizer.check_write("write-secret", "/docs/a.md")
    assert [r.levelname for r in caplog.records] == ["WARNING"]  # once per change, not per check
    assert "last good grants stay" in caplog.records[0].getMessage()
    rewrite(tokens_file, table("fixed", "fixed-secret", ["/docs/*"], [PUBLISH]))
    authorizer.check_write("fixed-secret", "/docs/a.md")
    with pytest.raises(UnauthorizedError):
        authorizer.check_write("write-secret", "/docs/a.md")


def test_a_deleted_token_file_keeps_the_last_good_grants_and_warns(
    tokens_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    authorizer = Authorizer(tokens_file, clock=Clock(NOW))
    tokens_file.unlink()
    with caplog.at_level(logging.WARNING, logger="demarkus.auth"):
        authorizer.check_write("write-secret", "/docs/a.md")
        with pytest.raises(UnauthorizedError):
            authorizer.check_read(None, "/private/a.md")
    assert "is missing" in caplog.records[0].getMessage()


# --- add_grant ---------------------------------------------------------------


def test_add_grant_stores_only_the_hash_and_round_trips_through_load(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    token = generate_token()
    grant = add_grant(path, "fritz-laptop", token, ["/docs/*", "/notes/**"], [READ, PUBLISH])
    text = path.read_text(encoding="utf-8")
    assert token not in text
    assert hash_token(token) in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert grant == TokenGrant("fritz-laptop", hash_token(token), ("/docs/*", "/notes/**"), frozenset({READ, PUBLISH}))
    assert TokenStore.load(path).grants == (grant,)
    assert [p.name for p in tmp_path.iterdir()] == ["tokens.toml"]


def test_add_grant_appends_and_keeps_earlier_grants_and_expiry(tokens_file: Path) -> None:
    grant = add_grant(tokens_file, "ci", "ci-secret", ["/docs/**"], [PUBLISH], expires=EXPIRES)
    assert grant.expires == EXPIRES
    assert TokenStore.load(tokens_file).grants == (*STORE.grants, grant)


def test_add_grant_refuses_a_duplicate_label_leaving_the_file_alone(tokens_file: Path) -> None:
    with pytest.raises(ConfigError, match="'writer' already exists"):
        add_grant(tokens_file, "writer", "fresh-secret", ["/docs/*"], [PUBLISH])
    assert tokens_file.read_text(encoding="utf-8") == STORE_TEXT


def test_add_grant_refuses_a_token_already_granted(tokens_file: Path) -> None:
    with pytest.raises(ConfigError, match="already granted as 'writer'") as caught:
        add_grant(tokens_file, "again", "write-secret", ["/docs/*"], [PUBLISH])
    assert "write-secret" not in str(caught.value)
    assert tokens_file.read_text(encoding="utf-8") == STORE_TEXT


@pytest.mark.parametrize(
    ("label", "paths", "operations"),
    [("bad", ["/a**"], [READ]), ("bad", ["/a"], ["write"]), ("has space", ["/a"], [READ])],
    ids=["bad-pattern", "unknown-operation", "label-not-a-bare-key"],
)
def test_add_grant_refuses_an_invalid_grant_leaving_the_file_alone(
    tokens_file: Path, label: str, paths: list[str], operations: list[str]
) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{tokens_file}: ")):
        add_grant(tokens_file, label, "fresh-secret", paths, operations)
    assert tokens_file.read_text(encoding="utf-8") == STORE_TEXT
    assert sorted(p.name for p in tokens_file.parent.iterdir()) == ["tokens.toml"]


def test_add_grant_refuses_to_append_to_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text("[tokens.x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        add_grant(path, "new", "s", ["/a"], [READ])


# --- reloads that must not open protected paths ---------------------------------------


def rewrite_in_place(path: Path, text: str) -> float:
    """Truncate and write the same inode, as `echo ... > tokens.toml` does; its mtime."""
    with open(path, "r+", encoding="utf-8") as handle:
        handle.truncate(0)
        handle.write(text)
    return path.stat().st_mtime


@pytest.mark.parametrize(
    "text",
    ["", STORE_TEXT[: len(STORE_TEXT) // 3], '[tokens.reader]\nhash = "sha'],
    ids=["truncated-empty", "first-third", "cut-mid-table"],
)
def test_a_token_file_caught_mid_rewrite_keeps_the_read_grants(tokens_file: Path, text: str) -> None:
    wall = Clock(0.0)  # the wall clock: seconds since the epoch
    authorizer = Authorizer(tokens_file, clock=Clock(NOW), wall=wall)
    wall.now = rewrite_in_place(tokens_file, text)
    with pytest.raises(UnauthorizedError):
        authorizer.check_read(None, "/private/a.md")


def test_an_in_place_rewrite_applies_once_the_file_has_settled(tokens_file: Path) -> None:
    wall = Clock(0.0)  # the wall clock: seconds since the epoch
    authorizer = Authorizer(tokens_file, clock=Clock(NOW), wall=wall)
    mtime = rewrite_in_place(tokens_file, table("writer", "write-secret", ["/docs/*"], [PUBLISH]))
    wall.now = mtime
    with pytest.raises(UnauthorizedError):
        authorizer.check_read(None, "/private/a.md")  # not yet: it may still be being written
    wall.now = mtime + 1.5
    authorizer.check_read(None, "/private/a.md")  # the reader grant was removed on purpose


def test_an_emptied_token_file_keeps_the_last_grants_and_says_how_to_clear_them(
    tokens_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    authorizer = Authorizer(tokens_file, clock=Clock(NOW))
    rewrite(tokens_file, "")
    with caplog.at_level(logging.WARNING, logger="demarkus.auth"):
        with pytest.raises(UnauthorizedError):
            authorizer.check_read(None, "/private/a.md")
    assert "leave a comment line" in caplog.records[0].getMessage()
    rewrite(tokens_file, "# no grants\n")
    authorizer.check_read(None, "/private/a.md")


def test_concurrent_add_grant_calls_keep_every_grant(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "tokens.toml"
    labels = [f"t{i}" for i in range(16)]
    threads = [
        threading.Thread(target=add_grant, args=(path, label, f"{label}-secret", ["/a/**"], [READ])) for label in labels
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(g.label for g in TokenStore.load(path).grants) == sorted(labels)
