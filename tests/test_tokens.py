"""o200k_base token counting from the shipped rank file, offline."""

from __future__ import annotations

import gzip

import pytest
import tiktoken.load
from tiktoken_ext import openai_public

from demarkus.errors import IntegrityError
from demarkus.tokens import O200K_SHA256, _ranks_from_gzip, count_tokens, encoder


def test_the_reference_sentence_is_ten_known_tokens() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    ids = [976, 4853, 19705, 68347, 65613, 1072, 290, 29082, 6446, 13]
    assert encoder().encode_ordinary(text) == ids
    assert count_tokens(text) == 10


@pytest.mark.parametrize(
    ("text", "count"),
    [("", 0), ("hello", 1), ("hello world", 2), ("  trailing   \n", 3)],
    ids=["empty", "one-word", "two-words", "whitespace-runs"],
)
def test_count_tokens_counts_o200k_tokens(text: str, count: int) -> None:
    assert count_tokens(text) == count


def test_special_token_text_is_counted_as_plain_text() -> None:
    text = "before <|endoftext|> after"
    ids = encoder().encode_ordinary(text)
    assert 199999 not in ids
    assert count_tokens(text) == len(ids) > 3
    assert encoder().decode(ids) == text


def test_the_encoder_is_built_once_with_tiktokens_o200k_parameters() -> None:
    enc = encoder()
    assert enc is encoder()
    assert enc.name == "o200k_base"
    assert enc.n_vocab == 200019
    assert enc.special_tokens_set == {"<|endoftext|>", "<|endofprompt|>"}


def test_building_the_encoder_leaves_tiktoken_downloader_in_place() -> None:
    encoder.cache_clear()
    encoder()
    assert openai_public.load_tiktoken_bpe is tiktoken.load.load_tiktoken_bpe


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (gzip.compress(b"dGVzdA== 0\n"), f"expected {O200K_SHA256}"),
        (b"not gzip at all", "not valid gzip"),
        (gzip.compress(b"x" * 100)[:-12], "not valid gzip"),
    ],
    ids=["wrong-content", "not-gzip", "truncated"],
)
def test_a_damaged_rank_file_is_refused_with_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(IntegrityError, match=message) as info:
        _ranks_from_gzip(data)
    assert "scripts/bootstrap" in str(info.value)
