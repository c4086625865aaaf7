"""The codec: tolerant reading, canonical writing, classification (FORMAT, READ, DRIFT)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memspec.spec.codec import (
    DELIMITER,
    FileState,
    classify_bytes,
    decode,
    encode_entries,
    has_delimiter_line,
    is_delimiter_line,
    is_encodable,
    normalize_content,
    parse_text,
    read_back_problem,
    serialize,
    starts_with_bom,
    usage,
)


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("", []),
        ("   \n\n", []),
        ("a", ["a"]),
        ("a\n§\nb", ["a", "b"]),
        ("\ufeffa\n§\nb", ["a", "b"]),
        ("a\r\n§\r\nb\r\n", ["a", "b"]),
        ("a\r§\rb", ["a", "b"]),
        ("a\n\n  §  \n\nb\n", ["a", "b"]),
        ("a\n\t§\x0b\nb", ["a", "b"]),
        ("a\n§\n\n§\nb", ["a", "b"]),
        ("§\na", ["a"]),
        ("a §\nb", ["a §\nb"]),
        ("a\n§§\nb", ["a\n§§\nb"]),
        ("line one\nline two", ["line one\nline two"]),
        ("a\n§\na", ["a", "a"]),
    ],
)
def test_parse_text_is_tolerant(text: str, entries: list[str]) -> None:
    # READ: BOM, CRLF/CR, spaces and blank lines around delimiter lines are cosmetic.
    assert parse_text(text) == entries


def test_serialize_is_the_delimiter_join() -> None:
    assert serialize(["a", "b"]) == "a" + DELIMITER + "b"
    assert encode_entries([]) == b""
    assert usage(["a", "b"]) == 5
    assert usage(["é", "🙂"]) == 5  # code points, not bytes


def test_delimiter_lines() -> None:
    assert is_delimiter_line("§")
    assert is_delimiter_line("  §\t")
    assert not is_delimiter_line("a§")
    assert has_delimiter_line("x\r\n §\r\ny")
    assert not has_delimiter_line("x § y")


def test_normalize_and_encode() -> None:
    assert normalize_content("  a\r\nb\r  ") == "a\nb"
    assert normalize_content("\u3000x\u00a0") == "x"  # Unicode White_Space is stripped
    assert normalize_content("\u200bx\ufeff\x1c") == "\u200bx\ufeff\x1c"  # nothing else
    assert is_encodable("ok")
    assert not is_encodable("\ud800")
    assert decode(b"\xef\xbb\xbfa") == "\ufeffa"  # parse_text drops the BOM, once
    assert parse_text("\ufeff\ufeffa") == ["a"]  # READ-4: a stray BOM starts no entry
    assert decode(b"\xff") is None


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (None, "absent"),
        (b"", "canonical"),
        (b"a\n\xc2\xa7\nb", "canonical"),
        (b"a\n\xc2\xa7\nb\n", "cosmetic"),
        (b"\xef\xbb\xbfa", "cosmetic"),
        (b"\xff\xfe", "unreadable"),
        (b"x" * 11, "foreign"),
        (b"a\n\xc2\xa7\n" + b"y" * 11, "foreign"),
    ],
)
def test_classify_bytes(data: bytes | None, kind: str) -> None:
    state = classify_bytes(data, 10)
    assert state.kind == kind
    assert state.readable == (kind != "unreadable")


def test_over_limit_total_is_not_foreign() -> None:
    # LIMIT: a file over its limit with valid entries is readable state, not drift.
    state = classify_bytes(encode_entries(["x" * 8, "y" * 8]), 10)
    assert state == FileState("canonical", ("x" * 8, "y" * 8))


entry_text = (
    st.text(st.characters(codec="utf-8"), min_size=1)
    .map(normalize_content)
    .filter(lambda s: bool(s) and not has_delimiter_line(s) and not starts_with_bom(s))
)
"""Content a store accepts: a delimiter line and a leading U+FEFF are E_DELIMITER (ENTRY-3)."""


@given(st.lists(entry_text, max_size=6))
def test_round_trip(entries: list[str]) -> None:
    # FORMAT/I-RT: parse(serialize(entries)) == entries for every valid entry list.
    assert parse_text(serialize(entries)) == entries
    assert classify_bytes(encode_entries(entries), 10**6).kind == "canonical"


@given(st.lists(entry_text, min_size=1, max_size=4), st.sampled_from(["\r\n", "\r"]))
def test_line_end_conversion_is_cosmetic(entries: list[str], newline: str) -> None:
    data = ("\ufeff" + serialize(entries).replace("\n", newline) + newline).encode()
    assert parse_text(data.decode()) == entries


def test_reported_entries_against_the_file_blame_one_clause() -> None:
    assert read_back_problem(["a", "a"], ["a", "a"]) is None
    # held as given, CR LF kept: ENTRY-1's alone (FORMAT-5 holds for stored normalised content)
    kept = read_back_problem(["Shell: zsh\r\nEditor: vim"], ["Shell: zsh\nEditor: vim"])
    assert kept is not None and kept.clause == "ENTRY-1"
    lost = read_back_problem(["Fee: 5", "per unit"], ["Fee: 5 § per unit"])
    assert lost is not None and lost.clause == "FORMAT-5"
    assert read_back_problem(["a"], ["a", "a"]).clause == "FORMAT-5"  # type: ignore[union-attr]
