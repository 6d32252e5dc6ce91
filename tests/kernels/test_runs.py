"""Rows as runs (kernels/runs.py, a plan's encoding): decoding gives every value back, each row from its
own runs, and the runs are no more than a greedy loop's (tests/support/reference.py) plus one per
place where a run of one value meets a jump (the kernel decides from neighbours alone)."""

import numpy as np
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.kernels.ragged import lengths_to_offsets
from objcli.kernels.runs import decode_runs, encode_runs

values = st.lists(
    st.one_of(
        st.tuples(st.integers(-100, 2**31 - 1), st.sampled_from([0, 1]), st.integers(1, 40)),  # a stretch
        st.tuples(st.integers(-100, 2**31 - 1), st.just(7), st.integers(1, 3)),  # values that jump
    ),
    max_size=12,
)


def _row(stretches) -> list[int]:
    row = []
    for first, step, length in stretches:
        row += (
            [first + (step if step in (0, 1) else step * k) * k for k in range(length)]
            if step != 7
            else [first + 7 * k for k in range(length)]
        )
    return row


@settings(max_examples=300, deadline=None)
@given(st.lists(values, max_size=6))
def test_runs_give_every_row_back_and_few_runs(spec):
    rows = [_row(stretches) for stretches in spec]
    flat = np.array([v for row in rows for v in row], dtype=np.int64)
    offsets = lengths_to_offsets(np.array([len(r) for r in rows], dtype=np.int64))
    first, steps, lengths, row_runs = encode_runs(flat, offsets)
    assert np.array_equal(decode_runs(first, steps, lengths), flat)
    if not len(flat) or flat.max() < 2**31:  # a plan's values: decoded at int32, their sums wrapping alike
        narrow = decode_runs(first, steps, lengths, np.int32)
        assert narrow.dtype == np.int32 and np.array_equal(narrow, flat)
    assert set(steps.tolist()) <= {0, 1} and (lengths >= 1).all()
    greedy = reference.runs_reference(rows)
    for k, row in enumerate(rows):  # each row decodes from its own runs alone
        lo, hi = row_runs[k], row_runs[k + 1]
        assert decode_runs(first[lo:hi], steps[lo:hi], lengths[lo:hi]).tolist() == row
        assert len(greedy[k]) <= hi - lo <= 2 * len(greedy[k])


def test_a_worked_example():
    """Positions of two documents with EOS (id 2) between them, then padding: five runs."""
    row = [500, 501, 502, 2, 900, 901, 0, 0]
    first, steps, lengths, row_runs = encode_runs(np.array(row), np.array([0, 8]))
    assert list(zip(first.tolist(), steps.tolist(), lengths.tolist())) == [
        (500, 1, 3),
        (2, 0, 1),
        (900, 1, 2),
        (0, 0, 2),
    ]
    assert row_runs.tolist() == [0, 4]
