"""Item: one canonical path. Every spelling of a path that the store would serve is
either refused or answered exactly as its canonical form, whatever the read grants."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demarkus import auth
from demarkus.errors import BadRequestError, NotFoundError
from demarkus.protocol import Request, Verb, canonical_path, linked_path, split_anchor
from demarkus.render import escape_cell
from demarkus.service import Service

DOCUMENTS = ["/p/a.md", "/p/q/b.md", "/p/q/r/c.md", "/s/x.md", "/s/index.md", "/t.md"]
SEGMENTS = ["p", "q", "r", "s", "a.md", "b.md", "c.md", "x.md", "t.md", "index.md"]
READER = "reader-secret"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("canonical")
    service = Service.open(root, trusted=True)

    async def load() -> None:
        for path in DOCUMENTS:
            await service.publish(path, f"# {path}\n\nText of {path}.\n")

    asyncio.run(load())
    service.close()
    return root


def patterns() -> st.SearchStrategy[str]:
    """Grant globs over the store's names: exact, `*`, `?`, `/**` and `/**/` forms."""
    segment = st.sampled_from([*SEGMENTS, "*", "*.md", "?.md"])
    plain = st.lists(segment, min_size=1, max_size=3).map(lambda s: "/" + "/".join(s))
    prefix = st.lists(st.sampled_from(SEGMENTS[:4]), min_size=0, max_size=2).map(
        lambda s: "/" + "/".join(s) if s else ""
    )
    return st.one_of(
        plain, prefix.map(lambda p: p + "/**"), st.tuples(prefix, segment).map(lambda t: f"{t[0]}/**/{t[1]}")
    )


@st.composite
def spellings(draw: st.DrawFn) -> tuple[str, str]:
    """(canonical path, another spelling of it): doubled slashes, a trailing slash, or a
    `.` segment (which must be refused), and sometimes a `/vN` version suffix."""
    base = draw(st.sampled_from([*DOCUMENTS, "/p", "/p/q", "/s", "/"]))
    if base != "/" and base.endswith(".md") and draw(st.booleans()):
        base += "/v1"
    segments = [s for s in base.split("/") if s]
    spelled = ""
    for segment in segments:
        spelled += "/" * draw(st.integers(1, 3))
        if draw(st.integers(0, 9)) == 0:
            spelled += "./"
        spelled += segment
    spelled += "/" * draw(st.integers(0 if segments else 1, 2))
    return base, spelled


def answer(service: Service, verb: Verb, path: str, token: str | None) -> tuple[str, dict[str, str], bytes]:
    try:
        request = Request(verb, path, {"auth": token} if token else {})
    except (BadRequestError, NotFoundError) as exc:
        return exc.status, {}, b""
    response = service.handle(request)
    return response.status, dict(response.metadata), response.body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    grants=st.lists(patterns(), min_size=1, max_size=3),
    spelled=spellings(),
    verb=st.sampled_from([Verb.FETCH, Verb.VERSIONS, Verb.LIST]),
    with_token=st.booleans(),
)
def test_every_spelling_is_refused_or_authorised_as_its_canonical_form(
    store: Path,
    tmp_path_factory: pytest.TempPathFactory,
    grants: list[str],
    spelled: tuple[str, str],
    verb: Verb,
    with_token: bool,
) -> None:
    canonical, other = spelled
    tokens = tmp_path_factory.mktemp("grants") / "tokens.toml"
    auth.add_grant(tokens, "reader", READER, grants, ["read"])
    service = Service.open(store, tokens=tokens, writable=False)
    try:
        token = READER if with_token else None
        got = answer(service, verb, other, token)
        if "/./" in other or other.endswith("/."):
            assert got[0] == "bad-request"
            return
        assert canonical_path(other) == canonical
        assert got == answer(service, verb, canonical, token)
    finally:
        service.close()


def test_the_reported_spellings_of_a_protected_path_are_refused(store: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    auth.add_grant(tokens, "reader", READER, ["/p/**", "/t.md", "/s/*.md"], ["read"])
    service = Service.open(store, tokens=tokens, writable=False)
    for verb, path in [
        (Verb.FETCH, "//p/a.md"),
        (Verb.FETCH, "///p///q///b.md"),
        (Verb.FETCH, "//p/a.md/v1"),
        (Verb.VERSIONS, "//p/a.md"),
        (Verb.FETCH, "/t.md/"),
        (Verb.FETCH, "/s//x.md"),
    ]:
        assert answer(service, verb, path, None)[0] == "unauthorized", (verb, path)
    for verb, path in [(Verb.FETCH, "//p"), (Verb.LIST, "//p/")]:
        status, _, body = answer(service, verb, path, None)
        assert status == "ok" and b"a.md" not in body and b"q/" not in body, (verb, path, body)
    service.close()


def test_a_linked_path_is_decoded_before_it_is_checked():
    assert linked_path("/docs/My%20note.md") == "/docs/My note.md"
    assert linked_path("/docs%2F%2Fa.md/") == "/docs/a.md"
    with pytest.raises(NotFoundError):
        linked_path("/docs/%2e%2E/secret.md")


def test_a_path_copied_from_a_table_cell_is_read_without_its_escapes():
    for name in ("/pages/Changelog_07_09.md", "/a\\_b [1] (x) *y* `z` ~w #v |u.md", "/p\\q.md"):
        assert linked_path(escape_cell(name)) == name
    assert linked_path("/p\\q.md") == "/p\\q.md"  # no escape: the backslash is the name's
    assert linked_path("/a%5C_b.md") == "/a\\_b.md"  # percent-encoded: the name's own
    assert split_anchor("/notes/C\\# basics.md#usage") == ("/notes/C\\# basics.md", "usage")
    assert split_anchor("/a.md") == ("/a.md", "") and split_anchor("/a.md#") == ("/a.md", "")
