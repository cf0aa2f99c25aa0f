"""Access made visible: pattern coverage, the token listing, revoking a grant (also under a
running service), the warnings of generate and revoke, and the hidden-row counts LOOKUP
and LIST carry."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demarkus import access
from demarkus.auth import (
    PUBLISH,
    READ,
    REVOKED_ALL,
    Authorizer,
    TokenStore,
    add_grant,
    hash_token,
    match_path,
    pattern_covers,
    pattern_problem,
    revoke_grant,
    uncovered,
)
from demarkus.errors import ConfigError
from demarkus.protocol import RESERVED_KEYS, Request, Verb
from demarkus.service import Service
from demarkus.store import FileStore

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

# --- pattern coverage -------------------------------------------------------------------

COVERS = [
    ("/**", "/docs/**", True, "root-globstar-covers-a-subtree"),
    ("/**", "/a.md", True, "root-globstar-covers-a-document"),
    ("/**", "/*", False, "root-star-also-matches-the-root"),
    ("/docs/**", "/docs/*", True, "globstar-covers-star-below"),
    ("/docs/**", "/docs/a/**/b.md", True, "globstar-covers-an-infix"),
    ("/docs/**", "/docsx/**", False, "prefix-is-a-segment"),
    ("/docs/**", "/docs", False, "globstar-not-the-folder-itself"),
    ("/docs/*", "/docs/a.md", True, "star-covers-a-literal"),
    ("/docs/*", "/docs/*.md", True, "star-covers-a-starred-segment"),
    ("/docs/*.md", "/docs/*", False, "suffix-does-not-cover-star"),
    ("/docs/*", "/docs/**", False, "star-does-not-cover-globstar"),
    ("/*/a.md", "/docs/a.md", True, "segment-wise-literal"),
    ("/*/a.md", "/docs/b.md", False, "segment-wise-mismatch"),
    ("/docs/**/a.md", "/docs/**/a.md", True, "equal-infix"),
    ("/docs/**/a.md", "/docs/x/*.md", False, "infix-doubt-is-no"),
]


@pytest.mark.parametrize(("outer", "inner", "expected"), [c[:3] for c in COVERS], ids=[c[3] for c in COVERS])
def test_pattern_covers_follows_the_table(outer: str, inner: str, expected: bool) -> None:
    assert pattern_covers(outer, inner) is expected


SEGMENT = st.sampled_from(["a", "b", "ab", "*", "?", "a*", "*b", "**"])
NAME = st.sampled_from(["a", "b", "ab", "ba", "abb", "x"])


def pattern_of(segments: list[str]) -> str | None:
    pattern = "/" + "/".join(segments)
    return pattern if pattern_problem(pattern) is None else None


@settings(max_examples=400, deadline=None)
@given(
    st.lists(SEGMENT, min_size=1, max_size=4),
    st.lists(SEGMENT, min_size=1, max_size=4),
    st.lists(NAME, min_size=1, max_size=5),
)
def test_a_covered_pattern_never_matches_a_path_its_cover_misses(
    outer_segments: list[str], inner_segments: list[str], path_segments: list[str]
) -> None:
    """Soundness: a warning is only ever left out when no path is newly covered."""
    outer, inner = pattern_of(outer_segments), pattern_of(inner_segments)
    if outer is None or inner is None or not pattern_covers(outer, inner):
        return
    path = "/" + "/".join(path_segments)
    if match_path(inner, path):
        assert match_path(outer, path), (outer, inner, path)
    if match_path(inner, "/"):
        assert match_path(outer, "/"), (outer, inner)


def test_uncovered_keeps_order_and_drops_what_another_pattern_covers() -> None:
    assert uncovered(["/b/**", "/a/x.md", "/c/*"], ["/a/**", "/c/*"]) == ("/b/**",)
    assert uncovered(["/a/**"], []) == ("/a/**",)


# --- the listing --------------------------------------------------------------------------


def grant_table(label: str, token: str, paths: list[str], ops: list[str], expires: str | None = None) -> str:
    quoted = lambda items: ", ".join(f'"{i}"' for i in items)  # noqa: E731
    text = f'[tokens.{label}]\nhash = "{hash_token(token)}"\npaths = [{quoted(paths)}]\noperations = [{quoted(ops)}]\n'
    return text + (f'expires = "{expires}"\n' if expires else "")


STORE_TEXT = (
    "# the authority's grants\n\n"
    + grant_table("writer", "write-secret", ["/**"], [PUBLISH])
    + "\n# Fritz's old laptop\n"
    + grant_table("old", "old-secret", ["/private/**", "/notes/*"], [READ, PUBLISH], "2026-01-01T00:00:00+02:00")
    + "\n"
    + grant_table("bot", "bot-secret", ["/docs/*"], [READ], "2026-12-31T23:59:59Z")
)


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.toml"
    path.write_text(STORE_TEXT, encoding="utf-8")
    return path


def test_the_listing_shows_every_grant_by_label_and_never_a_hash(tokens_file: Path) -> None:
    views = access.view_grants(TokenStore.load(tokens_file), NOW)
    assert access.render_grants(views) == (
        "LABEL   PATHS                 OPERATIONS    EXPIRES               STATE\n"
        "bot     /docs/*               read          2026-12-31T23:59:59Z  valid\n"
        "old     /private/**,/notes/*  publish,read  2025-12-31T22:00:00Z  expired\n"
        "writer  /**                   publish       never                 valid\n"
    )
    listed = json.loads(access.grants_json(views))
    assert [item["label"] for item in listed] == ["bot", "old", "writer"]
    assert listed[1] == {
        "label": "old",
        "paths": ["/private/**", "/notes/*"],
        "operations": ["publish", "read"],
        "expires": "2025-12-31T22:00:00Z",
        "expired": True,
    }
    assert listed[2]["expires"] is None and listed[2]["expired"] is False
    for text in (access.render_grants(views), access.grants_json(views)):
        assert "sha256-" not in text and "secret" not in text


def test_a_grant_is_still_valid_at_its_expiry_instant_in_the_listing(tokens_file: Path) -> None:
    store = TokenStore.load(tokens_file)
    at = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert not access.view_grants(store, at)[0].expired
    assert access.view_grants(store, at + timedelta(microseconds=1))[0].expired


def test_an_empty_store_lists_nothing() -> None:
    assert access.render_grants(access.view_grants(TokenStore(), NOW)) == ""
    assert access.grants_json(()) == "[]\n"


# --- revoke -------------------------------------------------------------------------------


def test_revoke_cuts_out_one_table_and_leaves_every_other_byte(tokens_file: Path) -> None:
    revoked = revoke_grant(tokens_file, "old")
    assert revoked.grant.label == "old" and not revoked.rewritten
    assert tokens_file.read_text(encoding="utf-8") == (
        "# the authority's grants\n\n"
        + grant_table("writer", "write-secret", ["/**"], [PUBLISH])
        + "\n"
        + grant_table("bot", "bot-secret", ["/docs/*"], [READ], "2026-12-31T23:59:59Z")
    )  # the comment right above its header went with it
    assert [g.label for g in TokenStore.load(tokens_file).grants] == ["writer", "bot"]
    assert [g.label for g in revoked.remaining.grants] == ["writer", "bot"]
    assert sorted(p.name for p in tokens_file.parent.iterdir()) == ["tokens.toml"]


def test_revoke_keeps_the_comments_that_open_the_next_table(tokens_file: Path) -> None:
    revoke_grant(tokens_file, "writer")
    text = tokens_file.read_text(encoding="utf-8")
    assert text.startswith("# the authority's grants\n\n# Fritz's old laptop\n[tokens.old]\n")


def test_revoking_an_unknown_label_names_the_labels_there_and_changes_nothing(tokens_file: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        revoke_grant(tokens_file, "laptop")
    assert str(caught.value) == (
        f"{tokens_file} has no token labelled 'laptop'; its tokens are: bot, old, writer "
        f"(see demarkus token list --tokens {tokens_file})"
    )
    assert tokens_file.read_text(encoding="utf-8") == STORE_TEXT


def test_revoking_from_a_file_without_tokens_says_it_holds_none(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text("# nothing yet\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="it holds no tokens"):
        revoke_grant(path, "any")
    with pytest.raises(ConfigError, match="is missing"):
        revoke_grant(tmp_path / "absent.toml", "any")


def test_revoking_the_last_token_leaves_a_comment_so_a_reload_takes_it(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    add_grant(path, "only", "only-secret", ["/**"], [READ, PUBLISH])
    authorizer = Authorizer(path, clock=lambda: NOW)
    assert not authorizer.reader(None)("/a.md")
    revoked = revoke_grant(path, "only")
    assert path.read_text(encoding="utf-8") == REVOKED_ALL
    assert revoked.remaining.grants == ()
    assert authorizer.reader(None)("/a.md")  # the reload took the file: reads are public again
    assert access.newly_public(revoked.grant, revoked.remaining) == ("/**",)


def test_a_table_that_cannot_be_cut_alone_is_written_anew_with_the_same_grants(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    hashes = {label: hash_token(f"{label}-secret") for label in ("a", "b", "c")}
    path.write_text(
        "[tokens]\n"
        f'a = {{ hash = "{hashes["a"]}", paths = ["/a/**"], operations = ["read"] }}\n'
        f'b = {{ hash = "{hashes["b"]}", paths = ["/b/*"], operations = ["publish", "read"] }}\n'
        f'[tokens."c"]\nhash = "{hashes["c"]}"\npaths = ["/c/**"]\noperations = ["read"]\n',
        encoding="utf-8",
    )
    before = TokenStore.load(path)
    revoked = revoke_grant(path, "a")
    assert revoked.rewritten
    assert TokenStore.load(path).grants == tuple(g for g in before.grants if g.label != "a")
    revoked = revoke_grant(path, "c")  # now a [tokens.c] table written by revoke itself
    assert not revoked.rewritten
    assert [g.label for g in TokenStore.load(path).grants] == ["b"]


def test_revoke_and_add_at_once_lose_no_grant(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    for i in range(8):
        add_grant(path, f"old{i}", f"old{i}-secret", ["/a/**"], [READ])
    threads = [threading.Thread(target=revoke_grant, args=(path, f"old{i}")) for i in range(8)]
    threads += [
        threading.Thread(target=add_grant, args=(path, f"new{i}", f"new{i}-secret", ["/b/**"], [READ]))
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(g.label for g in TokenStore.load(path).grants) == [f"new{i}" for i in range(8)]


# --- what a change opens or closes ----------------------------------------------------


def test_a_new_read_grant_names_the_paths_it_makes_private(tokens_file: Path) -> None:
    grant = add_grant(tokens_file, "team", "team-secret", ["/private/a.md", "/team/**", "/docs/x.md"], [READ])
    assert access.newly_private(grant, TokenStore.load(tokens_file)) == ("/team/**",)
    assert access.private_warning(("/team/**",)) == (
        "warning: /team/** is private now: reads there were public (no read grant covered all of it), "
        "and anonymous readers now see nothing there; they need a read token (demarkus token generate --ops read)"
    )


def test_a_publish_grant_or_an_already_covered_one_makes_nothing_private(tokens_file: Path) -> None:
    publisher = add_grant(tokens_file, "pub", "pub-secret", ["/team/**"], [PUBLISH])
    assert access.newly_private(publisher, TokenStore.load(tokens_file)) == ()
    covered = add_grant(tokens_file, "sub", "sub-secret", ["/private/sub/**"], [READ])
    assert access.newly_private(covered, TokenStore.load(tokens_file)) == ()


def test_an_expired_read_grant_still_counts_as_covering(tokens_file: Path) -> None:
    grant = add_grant(tokens_file, "late", "late-secret", ["/notes/a.md"], [READ])
    assert access.newly_private(grant, TokenStore.load(tokens_file)) == ()  # "old" covers /notes/*


def test_revoking_the_last_read_grant_of_a_path_names_it_public(tokens_file: Path) -> None:
    revoked = revoke_grant(tokens_file, "old")
    assert access.newly_public(revoked.grant, revoked.remaining) == ("/private/**", "/notes/*")
    assert access.public_warning(("/notes/*",)) == (
        "warning: /notes/* is public again where no other read grant covers it: anyone can read there now, "
        "without a token"
    )
    assert access.newly_public(revoke_grant(tokens_file, "writer").grant, TokenStore.load(tokens_file)) == ()


# --- the hidden note ----------------------------------------------------------------------


def test_the_hidden_note_gives_a_count_and_what_to_pass() -> None:
    documents = ("document", "documents")
    assert access.hidden_note(3, documents, "under /", carried=False) == (
        "3 documents under / need a read token; pass --token (or DEMARKUS_AUTH)"
    )
    assert access.hidden_note(1, ("entry", "entries"), "of /docs", carried=True) == (
        "1 entry of /docs needs a read token that covers it; pass --token (or DEMARKUS_AUTH)"
    )
    assert access.hidden_note(2, documents, "under /", carried=True, advice="ask the operator") == (
        "2 documents under / need a read token that covers them; ask the operator"
    )


@pytest.mark.parametrize(("value", "count"), [("3", 3), ("0", 0), ("", 0), ("x", 0), ("-1", 0), ("٣", 0)])
def test_hidden_count_reads_only_ascii_digits(value: str, count: int) -> None:
    assert access.hidden_count({"hidden": value} if value else {}) == count


def test_hidden_is_a_key_only_the_server_may_set() -> None:
    assert access.HIDDEN in RESERVED_KEYS


# --- LOOKUP and LIST through the service -------------------------------------------------

DOCS = ("/public/a.md", "/public/b.md", "/private/a.md", "/private/sub/b.md", "/private/sub/c.md", "/top.md")


@pytest.fixture
def guarded(tmp_path: Path) -> tuple[Service, Path]:
    """A store with public and private documents (read grant on /private/**)."""
    root, tokens = tmp_path / "store", tmp_path / "tokens.toml"
    root.mkdir()
    add_grant(tokens, "writer", "write-secret", ["/**"], [PUBLISH])
    add_grant(tokens, "reader", "read-secret", ["/private/**"], [READ])
    service = Service.open(root, tokens=tokens)
    for path in DOCS:
        body = f"# Report {path}\n\nThe quarterly report.\n"
        asyncio.run(service.publish(path, body, metadata={"tags": "report"}, token="write-secret")).raise_for_status()
    return service, tokens


def handle(service: Service, verb: Verb, path: str, **meta: str) -> tuple[str, dict[str, str], str]:
    response = service.handle(Request(verb, path, meta))
    return response.status, dict(response.metadata), response.text


@pytest.mark.parametrize("match", ["catalog", "body"])
def test_lookup_counts_the_documents_in_scope_it_left_out(guarded: tuple[Service, Path], match: str) -> None:
    service, _ = guarded
    status, meta, text = handle(service, Verb.LOOKUP, "/", query="report", match=match)
    assert status == "ok" and meta["hidden"] == "3"
    assert "/private" not in text
    assert handle(service, Verb.LOOKUP, "/private/sub", query="report", match=match)[1]["hidden"] == "2"
    assert "hidden" not in handle(service, Verb.LOOKUP, "/public", query="report", match=match)[1]
    _, with_token, text = handle(service, Verb.LOOKUP, "/", query="report", match=match, auth="read-secret")
    assert "hidden" not in with_token and "/private/sub/c.md" in text


def test_the_lookup_count_does_not_depend_on_the_query_or_filter(guarded: tuple[Service, Path]) -> None:
    """A count that followed the query would tell what hidden titles hold, a word at a time."""
    service, _ = guarded
    counts = {
        handle(service, Verb.LOOKUP, "/", query=query, **extra)[1].get("hidden")
        for query, extra in [("report", {}), ("zzz-nothing", {}), ("*", {}), ("report", {"filter": "tag=nope"})]
    }
    assert counts == {"3"}


def test_list_counts_the_entries_it_left_out_of_the_whole_folder(guarded: tuple[Service, Path]) -> None:
    service, tokens = guarded
    status, meta, text = handle(service, Verb.LIST, "/private")
    assert status == "ok" and meta == {"entries": "0", "complete": "true", "hidden": "2"}
    assert "a.md" not in text and "sub" not in text
    assert handle(service, Verb.LIST, "/private/sub")[0] == "unauthorized"  # the folder itself is covered
    assert handle(service, Verb.LIST, "/")[1] == {"entries": "3", "complete": "true"}
    assert "hidden" not in handle(service, Verb.LIST, "/private", auth="read-secret")[1]
    add_grant(tokens, "mixed", "mixed-secret", ["/mixed/s*"], [READ])
    for name in ("a.md", "b.md", "s1.md", "s2.md", "s3.md"):
        asyncio.run(service.publish(f"/mixed/{name}", "# M\n", token="write-secret")).raise_for_status()
    _, first, text = handle(service, Verb.LIST, "/mixed", **{"page-size": "1"})
    assert first["entries"] == "1" and first["complete"] == "false" and first["hidden"] == "3"
    _, second, text = handle(service, Verb.LIST, "/mixed", **{"page-size": "1", "cursor": first["next-cursor"]})
    assert second == {"entries": "1", "complete": "true", "hidden": "3"} and "b.md" in text


def test_a_token_without_the_path_or_past_its_expiry_hides_the_same(tmp_path: Path) -> None:
    root, tokens = tmp_path / "store", tmp_path / "tokens.toml"
    root.mkdir()
    add_grant(tokens, "writer", "write-secret", ["/**"], [PUBLISH])
    add_grant(tokens, "all", "all-secret", ["/**"], [READ], expires=NOW)
    add_grant(tokens, "docs", "docs-secret", ["/docs/**"], [READ])
    clock = [NOW]
    service = Service(FileStore(root), Authorizer(tokens, clock=lambda: clock[0]))
    for path in ("/docs/a.md", "/notes/b.md", "/notes/c.md"):
        asyncio.run(service.publish(path, "# Note\n\ntext\n", token="write-secret")).raise_for_status()
    assert "hidden" not in handle(service, Verb.LOOKUP, "/", query="*", auth="all-secret")[1]
    assert handle(service, Verb.LOOKUP, "/", query="*", auth="docs-secret")[1]["hidden"] == "2"
    clock[0] = NOW + timedelta(seconds=1)
    assert handle(service, Verb.LOOKUP, "/", query="*", auth="all-secret")[1]["hidden"] == "3"
    assert handle(service, Verb.LOOKUP, "/", query="*")[1]["hidden"] == "3"


def test_a_trusted_service_or_one_without_read_grants_hides_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    service = Service.open(root, trusted=True)
    asyncio.run(service.publish("/a.md", "# A\n")).raise_for_status()
    assert handle(service, Verb.LOOKUP, "/", query="*")[1] == {"matches": "1"}
    assert handle(service, Verb.LIST, "/")[1] == {"entries": "1", "complete": "true"}


def test_a_revoke_reaches_a_running_service_while_it_answers(guarded: tuple[Service, Path]) -> None:
    """Readers never see a half-written file: the reader token works until the revoke
    lands, then never again, and the other grants stay in force throughout."""
    service, tokens = guarded
    add_grant(tokens, "keeper", "keeper-secret", ["/private/**"], [READ])  # keeps /private private
    statuses: list[str] = []
    stop, settled = threading.Event(), threading.Event()

    def read() -> None:
        refusals = 0
        while not stop.is_set():
            statuses.append(handle(service, Verb.FETCH, "/private/a.md", auth="read-secret")[0])
            refusals += statuses[-1] == "unauthorized"
            if refusals >= 20:
                settled.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(5):  # churn: other grants come and go while the service reads
            add_grant(tokens, f"extra{i}", f"extra{i}-secret", ["/extra/**"], [READ])
            revoke_grant(tokens, f"extra{i}")
        revoke_grant(tokens, "reader")
        assert settled.wait(timeout=10), statuses[-5:]
    finally:
        stop.set()
        reader.join(timeout=10)
    assert set(statuses) <= {"ok", "unauthorized"}
    first_refusal = statuses.index("unauthorized")
    assert statuses[0] == "ok" and "ok" not in statuses[first_refusal:]
    assert handle(service, Verb.FETCH, "/private/a.md", auth="read-secret")[0] == "unauthorized"
    assert handle(service, Verb.FETCH, "/private/a.md", auth="keeper-secret")[0] == "ok"
    revoke_grant(tokens, "keeper")  # the last read grant: /private is public again
    assert handle(service, Verb.FETCH, "/private/a.md")[0] == "ok"
    assert asyncio.run(service.publish("/x.md", "x", token="write-secret")).status == "created"
