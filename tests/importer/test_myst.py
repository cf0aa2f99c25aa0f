"""MyST's cross-reference targets (`myst`): where each `(name)=` leads, and links to one
made links to its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from demarkus.importer.folder import scan_folder
from demarkus.importer.myst import FolderTargets, NoteTargets, Place, Targets, targets_in
from demarkus.importer.note import parse_note

GUIDE = """\
# Guide

(install-steps)=
## Installing

Run the installer.

(upgrade)=
(Upgrading  Notes)=

### Upgrading

(the-table)=
| a | b |
|---|---|

{#closing .note}
### Closing

{#a-paragraph}
Last words.

| c | d |
|---|---|

```md
(in-code)=
## Not a heading
```
"""


def test_a_target_leads_to_the_heading_after_it_else_to_the_section_holding_it():
    assert targets_in(GUIDE, "docs/guide.md") == {
        "install-steps": Place("docs/guide.md", "installing", "Installing"),
        "upgrade": Place("docs/guide.md", "upgrading", "Upgrading"),  # stacked targets, a blank line
        "upgrading notes": Place("docs/guide.md", "upgrading", "Upgrading"),  # case and spaces as Sphinx
        "the-table": Place("docs/guide.md", "upgrading"),  # not a heading: its section, no title
        "closing": Place("docs/guide.md", "closing", "Closing"),  # a block's attributes name it
        "a-paragraph": Place("docs/guide.md", "closing"),
    }


def test_a_target_before_any_heading_leads_to_the_note_and_the_first_of_two_alike_wins():
    body = "(top)=\nText.\n\n# A\n\n(top)=\n## B\n"
    assert targets_in(body) == {"top": Place("", "")}
    assert targets_in("No target here (x)= in text.\n") == {}


TARGETS = Targets(
    {
        "install-steps": Place("docs/guide.md", "installing", "Installing"),
        "api": Place("ref/api.md", "", ""),
        "odd": Place("ref/api.md", "calls", "Calls [beta]"),
        "local-1": Place("docs/guide.md", "installing", "Installing"),
    },
    "/kb",
)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("See [the steps](#install-steps).", "See [the steps](../docs/guide.md#installing)."),
        ("See [the steps](install-steps).", "See [the steps](../docs/guide.md#installing)."),  # MyST's older form
        ("See [the steps](project:#install-steps).", "See [the steps](../docs/guide.md#installing)."),
        ("See [the steps](#Install-Steps).", "See [the steps](../docs/guide.md#installing)."),
        ("See [](#install-steps).", "See [Installing](../docs/guide.md#installing)."),  # no text: the heading's
        ("See <project:#install-steps>.", "See [Installing](../docs/guide.md#installing)."),
        (  # the links grow: the code span after them is found again
            "[](#api) [](#install-steps) `<project:#install-steps>`",
            "[api](api.md) [Installing](../docs/guide.md#installing) `<project:#install-steps>`",
        ),
        ("See [](#api) and [](#odd).", "See [api](api.md) and [Calls \\[beta\\]](api.md#calls)."),
        ("As in {ref}`install-steps`.", "As in [Installing](../docs/guide.md#installing)."),  # MyST's role
        ("As in {ref}`the steps <install-steps>`.", "As in [the steps](../docs/guide.md#installing)."),
        (
            "As in {ref}`local-1` and `` {ref}`api` ``.",
            "As in [Installing](../docs/guide.md#installing) and `` {ref}`api` ``.",
        ),
        ('[steps]: #install-steps "the title"', '[steps]: ../docs/guide.md#installing "the title"'),
        # named by no note, a heading of the note itself, code, a path, a web address: as written
        ("See [x](#nowhere) and [y](nowhere).", None),
        ("See [x](#local-1) here.", None),
        ("As in {ref}`nowhere` and {ref}`sphinx:install-steps`.", None),
        ("See `[x](#install-steps)` here.", None),
        ("See [x](../docs/guide.md#install-steps) and [y](https://x.org/#install-steps).", None),
    ],
)
def test_a_link_to_a_target_becomes_a_link_to_its_place(line: str, expected: str | None):
    body = f"# Local\n\n## Local\n\n{line}\n"
    assert TARGETS.localize(body, "/kb/ref/calls.md") == f"# Local\n\n## Local\n\n{expected or line}\n"


def test_the_notes_own_target_comes_before_its_headings_and_another_notes():
    body = "(api)=\n## Calls\n\nSee [calls](#api), [again](api) and [local](#calls).\n"
    assert TARGETS.localize(body, "/kb/ref/calls.md") == (
        "(api)=\n## Calls\n\nSee [calls](#calls), [again](#calls) and [local](#calls).\n"
    )
    body = "## Install steps\n\nSee [here](#install-steps).\n"  # a heading of its own wins
    assert TARGETS.localize(body, "/kb/ref/calls.md") == body


def test_a_link_in_a_code_block_stays_and_a_relation_names_the_target():
    raw = b"---\nrelated: '#install-steps'\n---\n# A\n\n    [x](#install-steps)\n\n[y](#install-steps)\n"
    note = parse_note(raw, "/kb/a.md", links=(TARGETS,))
    assert note.metadata["rel-related"] == "/kb/docs/guide.md#installing"
    assert note.body == b"# A\n\n    [x](#install-steps)\n\n[y](docs/guide.md#installing)\n"


def test_the_folders_targets_are_read_once_and_again_from_a_listing_given(tmp_path: Path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "one.md").write_text("(shared)=\n# One\n")
    (tmp_path / "a.md").write_text("---\ntitle: A\n---\n(shared)=\n# A\n\n(only-a)=\nText.\n")
    (tmp_path / "plain.md").write_text("# Plain\n")
    targets = FolderTargets(lambda: scan_folder(tmp_path).files, NoteTargets(tmp_path))
    assert targets.current() == {"shared": Place("a.md", "a", "A"), "only-a": Place("a.md", "a")}
    (tmp_path / "a.md").write_text("# A\n")
    assert targets.current()["shared"] == Place("a.md", "a", "A")  # kept until read again
    targets.read(scan_folder(tmp_path).files)
    assert targets.current() == {"shared": Place("b/one.md", "one", "One")}
