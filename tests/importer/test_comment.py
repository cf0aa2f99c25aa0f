"""Obsidian's comments, `%%...%%`, left out of a vault note: pure, no store, but for one
import of a folder and a lookup over it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from demarkus.importer import parse_note
from demarkus.importer.comment import drop_comments

from .test_folder import run, tool_texts


@pytest.mark.parametrize(
    "text, left",
    [
        ("Shown %%hidden%% too.\n", "Shown  too.\n"),
        ("para\n%% a whole line %%\nsame para\n", "para\nsame para\n"),
        ("p\n\n%%\nA block comment.\n\nStill one.\n%%\n\nq\n", "p\n\n\nq\n"),
        ("kept %%opens\ncloses%% kept too\nnext\n", "kept  kept too\nnext\n"),
        ("x\r\n%%c%%\r\ny\r\n", "x\r\ny\r\n"),
        ("a %%one%% b %%two%% c\n", "a  b  c\n"),
    ],
)
def test_comments_and_the_lines_they_fill_are_left_out(text: str, left: str):
    assert drop_comments(text) == left


@pytest.mark.parametrize(
    "text",
    [
        "No comment here.\n",
        "```\n%%in a fence%%\n```\n",
        "    %%indented code%%\n",
        "Code `%%span%%` is text.\n",
        "A stray 100%% and the rest\nof the note\n",  # never closed: nothing is lost
        "%%a note of comments only%%\n",  # its text, as a page of properties only
    ],
)
def test_marks_in_code_a_mark_never_closed_and_a_note_of_comments_only_stay(text: str):
    assert drop_comments(text) == text


@given(st.text(alphabet="ab%`\n \t#-", max_size=60))
def test_it_only_ever_removes_text(text: str):
    left = drop_comments(text)
    it = iter(text)
    assert all(char in it for char in left)  # a subsequence: nothing added or moved


def test_a_vault_note_is_read_without_its_comments_and_a_plain_one_with_them():
    raw = b"# Plan\n\nShip on Friday. %%ask Dana about the budget%%\n"
    assert parse_note(raw, "/kb/plan.md", vault=True).body == b"# Plan\n\nShip on Friday. \n"
    assert b"%%ask Dana" in parse_note(raw, "/kb/plan.md").body  # plain markdown: `%%` is text


def test_a_comment_does_not_answer_a_search(tmp_path: Path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "plan.md").write_text("# Plan\n\nShip on Friday.\n\n%%\nThe zeppelin budget is secret.\n%%\n")
    root = tmp_path / "store"
    run(vault, root, wikilinks=True)
    shown, found, fetched = asyncio.run(
        tool_texts(
            root,
            [
                ("mark_lookup", {"query": "ship friday", "match": "body"}),
                ("mark_lookup", {"query": "zeppelin budget", "match": "body"}),
                ("mark_fetch", {"url": "/kb/plan.md"}),
            ],
        )
    )
    assert "/kb/plan.md" in shown  # the note's own words find it
    assert "/kb/plan.md" not in found
    assert "Ship on Friday." in fetched and "zeppelin" not in fetched
