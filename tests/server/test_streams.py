"""The intake of request streams without sockets: what it hands out, what it refuses,
and that every byte and every record it charges is given back."""

from __future__ import annotations

import pytest

from demarkus.errors import BadRequestError, RateLimitedError
from demarkus.protocol import MAX_REQUEST, MAX_REQUEST_LINE
from demarkus.server import streams
from demarkus.server.streams import Budget, Intake, Refusal


def test_a_request_is_handed_out_whole_when_its_stream_ends_and_given_back_when_answered():
    budget = Budget()
    intake = Intake(budget)
    assert intake.receive(0, b"FETCH /a", False) is None
    assert intake.receive(0, b".md\n", True) == b"FETCH /a.md\n"
    assert (budget.streams, budget.bytes, intake.busy) == (1, 12, 1)  # charged while answered
    intake.finish(0)
    assert (budget.streams, budget.bytes, len(intake)) == (0, 0, 0)


def test_a_stream_over_the_request_limit_is_refused_and_the_rest_of_it_dropped():
    budget = Budget()
    intake = Intake(budget)
    assert intake.receive(0, b"PUBLISH /a.md\n" + b"x" * (MAX_REQUEST - 100), False) is None
    refusal = intake.receive(0, b"x" * 200, False)
    assert isinstance(refusal, Refusal) and not refusal.finished
    assert isinstance(refusal.error, BadRequestError) and "split the document" in refusal.error.message
    assert (budget.bytes, intake.busy, len(intake)) == (0, 0, 1)  # only the refused id is kept
    assert intake.receive(0, b"y" * 10_000_000, False) is None
    assert budget.bytes == 0
    assert intake.receive(0, b"", True) is None  # the client finished it: the id goes too
    assert len(intake) == 0


def test_a_request_line_without_a_newline_is_refused_as_soon_as_it_is_too_long():
    intake = Intake(Budget())
    assert intake.receive(0, b"FETCH /" + b"x" * (MAX_REQUEST_LINE - 7), False) is None
    refusal = intake.receive(0, b"x", False)
    assert isinstance(refusal, Refusal) and "request line" in refusal.error.message


def test_a_stream_that_crosses_the_connection_bound_is_rate_limited_and_the_others_go_on():
    budget = Budget()
    intake = Intake(budget)
    chunk = b"PUBLISH /a.md\n" + b"x" * (streams.MAX_CONNECTION_BYTES // 4 - 100)
    for stream_id in range(0, 16, 4):
        assert intake.receive(stream_id, chunk, False) is None
    refusal = intake.receive(16, chunk, True)
    assert isinstance(refusal, Refusal) and refusal.finished
    assert isinstance(refusal.error, RateLimitedError) and "wait for their answers" in refusal.error.message
    assert intake.receive(0, b"", True) == chunk
    assert budget.bytes == 4 * len(chunk)


def test_the_server_bound_holds_over_every_connection(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(streams, "MAX_SERVER_BYTES", 1000)
    budget = Budget()
    first, second = Intake(budget), Intake(budget)
    assert first.receive(0, b"x" * 600, False) is None
    refusal = second.receive(0, b"x" * 600, False)
    assert isinstance(refusal, Refusal) and isinstance(refusal.error, RateLimitedError)
    assert "from all clients" in refusal.error.message
    first.close()
    assert second.receive(4, b"x" * 600, False) is None
    assert (budget.bytes, budget.streams) == (600, 1)


def test_the_connection_and_server_bounds_on_requests_in_flight(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(streams, "MAX_STREAMS", 2)
    monkeypatch.setattr(streams, "MAX_SERVER_STREAMS", 3)
    budget = Budget()
    one, two = Intake(budget), Intake(budget)
    assert one.receive(0, b"FETCH /a.md\n", True) is not None
    assert one.receive(4, b"FETCH /a.md\n", True) is not None
    refused = one.receive(8, b"FETCH /a.md\n", True)
    assert isinstance(refused, Refusal) and "this connection" in refused.error.message
    assert two.receive(0, b"FETCH /a.md\n", True) is not None
    refused = two.receive(4, b"FETCH /a.md\n", True)
    assert isinstance(refused, Refusal) and "the server" in refused.error.message
    one.finish(0)
    assert two.receive(8, b"FETCH /a.md\n", True) is not None


def test_a_reset_or_an_expiry_gives_back_a_request_still_arriving_but_not_one_being_answered():
    budget = Budget()
    intake = Intake(budget)
    intake.receive(0, b"FETCH /a.md\n", False)
    intake.receive(4, b"FETCH /a.md\n", True)
    intake.receive(8, b"FETCH /a.md\n", False)
    assert intake.reset(0) is True
    assert intake.reset(4) is False and intake.busy == 2  # still being answered
    assert intake.expire(4, BadRequestError("late")) is None
    refusal = intake.expire(8, BadRequestError("late"))
    assert isinstance(refusal, Refusal) and not refusal.finished
    assert intake.reset(8) is False  # the refused id goes with the client's reset
    intake.finish(4)
    assert (budget.streams, budget.bytes, len(intake)) == (0, 0, 0)
