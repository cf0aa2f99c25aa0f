"""The wire codec: framing, limits, statuses and mark:// URLs."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from demarkus.errors import BadRequestError, ConflictError, NotFoundError
from demarkus.protocol import (
    MAX_BODY,
    MAX_METADATA,
    MAX_REQUEST_LINE,
    MAX_ROW_ETAGS_BYTES,
    Request,
    Response,
    Status,
    Verb,
    canonical_url,
    encode_request,
    encode_response,
    encode_row_etags,
    error_response,
    parse_informative,
    parse_informative_words,
    parse_mark_url,
    parse_request,
    parse_response,
    parse_row_etags,
    resolve_reference,
    validate_publisher_metadata,
)

keys = st.from_regex(r"[a-z0-9][a-z0-9-]{0,15}", fullmatch=True)
values = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x85\u2028\u2029"),
    max_size=40,
).filter(lambda v: all(ord(c) >= 32 or c == "\t" for c in v) and "\x7f" not in v)
paths = st.lists(
    st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True).filter(lambda s: s not in (".", "..")),
    min_size=1,
    max_size=4,
).map(lambda parts: "/" + "/".join(parts))


@given(
    verb=st.sampled_from(list(Verb)),
    path=paths,
    metadata=st.dictionaries(keys, values, max_size=6),
    body=st.binary(max_size=300),
)
def test_request_round_trips_through_the_codec(verb, path, metadata, body):
    request = Request(verb, path, metadata, body)
    assert parse_request(encode_request(request)) == request


@given(
    status=st.sampled_from(list(Status)),
    metadata=st.dictionaries(keys.filter(lambda k: k != "status"), values, max_size=6),
    body=st.binary(max_size=300),
)
def test_response_round_trips_through_the_codec(status, metadata, body):
    response = Response(status.value, metadata, body)
    assert parse_response(encode_response(response)) == response


@given(metadata=st.dictionaries(keys, values, max_size=8))
def test_encoded_metadata_reads_back_the_same_with_any_yaml_reader(metadata):
    import yaml

    from demarkus.protocol import encode_metadata, parse_metadata

    text = encode_metadata(metadata)
    assert parse_metadata(text) == metadata
    assert (yaml.load(text, Loader=yaml.CBaseLoader) or {}) == metadata


def test_metadata_values_stay_strings():
    request = parse_request(b"PUBLISH /a.md\n---\nimportance: 010\nflag: yes\nempty: ''\n---\nbody")
    assert request.metadata == {"importance": "010", "flag": "yes", "empty": ""}
    assert request.body == b"body"


def test_response_keys_are_sorted_and_numbers_quoted():
    raw = encode_response(Response("ok", {"matches": "2", "match": "body"}))
    assert raw == b'---\nmatch: body\nmatches: "2"\nstatus: ok\n---\n'


def test_body_that_looks_like_frontmatter_survives():
    request = Request(Verb.PUBLISH, "/a.md", {}, b"---\ntitle: x\n---\n# Body\n")
    decoded = parse_request(encode_request(request))
    assert decoded.body == request.body


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"FETCH /a.md", "must end with a newline"),
        (b"FETCH\n", "VERB /path"),
        (b"GRAB /a.md\n", "unknown verb `GRAB`"),
        (b"fetch /a.md\n", "unknown verb"),
        (b"FETCH a.md\n", "must start with `/`"),
        (b"FETCH /a\x01b.md\n", "control character"),
        (b"FETCH /a\x7f.md\n", "control character"),
        (b"FETCH /\xff\xfe.md\n", "not valid UTF-8"),
        (b"FETCH /" + b"a" * MAX_REQUEST_LINE + b"\n", "at most 4096"),
        (b"FETCH /" + b"a" * MAX_REQUEST_LINE, "exceeds 4096"),
        (b"PUBLISH /a.md\n---\ntitle: x\n", "never closed"),
        (b"PUBLISH /a.md\n---\n- a\n- b\n---\n", "map of `key: value`"),
        (b"PUBLISH /a.md\n---\nx: [1, 2]\n---\n", "plain string"),
        (b"PUBLISH /a.md\n---\nx: {a: b}\n---\n", "plain string"),
        (b"PUBLISH /a.md\n---\nx: 'unterminated\n---\n", "not valid YAML"),
        (b"PUBLISH /a.md\n---\nt: \xff\n---\n", "not valid UTF-8"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_malformed_requests_are_bad_requests_that_say_what_is_wrong(data, fragment):
    with pytest.raises(BadRequestError) as caught:
        parse_request(data)
    assert fragment in str(caught.value)


def test_oversized_metadata_and_body_are_refused():
    big_meta = b"PUBLISH /a.md\n---\nk: " + b"v" * MAX_METADATA + b"\n---\n"
    with pytest.raises(BadRequestError, match="metadata block"):
        parse_request(big_meta)
    with pytest.raises(BadRequestError, match="1 MiB"):
        parse_request(b"PUBLISH /a.md\n" + b"x" * (MAX_BODY + 1))
    assert parse_request(b"PUBLISH /a.md\n" + b"x" * MAX_BODY).body == b"x" * MAX_BODY


def test_dot_dot_segments_are_not_found_before_anything_else():
    with pytest.raises(NotFoundError):
        parse_request(b"FETCH /docs/../secret.md\n")


@pytest.mark.parametrize(
    "metadata, fragment",
    [
        ({"version": "3"}, "reserved"),
        ({"etag": "x"}, "reserved"),
        ({"Title": "x"}, "malformed"),
        ({"rel:supersedes": "/a.md"}, "malformed"),
        ({"title": "a\nb"}, "line break"),
        ({"title": "a\rb"}, "line break"),
        ({"title": "a\x00b"}, "control character"),
        ({"title": "a\x1fb"}, "control character"),
        ({"title": "a\x7fb"}, "control character"),
        ({f"k{i}": "v" for i in range(51)}, "at most 50"),
        ({"title": "x" * 1100}, "at most 1024 bytes"),
    ],
    ids=[
        "reserved-version",
        "reserved-etag",
        "uppercase",
        "colon",
        "lf",
        "cr",
        "nul",
        "unit-separator",
        "delete",
        "too-many",
        "too-big",
    ],
)
def test_publisher_metadata_rules(metadata, fragment):
    with pytest.raises(BadRequestError) as caught:
        validate_publisher_metadata(metadata)
    assert fragment in str(caught.value)


def test_error_response_has_a_title_and_a_paragraph():
    response = error_response("not-found", "No document at /x.md; use LIST.")
    assert response.body == b"\n# Not found\n\nNo document at /x.md; use LIST.\n"


def test_raise_for_status_maps_conflict_back_with_versions():
    response = error_response("conflict", "stale", {"your-version": "3", "server-version": "5"})
    with pytest.raises(ConflictError) as caught:
        response.raise_for_status()
    assert (caught.value.your_version, caught.value.server_version) == (3, 5)
    assert str(caught.value) == "stale"


@pytest.mark.parametrize(
    "url, authority, path",
    [
        ("mark://Example.org/a.md", "mark://example.org", "/a.md"),
        ("mark://example.org:6309/a.md", "mark://example.org", "/a.md"),
        ("mark://example.org:6310", "mark://example.org:6310", "/"),
        ("mark://[::1]:7000/x", "mark://[::1]:7000", "/x"),
    ],
)
def test_mark_urls_have_an_authority_without_the_default_port(url, authority, path):
    parsed = parse_mark_url(url)
    assert (parsed.authority, parsed.path) == (authority, path)


@pytest.mark.parametrize("url", ["http://x/a.md", "mark:///a.md", "mark://h:99999/a"])
def test_bad_mark_urls_are_refused(url):
    with pytest.raises(BadRequestError):
        parse_mark_url(url)


@pytest.mark.parametrize(
    "base, reference, expected",
    [
        ("/peps/pep-1.md", "pep-2.md", "/peps/pep-2.md"),
        ("/a/b/c.md", "../d.md", "/a/d.md"),
        ("/a/b.md", "/x.md#sec", "/x.md#sec"),
        ("mark://h/a/b.md", "c.md", "mark://h/a/c.md"),
        ("/a.md", "mark://Other:6309/x.md", "mark://other/x.md"),
        ("/a.md", "https://example.org/x", "https://example.org/x"),
    ],
)
def test_references_resolve_like_links(base, reference, expected):
    assert resolve_reference(base, reference) == expected


def test_canonical_url_drops_the_default_port_only():
    assert canonical_url("mark://h:6309/a") == "mark://h/a"
    assert canonical_url("mark://h:6310/a") == "mark://h:6310/a"
    assert canonical_url("https://h:6309/a") == "https://h:6309/a"


@pytest.mark.parametrize(
    "request_, fragment",
    [
        (Request(Verb.PUBLISH, "/a.md", {}, b"x" * (MAX_BODY + 1)), "1 MiB"),
        (Request(Verb.PUBLISH, "/a.md", {"k": "v" * (64 * 1024)}, b"x"), "metadata"),
    ],
    ids=["body", "metadata"],
)
def test_a_request_over_the_limits_is_refused_before_a_byte_is_sent(request_, fragment):
    with pytest.raises(BadRequestError, match=fragment):
        encode_request(request_)


def test_row_etags_round_trip_in_row_order() -> None:
    etags = {"/b.md": "e" * 64, "/a b/ü.md": "f" * 64}
    text = encode_row_etags(etags)
    assert "\n" not in text
    assert list(parse_row_etags(text).items()) == list(etags.items())


def test_row_etags_keep_whole_pairs_within_their_bound() -> None:
    etags = {f"/{'d' * 900}/{i}.md": "e" * 64 for i in range(40)}
    text = encode_row_etags(etags)
    kept = parse_row_etags(text)
    assert len(text.encode()) <= MAX_ROW_ETAGS_BYTES
    assert 0 < len(kept) < 40
    assert list(kept) == list(etags)[: len(kept)]  # the first rows' documents


@pytest.mark.parametrize("value", [None, "", "not json", "[1, 2]", '"x"', '{"/a.md": 3}'])
def test_a_missing_or_malformed_row_etags_names_nothing(value: str | None) -> None:
    assert parse_row_etags(value) == {}


def test_informative_reads_held_over_asked() -> None:
    assert parse_informative("1/8") == (1, 8)
    assert parse_informative("0/0") == (0, 0)


@pytest.mark.parametrize("value", [None, "", "3", "9/8", "-1/8", "1/x", "1/8/2", " 1/8", "1/" + "9" * 5000, "١/٨"])
def test_a_missing_or_malformed_informative_is_none(value: str | None) -> None:
    assert parse_informative(value) is None


def test_informative_words_are_read_as_the_words_sent() -> None:
    assert parse_informative_words("eip 2930 zürich") == frozenset({"eip", "2930", "zürich"})


@pytest.mark.parametrize(
    "value",
    [None, "", " ", "eip  2930", "Eip", "snake_case", "a-b", "eip\t2930", "x" * 65, " ".join(["w"] * 65), "eip,2930"],
)
def test_missing_or_malformed_informative_words_are_none(value: str | None) -> None:
    assert parse_informative_words(value) is None  # then every query word counts
