"""Cutting long texts at a byte-level BPE's split pattern (issue 62): one scan of each window by the
regular expression's own loop, each candidate checked on the characters just before it. The cuts are
exact (the pieces' tokens, joined, are the whole text's, by the stable library) on texts of every
shape: all one pre-token, all whitespace, mixed scripts, code, digits; and they are the places the
match-by-match reference finds (``_boundary_by_matches``, the earlier implementation), even with the
check and the lookahead shrunk to a few characters so that every text meets their edges."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from runs import SAMPLE

import objcli.tokenizers.cutting as cutting
from objcli.tokenizers import open_tokenizer

tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("regex")

TOKENIZER_JSON = SAMPLE / "llama-style" / "tokenizer.json"  # cl100k's split pattern

FRAGMENTS = st.one_of(
    st.sampled_from(["The quick", " brown fox", "'s", "'LL", " don't", "\n", "\n\n", "  ", "\t", " \n  \n"]),
    st.sampled_from(["def f(x):\n    return x  \n", "0123456789", "!!!", "...\n", " ))\n", "  # note  \n"]),
    st.sampled_from(["Привет мир", "مرحبا", "日本語のテキスト", "中文没有空格的文本", "🙂🙂", "e\u0301", "ＡＢＣ"]),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", " ", "\n", "7", "字", "=", "Z"]), st.integers(1, 120)),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
)
TEXTS = st.lists(FRAGMENTS, min_size=1, max_size=40).map("".join)


@pytest.fixture(scope="module")
def tokenizer():
    return open_tokenizer(TOKENIZER_JSON)


@pytest.fixture(scope="module")
def library():
    loaded = tokenizers.Tokenizer.from_file(str(TOKENIZER_JSON))
    loaded.encode_special_tokens = True
    return loaded


def _whole(library, text: str) -> list[int]:
    return library.encode(text, add_special_tokens=False).ids


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, limit=st.integers(8, 300))
def test_pieces_join_to_the_text_and_their_tokens_to_the_whole_texts(tokenizer, library, text, limit):
    pieces = list(tokenizer.exact_pieces(text, limit))
    assert "".join(pieces) == text and all(pieces[:-1])
    assert [t for piece in pieces for t in _whole(library, piece)] == _whole(library, text)


def _is_exact_cut(pattern, text: str, start: int, cut: int) -> bool:
    """The reference rule, match by match: ``cut`` starts a piece of the scan from ``start`` over the
    whole text, and the text before it, alone, splits into the same pieces."""
    spans = [m.span() for m in pattern.finditer(text, start)]
    before = [span for span in spans if span[0] < cut]
    return (
        (cut, cut) < max(spans)
        and any(a == cut for a, _ in spans)
        and before == [m.span() for m in pattern.finditer(text, start, cut)]
    )


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, limit=st.integers(8, 300))
def test_the_scan_finds_the_places_the_match_by_match_reference_finds(tokenizer, text, limit):
    start = 0
    while len(text) - start > limit:
        cut = tokenizer.boundary(text, start, limit)
        assert cut == tokenizer._boundary_by_matches(text, start, limit)
        if not cut:
            break
        start += cut


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, limit=st.integers(8, 300), check=st.integers(1, 40), lookahead=st.integers(1, 40))
# A run of blank lines past the window's end: the window's scan reads it short, so its pieces are
# checked again to the text's true end (found by this test on a fresh clone's run).
@example(text="The quickThe quick \n  \n", limit=9, check=1, lookahead=1)
def test_every_cut_is_exact_with_the_check_and_lookahead_at_a_few_characters(tokenizer, text, limit, check, lookahead):
    """Shrunk until pieces near the window's end are read short: a cut may then come earlier than the
    reference's, never at a place the reference rule refuses."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cutting, "CUT_CHECK_CHARS", check)
        patch.setattr(cutting, "CUT_LOOKAHEAD_CHARS", lookahead)
        start = 0
        while len(text) - start > limit:
            cut = tokenizer.boundary(text, start, limit)
            if not cut:
                break
            assert 0 < cut <= limit and _is_exact_cut(tokenizer.cut_pattern, text, start, start + cut)
            start += cut


@pytest.mark.parametrize(
    "text",
    [
        "a" * 5_000,  # all one pre-token: no place to cut, encoded whole
        " " * 5_000,  # all whitespace: one pre-token
        "line  \n\n \n" * 800,
        ("Mixed русский 日本語 العربية 123456 ;;; " * 200),
    ],
    ids=["one-pre-token", "whitespace", "blank-lines", "mixed-scripts"],
)
def test_worked_shapes_are_cut_exactly(tokenizer, library, text):
    pieces = list(tokenizer.exact_pieces(text, 1_000))
    assert "".join(pieces) == text
    assert [t for piece in pieces for t in _whole(library, piece)] == _whole(library, text)
    if len(set(text)) == 1:  # one pre-token (or a run and its last space): nowhere to cut
        assert pieces == [text]
    else:
        assert len(pieces) > 1


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, limit=st.integers(8, 300), back=st.integers(1, 80), check=st.integers(1, 40))
def test_a_scan_of_the_windows_end_alone_cuts_where_a_piece_starts(tokenizer, text, limit, back, check):
    """``--max-document-chars`` scans only the end of a window, from wherever that falls (inside a
    piece), and the pieces become documents of their own: each cut is within the limit, at a piece
    start of that scan, and exact wherever the scan's pieces fell in step with the text's (everywhere
    but inside a run the pattern splits by count, digits in threes, where the phase may differ)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cutting, "CUT_CHECK_CHARS", check)
        start = 0
        while len(text) - start > limit:
            origin = start + limit - back
            cut = tokenizer.boundary(text, start, limit, origin)
            if not cut:
                break
            scanned = [m.start() for m in tokenizer.cut_pattern.finditer(text, max(start, origin))]
            assert 0 < cut <= limit and start + cut in scanned
            in_step = start + cut in [m.start() for m in tokenizer.cut_pattern.finditer(text, start)]
            assert (
                _is_exact_cut(tokenizer.cut_pattern, text, start, start + cut)
                or not in_step
                or text[start + cut - 1 : start + cut + 1].isdigit()
            )
            start += cut


def test_a_ten_million_character_document_is_cut_by_reading_its_windows_end(tokenizer):
    """The scan's cost is its tail, not the window: the cut of a long document matches the one a
    whole-window scan makes."""
    line = "    return self.assertEqual(value, 'x')  # a line of code\n"
    text = line * (3_000_000 // len(line))
    limit = 1_000_000
    tail = tokenizer.boundary(text, 0, limit, limit - cutting.CUT_TAIL_CHARS)
    assert tail == tokenizer.boundary(text, 0, limit) and limit - len(line) < tail <= limit
    pieces = list(tokenizer.iter_pieces(text, limit))
    assert "".join(pieces) == text and all(len(p) <= limit for p in pieces) and len(pieces) in (3, 4)
