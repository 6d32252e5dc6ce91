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

    Items are placed in decreasing length (ties by index); within a row, in placement order.
    """
    order = np.lexsort((np.arange(len(lengths)), -lengths))
    row_of = np.empty(len(lengths), dtype=np.int64)
    offset_of = np.empty(len(lengths), dtype=np.int64)
    open_rows: list[tuple[int, int]] = []  # (remaining space, row), sorted
    used: list[int] = []
    for item, length in zip(order.tolist(), lengths[order].tolist()):
        at = bisect.bisect_left(open_rows, (length, -1))
        if at < len(open_rows):
            space, row = open_rows.pop(at)
        else:
            row, space = len(used), capacity
            used.append(0)
        row_of[item], offset_of[item] = row, used[row]
        used[row] += length
        if space - length > 0:
            bisect.insort(open_rows, (space - length, row))
    return row_of, offset_of, len(used)
