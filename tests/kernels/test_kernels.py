"""Kernels against the reference loops in reference.py, on worked examples and with hypothesis."""

import numpy as np
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.kernels.packing import pack_concat, segments_and_positions
from objcli.kernels.ragged import add_boundary_tokens, distinct_sorted, lengths_to_offsets, split_long_items

docs_strategy = st.lists(st.lists(st.integers(0, 30_000), max_size=40), max_size=25)


def ragged(docs):
    tokens = np.array([t for d in docs for t in d], dtype=np.int32)
    return tokens, lengths_to_offsets(np.array([len(d) for d in docs], dtype=np.int64))


def unragged(tokens, offsets):
    return [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def test_glossary_example_from_packing_docstring():
    # Row of 6: the end of document 7 (2 tokens), all of document 8 (3 tokens), one pad.
    doc_ids = np.array([[7, 7, 8, 8, 8, -1]])
    segment_ids, positions = segments_and_positions(doc_ids)
    assert segment_ids.tolist() == [[1, 1, 2, 2, 2, 0]]
    assert positions.tolist() == [[0, 1, 0, 1, 2, 0]]


def test_add_boundary_tokens_worked_example():
    tokens, offsets = add_boundary_tokens(np.array([5, 6, 7]), np.array([0, 2, 3]), None, 2)
    assert tokens.tolist() == [5, 6, 2, 7, 2]
    assert offsets.tolist() == [0, 3, 5]


def test_token_id_zero_survives():
    tokens, offsets = add_boundary_tokens(np.array([0, 0, 0]), np.array([0, 1, 3]), 1, 2)
    assert tokens.tolist() == [1, 0, 2, 1, 0, 0, 2]


@given(docs_strategy, st.sampled_from([None, 1]), st.sampled_from([None, 2]))
def test_add_boundary_tokens_matches_reference(docs, bos, eos):
    tokens, offsets = add_boundary_tokens(*ragged(docs), bos, eos)
    assert unragged(tokens, offsets) == reference.add_boundary_tokens(docs, bos, eos)


@given(docs_strategy, st.integers(1, 17))
def test_split_long_items_matches_reference(docs, max_length):
    tokens, offsets = ragged(docs)
    new_offsets, source = split_long_items(offsets, max_length)
    expected = reference.split_long(docs, max_length)
    assert list(zip(source.tolist(), unragged(tokens, new_offsets))) == expected
    assert np.all(np.diff(new_offsets) <= max_length)


def _pack(docs, seq_len, pad_id=None, overlap=0):
    tokens, offsets = ragged(docs)
    first = np.zeros(len(tokens), dtype=bool)
    first[offsets[:-1][np.diff(offsets) > 0]] = True
    return pack_concat(tokens, first, seq_len, pad_id, overlap), tokens


@settings(max_examples=300)
@given(docs_strategy, st.integers(2, 50), st.sampled_from([None, 3]), st.sampled_from([0, 1]))
def test_pack_concat_matches_reference(docs, seq_len, pad_id, overlap):
    packed, tokens = _pack(docs, seq_len, pad_id, overlap)
    expected_rows, leftover = reference.pack_concat(docs, seq_len, pad_id, overlap)
    got = list(
        zip(
            packed.input_ids.tolist(),
            packed.segment_ids.tolist(),
            packed.positions.tolist(),
            packed.documents_started.tolist(),
        )
    )
    assert got == [tuple(r) for r in expected_rows]
    assert tokens[packed.consumed :].tolist() == leftover


@given(docs_strategy, st.integers(2, 50))
def test_pack_concat_properties(docs, seq_len):
    packed, tokens = _pack(docs, seq_len)
    # No row is longer than seq_len, and rows + remainder are exactly the stream.
    assert packed.input_ids.shape[1:] in ((seq_len,), ())
    assert np.concatenate([packed.input_ids.reshape(-1), tokens[packed.consumed :]]).tolist() == tokens.tolist()
    assert len(tokens) - packed.consumed < seq_len
    # Segment ids are 1-based and non-decreasing; positions count up from 0 within each segment.
    for segments, positions in zip(packed.segment_ids, packed.positions):
        assert segments[0] == 1 and np.all(np.diff(segments) >= 0)
        for segment in np.unique(segments):
            assert positions[segments == segment].tolist() == list(range(np.sum(segments == segment)))


@given(docs_strategy, st.integers(2, 50))
def test_overlapping_rows_label_every_token_once(docs, seq_len):
    """--row-tokens seq-len+1: rows of L + 1 sharing one token, so the (input, next token) pairs a
    trainer takes from the rows are the stream's own pairs, each exactly once."""
    packed, tokens = _pack(docs, seq_len + 1, overlap=1)
    rows = packed.input_ids
    pairs = [(a, b) for row in rows.tolist() for a, b in zip(row[:-1], row[1:])]
    covered = packed.consumed + (1 if len(rows) else 0)
    assert pairs == list(zip(tokens[: covered - 1].tolist(), tokens[1:covered].tolist()))
    assert len(tokens) - packed.consumed <= seq_len  # the rest: less than a row's worth of new labels
    assert np.array_equal(rows[1:, 0], rows[:-1, -1])


def test_overlapping_rows_worked_example():
    packed, _ = _pack([[10, 11, 12], [13, 14, 15, 16]], seq_len=3, pad_id=0, overlap=1)
    assert packed.input_ids.tolist() == [[10, 11, 12], [12, 13, 14], [14, 15, 16]]
    assert packed.segment_ids.tolist() == [[1, 1, 1], [1, 2, 2], [1, 1, 1]]
    assert packed.documents_started.tolist() == [1, 1, 0]
    assert packed.consumed == 6  # 16 stays: it was the last row's label, and no row needs it as input


def test_pack_concat_pads_the_tail():
    packed, _ = _pack([[10, 11, 12], [13, 14]], seq_len=4, pad_id=0)
    assert packed.input_ids.tolist() == [[10, 11, 12, 13], [14, 0, 0, 0]]
    assert packed.segment_ids.tolist() == [[1, 1, 1, 2], [1, 0, 0, 0]]
    assert packed.positions.tolist() == [[0, 1, 2, 0], [0, 0, 0, 0]]
    assert packed.documents_started.tolist() == [2, 0]
    assert packed.consumed == 5


@given(st.lists(st.integers(0, 9), max_size=30), st.data())
def test_per_token_references_equal_the_slicing_ones(tokens, data):
    """The per-token reference forms the bench compares kernels with say what the slicing ones say."""
    a = data.draw(st.integers(0, len(tokens)))
    b = data.draw(st.integers(a, len(tokens)))
    assert reference.prefix_split_per_token(tokens, a, 1) == reference.prefix_split(tokens, a, 1)
    for mode, order in ((1, "starcoder"), (2, "starcoder"), (2, "naive")):
        assert reference.fim_document_per_token(tokens, a, b, mode, order, 97, 98, 99) == reference.fim_document(
            tokens[:a], tokens[a:b], tokens[b:], mode, order, 97, 98, 99
        )


@given(st.lists(st.integers(-5, 5), max_size=50))
def test_distinct_sorted_is_each_value_once_in_order(values):
    array = np.sort(np.asarray(values, dtype=np.int64))
    got = distinct_sorted(array)
    assert got.tolist() == sorted(set(values)) and got.dtype == array.dtype
    if len(got):
        got[0] = 99  # its own array, never a view of the input
        assert 99 not in array
