"""A cache of values worked out from texts, bounded by the characters of the texts kept."""

from __future__ import annotations

import threading

from demarkus.textcache import TextCache


def test_the_least_recently_used_texts_go_first_once_over_the_bound():
    cache: TextCache[int] = TextCache(max_chars=10)
    cache.put("abcd", 1)
    cache.put("efgh", 2)
    assert cache.get("abcd") == 1  # now the most recently used
    cache.put("ijkl", 3)  # 12 characters: efgh goes
    assert cache.texts() == ["abcd", "ijkl"] and cache.get("efgh") is None
    cache.put("abcd", 9)  # kept already: the first value stays
    assert cache.get("abcd") == 1
    cache.update("abcd", 4)
    cache.update("mnop", 5)  # not kept: nothing
    assert cache.get("abcd") == 4 and cache.get("mnop") is None
    cache.put("x" * 11, 6)  # longer than the bound: it pushes out everything, itself too
    assert cache.texts() == []


def test_threads_share_one_cache_within_its_bound():
    cache: TextCache[str] = TextCache(max_chars=1000)

    def fill(offset: int) -> None:
        for n in range(500):
            text = f"text {offset + n:05d}"
            cache.put(text, text.upper())
            assert cache.get(text) in (None, text.upper())

    threads = [threading.Thread(target=fill, args=(k * 1000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = cache.texts()
    assert sum(len(text) for text in kept) <= 1000 and len(kept) == 1000 // len("text 00000")
