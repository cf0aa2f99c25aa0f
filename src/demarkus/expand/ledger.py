"""The budget's one ledger: the only place that counts tokens. Pure.

The budget (o200k_base tokens) covers the WHOLE result: envelope, table, blocks, relation
lines and notes. The ledger holds what is printed after the table, part by part, and keeps
back named reservations:

- `closing`: the closing notes at their longest (every row omitted, the fetch limit hit
  once the rows or their known targets could reach it, the largest counts, the related
  documents once the hop has a target); from the leftovers' turn on, also room to NAME the
  first omission, so what is left at the end never turns a visible omission into a bare
  count. Room is kept only for what the closing may still say: kept for a clause it
  cannot print, it is lost to the evidence;
- `hop`: while rows have their turn, the first blocks of the related targets known so far.

A part is printed only if the result still fits with every reservation; each print and
each skip is a `Decision`. Exactness: every part ends with a newline and the next starts
with `>>>`, a boundary no o200k pre-token crosses, so counts add up part by part; the
closing lists as many omissions (at most OMITTED_SHOWN) as the budget allows, and the
whole text is counted once more to be sure. The decisions spent add up to the closing's
"used N" figure.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ..tokens import count_tokens
from . import frames
from .document import MAX_FETCHES

MAX_RELATED = 3
"""Related documents one lookup may print (one hop)."""
OMITTED_SHOWN = 5
"""Omissions named in the closing note; the rest are counted."""
WHOLE_SHARE = 3
"""A row prints a block whole in its turn only within 1/WHOLE_SHARE of the evidence budget
(what the table leaves): the top row's section together with its sub-sections, and every
later row's block. A larger block waits for the leftover budget, where its paragraphs
holding the most query terms print; one large section cannot crowd out the rest."""
WHOLE_FLOOR = 100
"""...but a block of up to this many tokens (a paragraph or two) is never held back."""
SIZES_KEPT = 16_384
"""Texts whose counts are kept, shared by every lookup in the process: a lookup asks about a
few hundred, and the same documents' blocks come back lookup after lookup. Each is kept as
a 16-byte digest and a number (about 2 MiB in all), never as the text."""
_MOST = 999_999
"""Stands for the largest figures the closing notes may print, when reserving room for them."""


_sizes: OrderedDict[bytes, int] = OrderedDict()
_sizes_lock = threading.Lock()  # a gateway may select in several threads


def size(text: str) -> int:
    """Tokens of a text (o200k_base). A selection asks whether a text fits, then prints it,
    or records what it would have needed: the same text is counted once."""
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    with _sizes_lock:
        found = _sizes.get(key)
        if found is not None:
            _sizes.move_to_end(key)
            return found
    counted = count_tokens(text)
    with _sizes_lock:
        _sizes[key] = counted
        if len(_sizes) > SIZES_KEPT:
            _sizes.popitem(last=False)
    return counted


class Action(StrEnum):
    """What became of a part of the result."""

    TABLE = "table"
    """The envelope and the table."""
    BLOCK = "block"
    LINE = "line"
    """A one-line frame: a row already shown, or text already printed elsewhere."""
    RELATIONS = "relations"
    NOTE = "note"
    CLOSING = "closing"
    OMIT = "omit"
    """Not printed; named (or counted) in the `did not fit` note."""
    DROP = "drop"
    """Not printed and not named: over the fetch limit, or no room left even for its note."""

    @property
    def spent(self) -> bool:
        return self not in (Action.OMIT, Action.DROP)


@dataclass(frozen=True, slots=True)
class Decision:
    """One include or skip: where, how many tokens (spent, or what it would have needed),
    what was done and why."""

    location: str
    tokens: int
    action: Action
    why: str

    @property
    def spent(self) -> bool:
        return self.action.spent


@dataclass
class Tally:
    """The facts the closing notes report."""

    rows: int
    expanded_rows: int = 0
    related: int = 0
    fetch_limited: int = 0
    omitted: list[str] = field(default_factory=list)
    """Labels of what did not fit (`loc (~N tokens)`), in the order they had their turn."""
    may_hit_fetch_limit: bool = False


class Ledger:
    """The budget, what is printed against it, and why."""

    def __init__(self, head: str, budget: int, tally: Tally) -> None:
        self.head = head
        self.budget = budget
        self.tally = tally
        self.head_tokens = size(head + "\n")
        """Tokens of the head plus the blank line that opens the expansion."""
        self.parts: list[str] = []
        self.spent = 0
        """Tokens of the parts."""
        self.decisions: list[Decision] = [
            Decision("", self.head_tokens, Action.TABLE, f"the envelope and the table of {tally.rows} rows")
        ]
        self._listed = 0
        """Omissions the closing's reservation has room to name."""
        self._relating = False
        """Whether the closing's reservation has room for its related documents' clause."""
        self._reserved: dict[str, int] = {"closing": self._closing_notes_at_most(listed=0)}

    # --- reservations and allowances ---------------------------------------------------

    def reserve(self, name: str, tokens: int) -> None:
        """Keep `tokens` back under `name` (replacing what that name kept before)."""
        self._reserved[name] = tokens

    def keep_first_listed(self) -> None:
        """From now on keep room to name the first thing that did not fit."""
        self._listed = 1
        self.reserve("closing", self._widened_closing())

    def keep_related_clause(self) -> None:
        """From now on keep room for the closing to count related documents (`and 3 related
        documents`): the hop has a target, so one may print. Kept whether or not it is
        still free, unlike the fetch limit's note: the count must fit whenever a related
        document prints, and without the room none does. Until then it is not kept: on a
        page whose documents declare no relation the closing never says it."""
        if not self._relating:
            self._relating = True
            self.reserve("closing", self._widened_closing())

    def keep_fetch_limit_note(self) -> None:
        """From now on keep room to say the fetch limit was reached, when it is still free
        (else the closing leaves that note out). Kept from the start when the rows alone
        could pass the limit, else from the row whose document's targets could."""
        if self.tally.may_hit_fetch_limit:
            return
        self.tally.may_hit_fetch_limit = True
        closing = self._widened_closing()
        if closing - self._reserved["closing"] <= self.left():
            self.reserve("closing", closing)

    def _widened_closing(self) -> int:
        """The closing's room for what it may say now (never less than it kept before)."""
        return max(self._reserved["closing"], self._closing_notes_at_most(self._listed))

    def over_fetch_limit(self, location: str, turn: str) -> None:
        """A document left unfetched: the fetch limit is reached. The closing counts it."""
        self.tally.fetch_limited += 1
        self.skip(location, 0, Action.DROP, f"{turn}: the fetch limit of {MAX_FETCHES} documents is reached")
        self.keep_fetch_limit_note()

    def reserved(self) -> int:
        return sum(self._reserved.values())

    def left(self) -> int:
        """Tokens still free for evidence."""
        return self.budget - self.head_tokens - self.spent - self.reserved()

    def row_allowance(self) -> int:
        """The most one row may print in its turn (see WHOLE_SHARE)."""
        return max(self.left() // WHOLE_SHARE, WHOLE_FLOOR)

    def share(self, waiting: int) -> int:
        """What is left, shared by `waiting` blocks still to have their turn."""
        return self.left() // waiting

    # --- printing ----------------------------------------------------------------------

    def fits(self, text: str, allowance: int | None = None) -> bool:
        """Whether `text` may print now: within `allowance`, and within the budget with
        every reservation kept."""
        return self._fits(size(text), allowance)

    def spend(self, text: str, location: str, action: Action, why: str, allowance: int | None = None) -> bool:
        """Print `text` if it fits (see `fits`), and record it."""
        cost = size(text)
        if not self._fits(cost, allowance):
            return False
        self.parts.append(text)
        self.spent += cost
        self.decisions.append(Decision(location, cost, action, why))
        return True

    def extend_last(self, text: str, location: str, action: Action, why: str, allowance: int | None = None) -> bool:
        """Print `text` in place of the last part it extends, if what it adds fits (see
        `fits`), and record what it adds: the parts still add up, each ending where the next
        frame starts."""
        added = size(text) - size(self.parts[-1])
        if not self._fits(added, allowance):
            return False
        self.parts[-1] = text
        self.spent += added
        self.decisions.append(Decision(location, added, action, why))
        return True

    def _fits(self, cost: int, allowance: int | None) -> bool:
        if allowance is not None and cost > allowance:
            return False
        return self.head_tokens + self.spent + cost + self.reserved() <= self.budget

    def skip(self, location: str, tokens: int, action: Action, why: str) -> None:
        """Record something that did not print."""
        self.decisions.append(Decision(location, tokens, action, why))

    def omit(self, location: str, tokens: int, why: str) -> None:
        """Name what did not fit in the omission note."""
        self.tally.omitted.append(frames.omission_label(location, tokens))
        self.skip(location, tokens, Action.OMIT, why)

    # --- the closing -------------------------------------------------------------------

    def close(self) -> str:
        """The text after the head: every part, the notes and the closing count, naming as
        many omissions as the budget allows."""
        most = min(OMITTED_SHOWN, len(self.tally.omitted))
        tries = [(listed, True) for listed in range(most, -1, -1)]
        if self.tally.fetch_limited:  # the one note whose room may not have been kept
            tries.append((0, False))
        for listed, fetch_note in tries:
            notes, closing = self._assemble(listed, fetch_note)
            text = "\n" + "".join(self.parts) + notes + closing
            if size(self.head + text) <= self.budget:
                break
        if self.tally.fetch_limited and not fetch_note:
            unsaid = size(frames.fetch_limit(MAX_FETCHES, self.tally.fetch_limited))
            self.decisions.append(Decision("", unsaid, Action.DROP, "the fetch limit's note: no room left for it"))
        if notes:
            why = f"names {listed} of {len(self.tally.omitted)} omissions" if self.tally.omitted else "the fetch limit"
            self.decisions.append(Decision("", size(notes), Action.CLOSING, why))
        self.decisions.append(Decision("", size(closing), Action.CLOSING, "the closing count"))
        return text

    def _assemble(self, listed: int, fetch_note: bool = True) -> tuple[str, str]:
        notes = self._notes(listed, fetch_note=fetch_note)
        fixed = self.head_tokens + self.spent + size(notes)
        used = fixed
        for _ in range(3):  # the count includes the line stating it; settle the number
            settled = fixed + size(self._closing(used))
            if settled == used:
                break
            used = settled
        return notes, self._closing(used)

    def _notes(self, listed: int, *, reserve: bool = False, fetch_note: bool = True) -> str:
        tally = self.tally
        lines: list[str] = []
        if tally.omitted or reserve:
            count = max(len(tally.omitted), 99 if reserve else 0)
            lines.append(frames.omitted(tally.omitted[:listed], count))
        if fetch_note and (tally.fetch_limited or (reserve and tally.may_hit_fetch_limit)):
            count = max(tally.fetch_limited, 99 if reserve else 0)
            lines.append(frames.fetch_limit(MAX_FETCHES, count))
        return "".join(lines)

    def _closing(self, used: int, *, reserve: bool = False) -> str:
        tally = self.tally
        related = (MAX_RELATED if self._relating else 0) if reserve else tally.related
        expanded = tally.rows if reserve else tally.expanded_rows
        return frames.closing(expanded, tally.rows, related, used, self.budget)

    def _closing_notes_at_most(self, listed: int) -> int:
        return size(self._notes(listed, reserve=True)) + size(self._closing(_MOST, reserve=True))


def explain(decisions: Sequence[Decision], budget: int) -> str:
    """The decision list as text: one line per include or skip, in the order they were made."""
    spent = sum(d.tokens for d in decisions if d.spent)
    lines = [f"decisions: {spent} of {budget} tokens spent; a figure in brackets was not spent"]
    for d in decisions:
        tokens = str(d.tokens) if d.spent else f"({d.tokens})"
        where = f"{d.location} — " if d.location else ""
        lines.append(f"{tokens:>7}  {d.action.value:<9}  {where}{d.why}")
    return "\n".join(lines) + "\n"
