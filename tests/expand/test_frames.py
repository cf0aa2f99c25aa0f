"""The `>>>` grammar: what the writer prints, the parser reads back as the same values."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from demarkus.expand import frames
from demarkus.expand.frames import (
    Block,
    Closing,
    FetchLimit,
    Location,
    Note,
    Omitted,
    Relation,
    SameText,
    Unlisted,
    Within,
)

# a segment may hold spaces, as people name their notes (`My note.md`)
_segments = st.text(alphabet="abcxyz-_.0123 ", min_size=1, max_size=8).filter(
    lambda s: s.strip(" .") and s not in (".", "..")
)
_paths = st.lists(_segments, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts) + ".md")
_worlds = st.sampled_from(["", "mark://peps", "mark://w-2"])
_locations = st.builds(
    Location,
    st.tuples(_worlds, _paths).map("".join),
    st.none() | st.integers(1, 400),
    st.sampled_from(["", "intro", "step-1-check-quorum", "a_b"]),
)
_texts = st.text(alphabet=st.sampled_from(list("ab >#\n[]…~")), max_size=60).map(lambda t: t.strip("\n"))


def test_a_location_round_trips_through_its_text():
    for word in ("/a.md", "/a.md/v3", "/a.md/v3#x", "mark://w/docs/a.md/v12#step-1", "/a.md#x", "</My note.md/v2#x>"):
        assert str(Location.parse(word)) == word
    assert Location.parse("mark://w/docs/a.md/v12#s") == Location("mark://w/docs/a.md", 12, "s")


def test_a_location_holding_spaces_is_one_word_in_angle_brackets():
    assert str(Location("/pages/Undo and Redo.md", 1, "usage")) == "</pages/Undo and Redo.md/v1#usage>"
    assert frames.word("/pages/My note.md#x") == "</pages/My note.md#x>"
    assert frames.word("/a.md#x") == "/a.md#x"
    text = frames.omitted([frames.omission_label("/pages/My note.md#x", 12), frames.omission_label("/b.md", 3)], 4)
    assert frames.parse(text) == [Omitted(((Location("/pages/My note.md", None, "x"), 12), (Location("/b.md"), 3)), 2)]


_stale = st.tuples(st.lists(st.builds(str, _locations), max_size=2), st.sampled_from(["", *frames.STALE_STATUSES]))


@given(
    _locations,
    _texts,
    st.none() | st.tuples(_locations, st.sampled_from(["supersedes", "depends-on"])),
    _stale,
)
def test_a_block_reads_back_as_written(location: Location, text: str, via, stale):
    marker = frames.stale(*stale)
    header = str(location) + (frames.via(str(via[0]), via[1]) if via else "") + marker
    written = frames.block(header, text)
    (parsed,) = frames.parse("status: ok\n\n| table |\n\n" + written)
    assert parsed == Block(location, text.strip("\n"), via, marker[2:-1])


def test_a_stale_marker_names_the_successors_else_the_status():
    assert frames.stale(["/b.md", "/c.md"], "withdrawn") == " (superseded by /b.md, /c.md)"
    assert frames.stale([], "withdrawn") == " (withdrawn)"
    assert frames.stale([], "") == ""


def test_evidence_that_looks_like_a_frame_cannot_forge_one():
    written = frames.block("/a.md/v1#x", "quoted:\n>>> note: forged\n>>> /b.md/v1")
    assert written.count("\n>>> ") == 0
    assert frames.parse(written) == [Block(Location("/a.md", 1, "x"), "quoted:\n>>> note: forged\n>>> /b.md/v1")]


@given(st.lists(_locations, max_size=4), st.integers(0, 99), _locations, _locations, st.integers(0, 5))
def test_every_line_frame_reads_back_as_written(named: list[Location], extra: int, one: Location, two: Location, n):
    labels = [frames.omission_label(str(loc), 10 + i) for i, loc in enumerate(named)]
    text = "".join(
        [
            frames.relation(str(one), "supersedes", str(two)),
            frames.unlisted(str(one), n + 2),
            frames.within(str(one), str(two)),
            frames.same_text(str(two), str(one)),
            frames.omitted(labels, len(labels) + extra),
            frames.fetch_limit(10, n),
            frames.note(f"{two}: world w did not answer FETCH"),
            frames.closing(n, n + 1, n % 3, 1000 + n, 1500),
        ]
    )
    assert frames.parse(text) == [
        Relation(one, "supersedes", str(two)),
        Unlisted(one, n + 2),
        Within(one, two),
        SameText(two, one),
        Omitted(tuple((loc, 10 + i) for i, loc in enumerate(named)), extra),
        FetchLimit(10, n),
        Note(f"{two}: world w did not answer FETCH"),
        Closing(n, n + 1, n % 3, 1000 + n, 1500),
    ]


def test_a_relation_keeps_its_target_as_written():
    (parsed,) = frames.parse(frames.relation("/a.md/v3", "depends-on", "mark://other/x.md#y"))
    assert parsed == Relation(Location("/a.md", 3), "depends-on", "mark://other/x.md#y")


def test_blocks_lists_only_the_evidence_blocks_in_order():
    text = (
        frames.block("/a.md/v1#x", "one")
        + frames.relation("/a.md/v1", "supersedes", "/b.md")
        + frames.block("/b.md/v2" + frames.via("/a.md/v1", "supersedes"), "two")
        + frames.closing(1, 1, 1, 50, 60)
    )
    assert [(str(b.location), b.text) for b in frames.blocks(text)] == [("/a.md/v1#x", "one"), ("/b.md/v2", "two")]


@given(_locations, st.lists(st.sampled_from(["intro", "step-1-check-quorum", "a_b", "x.y"]), min_size=1, max_size=4))
def test_the_sub_sections_a_block_names_as_not_shown_read_back_in_its_document(location: Location, anchors):
    (block,) = frames.parse(frames.block(str(location), "Some text.\n\n" + frames.subsections_not_shown(anchors)))
    assert isinstance(block, Block)
    assert frames.hidden_subsections(block) == [Location(location.path, location.version, a) for a in anchors]


def test_a_block_without_the_note_names_no_hidden_sub_section():
    (block,) = frames.parse(frames.block("/a.md/v1#x", "It says [sub-sections not shown: #y] in passing."))
    assert isinstance(block, Block)
    assert frames.hidden_subsections(block) == []
