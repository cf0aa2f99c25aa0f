"""The sweep's per-world line: sums over a world's settings, its worst setting against
v0.1.0, and an earlier run's sums beside today's."""

from __future__ import annotations

from bench.evidence_sweep import _world_row


def arm(all_quotes: int, found: int) -> dict:
    return {"all_quotes": all_quotes, "quotes_found": found}


def setting(world: str, limit: int, budget: int, base: tuple[int, int], now: tuple[int, int]) -> dict:
    return {"world": world, "limit": limit, "budget": budget, "v0.1.0": arm(*base), "current": arm(*now)}


def test_a_worlds_line_sums_its_settings_and_names_its_worst_one():
    results = [
        setting("eth", 3, 1000, (4, 17), (5, 19)),
        setting("eth", 10, 1500, (5, 22), (3, 21)),
        setting("peps", 3, 1000, (1, 1), (9, 9)),  # another world: not summed
    ]
    assert _world_row("eth", results, {}) == ["eth", "9/39", "8/40", "-2 (l10 b1500)"]
    earlier = {("eth", 3, 1000): setting("eth", 3, 1000, (4, 17), (4, 18)), ("eth", 10, 1500): results[1]}
    assert _world_row("eth", results, earlier)[-1] == "7/39"  # that run's current sums
    assert _world_row("eth", results, {("eth", 3, 1000): results[0]})[-1] == "-"  # a setting it lacks
