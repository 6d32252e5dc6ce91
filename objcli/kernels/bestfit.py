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

    Items are placed in decreasing length (ties by index); within a row, in placement order. An open
    row is one integer, its remaining space above its number's bits: integers sort as the (space, row)
    pairs do, and compare and move faster than tuples (1.2 µs an item instead of 1.7).
    """
    order = np.lexsort((np.arange(len(lengths)), -lengths))
    row_of = [0] * len(lengths)
    offset_of = [0] * len(lengths)
    shift = max(len(lengths), 1).bit_length()  # no run makes more rows than items
    row_bits = (1 << shift) - 1
    open_rows: list[int] = []  # space << shift | row, ascending
    used: list[int] = []
    find, put, take = bisect.bisect_left, bisect.insort, open_rows.pop
    for item, length in zip(order.tolist(), lengths[order].tolist()):
        at = find(open_rows, length << shift)  # the least space that holds it, then the first row opened
        if at < len(open_rows):
            key = take(at)
            space, row = key >> shift, key & row_bits
        else:
            row, space = len(used), capacity
            used.append(0)
        row_of[item] = row
        offset_of[item] = used[row]
        used[row] += length
        if space > length:
            put(open_rows, (space - length) << shift | row)
    return np.array(row_of, dtype=np.int64), np.array(offset_of, dtype=np.int64), len(used)
