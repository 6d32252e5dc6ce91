"""Multi-token prediction: how many of K heads have a target at each position of a packed row."""

from __future__ import annotations

import numpy as np


def heads_with_target(segment_ids: np.ndarray, row_offsets: np.ndarray, heads: int) -> np.ndarray:
    """For each token of rows given as flat ``segment_ids`` and ``row_offsets``: how many of the
    heads 1..K predict a token of the same segment (head k at position t predicts t + k), that is
    ``min(K, tokens after t in its segment within the row)``; 0 on padding (segment id 0).

    Head k trains where this value is >= k: a segment of n tokens gives n - k positions to head k.
    """
    count = len(segment_ids)
    if count == 0:
        return np.zeros(0, dtype=np.int32)
    last = np.zeros(count, dtype=bool)  # the last token of each run of one segment in one row
    last[:-1] = segment_ids[1:] != segment_ids[:-1]
    lengths = np.diff(row_offsets)
    last[row_offsets[1:][lengths > 0] - 1] = True
    run_ends = np.flatnonzero(last)
    index = np.arange(count)
    left = run_ends[np.searchsorted(run_ends, index)] - index
    left[segment_ids == 0] = 0
    return np.minimum(left, heads).astype(np.int32)
