"""Examples as runs (kernels/example_runs.py, what a plan's packers work from): a conversation's labels as runs
inside and outside its learned ranges equal a token-by-token loop (tests/support/reference.py), whatever the
ranges' overlaps; a piece cut from the examples joined end to end decodes to that stretch of their tokens."""

import numpy as np
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.kernels.example_runs import ExampleRuns, in_ranges
from objcli.kernels.ragged import lengths_to_offsets
from objcli.kernels.runs import decode_runs

VOCABULARY = 1000


@st.composite
def examples_with_ranges(draw):
    """Examples at increasing places of a partition (gaps between them: examples cut short), and ranges
    inside them, in any order, overlapping or touching."""
    lengths = draw(st.lists(st.integers(1, 20), min_size=1, max_size=8))
    gaps = draw(st.lists(st.integers(0, 5), min_size=len(lengths), max_size=len(lengths)))
    starts = np.cumsum(np.array(lengths) + gaps) - lengths
    ranges = []
    for example, (start, length) in enumerate(zip(starts, lengths)):
        for _ in range(draw(st.integers(0, 3))):
            a = draw(st.integers(0, length - 1))
            ranges.append((example, start + a, start + draw(st.integers(a + 1, length))))
    ranges = draw(st.permutations(ranges))
    owner, first, stop = (np.array([r[k] for r in ranges], dtype=np.int64) for k in range(3))
    return np.array(lengths, np.int64), starts.astype(np.int64), (owner, first, stop)


@settings(max_examples=300, deadline=None)
@given(examples_with_ranges())
def test_labels_in_ranges_are_a_loops(case):
    lengths, starts, ranges = case
    firsts = VOCABULARY + np.random.default_rng(len(lengths)).permutation(100 * len(lengths))[: len(lengths)]
    example, first, steps, run_lengths = in_ranges(lengths, starts, ranges, firsts, -100)
    assert np.all(run_lengths > 0) and np.all(np.diff(example) >= 0)
    assert np.array_equal(np.bincount(example, weights=run_lengths, minlength=len(lengths)), lengths)
    decoded = decode_runs(first, steps, run_lengths)
    expected = reference.in_ranges_reference(lengths, starts, ranges, firsts.tolist(), -100)
    assert decoded.tolist() == [v for row in expected for v in row]


@settings(max_examples=200, deadline=None)
@given(
    documents=st.lists(st.integers(0, 12), min_size=1, max_size=6),
    bos=st.booleans(),
    eos=st.booleans(),
    cuts=st.lists(st.integers(1, 9), max_size=8),
    whole=st.booleans(),
)
def test_a_piece_cut_from_examples_is_their_tokens(documents, bos, eos, cuts, whole):
    """Pieces anywhere (or, ``whole``, at the examples' bounds too), with and without their examples given."""
    offsets = lengths_to_offsets(np.array(documents, dtype=np.int64))
    positions = VOCABULARY + np.arange(int(offsets[-1]), dtype=np.int64)
    examples = ExampleRuns.of_documents(
        VOCABULARY + offsets[:-1], np.diff(offsets), 1 if bos else None, 2 if eos else None
    )
    joined = [
        v
        for k in range(len(documents))
        for v in [1] * bos + positions[offsets[k] : offsets[k + 1]].tolist() + [2] * eos
    ]
    assert len(joined) == examples.lengths.sum()
    # Pieces one after another, in a shuffled order, as a packer places them.
    example_bounds = lengths_to_offsets(examples.lengths)
    bounds = np.clip(np.cumsum([0, *cuts]), 0, len(joined))
    bounds = np.unique(np.concatenate([bounds, example_bounds if whole else [len(joined)]]))
    starts, lengths = bounds[:-1], np.diff(bounds)
    order = np.random.default_rng(len(cuts)).permutation(len(starts))
    owners = np.searchsorted(example_bounds, starts, side="right") - 1  # the example each piece starts in
    piece, first, steps, run_lengths = examples.cut("input_ids", starts[order], lengths[order])
    assert np.all(np.diff(piece) >= 0) and np.all(steps[run_lengths == 1] == 0)
    decoded = decode_runs(first, steps, run_lengths).tolist()
    assert decoded == [v for k in order for v in joined[starts[k] : starts[k] + lengths[k]]]
    given_owners = examples.cut("input_ids", starts[order], lengths[order], owners[order])
    assert all(np.array_equal(a, b) for a, b in zip(given_owners, (piece, first, steps, run_lengths)))


@settings(max_examples=100, deadline=None)
@given(examples_with_ranges(), st.lists(st.integers(0, 8), max_size=4))
def test_examples_sliced_and_joined_again_are_the_examples(case, cuts):
    """What a plan run does with a partition's examples made at once: each batch's slice, joined by the planner."""
    lengths, starts, ranges = case
    firsts = VOCABULARY + 100 * np.arange(len(lengths))
    labels = in_ranges(lengths, starts, ranges, firsts, -100)
    examples = ExampleRuns(lengths, np.ones(len(lengths), np.int64), {"labels": labels})
    bounds = [0, *sorted(min(c, len(lengths)) for c in cuts), len(lengths)]
    joined = ExampleRuns.concat([examples.slice(a, b) for a, b in zip(bounds, bounds[1:])])
    assert np.array_equal(joined.lengths, lengths)
    assert all(np.array_equal(x, y) for x, y in zip(joined.columns["labels"], labels))
    documents = ExampleRuns.of_documents(firsts, lengths, 1, 2)
    again = ExampleRuns.concat([documents.slice(a, b) for a, b in zip(bounds, bounds[1:])])
    assert all(np.array_equal(x, y) for x, y in zip(again.columns["input_ids"], documents.columns["input_ids"]))
