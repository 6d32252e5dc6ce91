"""ELECTRA's first-segment walk (``kernels/pairs.electra_first_segment``) compiled with numba
(``nogil``, cached on disk): one pass per chunk over its sentences, where the NumPy twin steps
every chunk at once through each sentence column (a dozen array calls per column, 9 % of an electra
run's CPU). The same decisions, from the same lengths, targets and coins (tests/objectives/test_electra.py)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def first_segment(lengths, counts, first_target, coins):
    chunks, width = lengths.shape
    in_first = np.zeros((chunks, width), np.bool_)
    for chunk in range(chunks):
        first = 0
        second = 0
        target = first_target[chunk]
        for i in range(counts[chunk]):
            size = lengths[chunk, i]
            crossing = second == 0 and first < target and coins[chunk, i] < 0.5
            if first == 0 or first + size < target or crossing:
                in_first[chunk, i] = True
                first += size
            else:
                second += size
    return in_first
