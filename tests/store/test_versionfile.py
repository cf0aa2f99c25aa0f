"""The version-file codec and the hash chain, without a filesystem."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from demarkus.errors import IntegrityError
from demarkus.store import (
    VersionFile,
    parse_version,
    serialize_version,
    set_archived,
    sha256_tag,
    verify_chain,
)

TRICKY_VALUES = [
    "yes",
    "no",
    "on",
    "null",
    "~",
    "010",
    "0x1F",
    "1e3",
    ".5",
    ": x",
    "a: b",
    "a:",
    "#tag",
    "x #y",
    "'",
    '"',
    "[a]",
    "{a: b}",
    "a, b",
    " lead",
    "trail ",
    " ",
    "",
    "-",
    "- item",
    "---",
    "...",
    "&anchor",
    "*alias",
    "!tag",
    "%directive",
    "@at",
    "`tick",
    "|",
    "> folded",
    "\\",
    "a\\nb",
    "tab\there",
    "ünïcödé",
    "日本語",
    "😀",
    "\u2028",
    "\ufeff",
    "\u00a0",
    "status:accepted",
    "deployment,canary,decision",
    "/decisions/adr-009.md",
    "0.8",
    "a  b",
]

keys = st.from_regex(r"[a-z0-9-]+", fullmatch=True)
single_line = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")).filter(lambda c: c not in "\r\n"))
values = st.one_of(single_line, st.sampled_from(TRICKY_VALUES))
bodies = st.one_of(
    st.binary(),
    st.builds(lambda a, b: b"---\n" + a + b"\n---\n" + b, st.binary(), st.binary()),
)


def build(version: int, body: bytes, previous: bytes | None = None, **metadata: str) -> bytes:
    prev = sha256_tag(previous) if previous is not None else None
    return serialize_version(VersionFile(version, False, prev, metadata, body))


def chain(bodies: list[bytes]) -> list[bytes]:
    raws: list[bytes] = []
    for number, body in enumerate(bodies, start=1):
        raws.append(build(number, body, raws[-1] if raws else None))
    return raws


def test_v1_with_metadata_serializes_to_the_documented_layout() -> None:
    raw = build(1, b"# Hello\n", title="Hello", tags="a,b", **{"rel-supersedes": "/old.md"})
    assert raw == (
        b"---\nversion: 1\narchived: false\nmeta.rel-supersedes: /old.md\ntags: a,b\ntitle: Hello\n---\n# Hello\n"
    )


def test_later_versions_carry_the_hash_of_the_previous_raw_file() -> None:
    v1 = build(1, b"one")
    v2 = parse_version(build(2, b"two", v1))
    assert v2.previous_hash == sha256_tag(v1)
    assert v2.previous_hash.startswith("sha256-") and len(v2.previous_hash) == 71


@given(
    version=st.integers(min_value=1, max_value=10**9),
    archived=st.booleans(),
    metadata=st.dictionaries(keys, values, max_size=12),
    body=bodies,
    previous=st.binary(),
)
def test_serialize_then_parse_returns_the_same_version_file(
    version: int, archived: bool, metadata: dict[str, str], body: bytes, previous: bytes
) -> None:
    previous_hash = sha256_tag(previous) if version > 1 else None
    vf = VersionFile(version, archived, previous_hash, metadata, body)
    raw = serialize_version(vf)
    assert parse_version(raw) == vf
    assert raw.endswith(body)


@pytest.mark.parametrize("value", TRICKY_VALUES, ids=repr)
def test_tricky_values_read_back_identically_with_the_yaml_base_loader(value: str) -> None:
    raw = build(1, b"", note=value, title=value)
    block = raw[4 : raw.index(b"\n---\n") + 1].decode("utf-8")
    loaded = yaml.load(block, Loader=yaml.CBaseLoader)
    assert loaded == {"version": "1", "archived": "false", "meta.note": value, "title": value}


@given(
    bodies=st.lists(bodies, min_size=2, max_size=5),
    data=st.data(),
)
def test_any_single_byte_change_to_an_old_version_breaks_the_chain(bodies: list[bytes], data: st.DataObject) -> None:
    raws = chain(bodies)
    assert verify_chain(raws) is None
    victim = data.draw(st.integers(min_value=0, max_value=len(raws) - 2), label="victim")
    position = data.draw(st.integers(min_value=0, max_value=len(raws[victim]) - 1), label="pos")
    delta = data.draw(st.integers(min_value=1, max_value=255), label="delta")
    damaged = bytearray(raws[victim])
    damaged[position] = (damaged[position] + delta) % 256
    raws[victim] = bytes(damaged)
    assert verify_chain(raws) is not None


def test_verify_chain_names_the_version_whose_previous_hash_no_longer_matches() -> None:
    raws = chain([b"one", b"two", b"three"])
    raws[1] = raws[1].replace(b"two", b"TWO")
    assert verify_chain(raws) == "v3: previous-hash does not match v2"


def test_verify_chain_reports_a_version_file_out_of_sequence() -> None:
    raws = chain([b"one", b"two"])
    assert verify_chain([raws[1], raws[0]]) == "v1: the file says version 2"


def test_verify_chain_accepts_an_empty_history() -> None:
    assert verify_chain([]) is None


def test_set_archived_changes_only_the_archived_line() -> None:
    raw = build(2, b"body\narchived: false\n", build(1, b"x"), title="T")
    flipped = set_archived(raw, True)
    assert flipped == raw.replace(b"archived: false", b"archived: true", 1)
    assert parse_version(flipped).archived is True
    assert set_archived(flipped, False) == raw


def test_archiving_the_tip_keeps_the_chain_valid() -> None:
    raws = chain([b"one", b"two"])
    raws[-1] = set_archived(raws[-1], True)
    assert verify_chain(raws) is None


def test_okf_keys_are_bare_and_other_keys_are_prefixed_on_disk() -> None:
    raw = build(1, b"", type="Decision", description="d", agent="claude")
    assert b"\ntype: Decision\n" in raw
    assert b"\ndescription: d\n" in raw
    assert b"\nmeta.agent: claude\n" in raw


def test_reader_accepts_meta_prefixed_okf_keys_and_a_tags_flow_list() -> None:
    raw = b"---\nversion: 1\narchived: false\nmeta.title: Old\ntags: [a, b]\n---\nbody"
    assert parse_version(raw).metadata == {"title": "Old", "tags": "a,b"}


DAMAGED = {
    "no opening line": b"version: 1\n---\n",
    "never closed": b"---\nversion: 1\narchived: false\n",
    "empty frontmatter": b"---\n---\nbody",
    "unknown store field": b"---\nversion: 1\narchived: false\nowner: me\n---\n",
    "unsorted publisher keys": b"---\nversion: 1\narchived: false\ntitle: b\ntags: a\n---\n",
    "store fields out of order": b"---\narchived: false\nversion: 1\n---\n",
    "missing archived": b"---\nversion: 1\n---\n",
    "version zero": b"---\nversion: 0\narchived: false\n---\n",
    "version with leading zero": b"---\nversion: 01\narchived: false\n---\n",
    "archived not boolean": b"---\nversion: 1\narchived: maybe\n---\n",
    "previous hash on v1": (b"---\nversion: 1\narchived: false\nprevious-hash: sha256-" + b"0" * 64 + b"\n---\n"),
    "v2 without previous hash": b"---\nversion: 2\narchived: false\n---\n",
    "malformed previous hash": b"---\nversion: 2\narchived: false\nprevious-hash: sha256-XY\n---\n",
    "repeated key": b"---\nversion: 1\narchived: false\ntitle: a\ntitle: a\n---\n",
    "bare and prefixed twice": b"---\nversion: 1\narchived: false\nmeta.title: a\ntitle: b\n---\n",
    "multi-line value": b'---\nversion: 1\narchived: false\ntitle: "a\n  b"\n---\n',
    "nested value": b"---\nversion: 1\narchived: false\nmeta.x: [a]\n---\n",
    "not utf-8": b"---\nversion: 1\narchived: false\ntitle: \xff\n---\n",
}


@pytest.mark.parametrize("raw", DAMAGED.values(), ids=DAMAGED.keys())
def test_strict_parser_rejects_damaged_version_files(raw: bytes) -> None:
    with pytest.raises(IntegrityError):
        parse_version(raw)


def test_serialize_refuses_a_value_with_a_line_break() -> None:
    with pytest.raises(ValueError):
        build(1, b"", title="a\nb")


def test_serialize_refuses_a_missing_previous_hash_after_v1() -> None:
    with pytest.raises(ValueError):
        serialize_version(VersionFile(2, False, None, {}, b""))
