"""Best-fit-decreasing packing ("Fewer Truncations Improve Language Modeling", Ding et al. 2024).

Only documents longer than a row are split (into row-sized chunks); chunks are placed longest
first into the open row with the least remaining space that still fits, else into a new row; the
space left over is padding. Ties go to the row opened first, so placement is deterministic.

Placing one chunk depends on every earlier placement, so this is the one sequential step of
packing: a loop over chunks with a sorted list of (remaining space, row) pairs, O(log R) search
per chunk (R open rows). Everything around it (splitting, sorting, building the rows) is
vectorized.
"""

from __future__ import annotations

import bisect

import numpy as np


def best_fit_decreasing(lengths: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Assign items (each ``<= capacity``) to rows: (row of each item, offset in its row, rows).

    Items are placed in decreasing length (ties by index); within a row, in placement order. An item
    longer than half a row opens a row of its own (every item before it is as long, one to a row, so no
    open row has its room): those are placed at once, the loop places the rest. An open row is one
    integer, its remaining space above its number's bits: integers sort as the (space, row) pairs do, and
    compare and move faster than tuples (1.2 µs an item instead of 1.7).
    """
    order = np.lexsort((np.arange(len(lengths)), -lengths))
    ordered = lengths[order].astype(np.int64)
    big = int(np.count_nonzero(2 * ordered > capacity))  # the first ``big`` in order: a row each
    shift = max(len(lengths), 1).bit_length()  # no run makes more rows than items
    row_bits = (1 << shift) - 1
    room = capacity - ordered[:big]
    open_rows = np.sort((room << shift | np.arange(big))[room > 0]).tolist()  # space << shift | row
    used = ordered[:big].tolist()
    rows, offsets = list(range(big)), [0] * big  # each item's, in order
    find, put, take = bisect.bisect_left, bisect.insort, open_rows.pop
    for length in ordered[big:].tolist():
        at = find(open_rows, length << shift)  # the least space that holds it, then the first row opened
        if at < len(open_rows):
            key = take(at)
            space, row = key >> shift, key & row_bits
        else:
            row, space = len(used), capacity
            used.append(0)
        rows.append(row)
        offsets.append(used[row])
        used[row] += length
        if space > length:
            put(open_rows, (space - length) << shift | row)
    row_of, offset_of = np.empty(len(lengths), np.int64), np.empty(len(lengths), np.int64)
    row_of[order], offset_of[order] = rows, offsets
    return row_of, offset_of, len(used)
