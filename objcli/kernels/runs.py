"""Integer rows as runs: a row plan (``formats/row_plan.py``) keeps each packed row's columns as runs of
values that stay the same or count up by one, a few a segment instead of one a token.

A run is (first value, step 0 or 1, length). Every row starts a run of its own, so a row decodes from
its own runs alone. A run ends where the next difference is neither 0 nor 1 or differs from the one
before: greedy enough to give one run per stretch of stored tokens, per segment number and per
position count, and decidable from neighbours alone (no loop over tokens).
"""

from __future__ import annotations

import numpy as np


def encode_runs(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs of flat ``values`` whose rows are cut at ``offsets``: (each run's first value int64, step
    int8, length int32, and each row's runs as offsets into them, int64, rows + 1)."""
    count = len(values)
    wide = values.astype(np.int64, copy=False)
    begins = np.zeros(count, dtype=bool)
    row_starts = offsets[:-1][offsets[:-1] < offsets[1:]]
    begins[row_starts] = True
    difference = np.diff(wide)
    begins[1:] |= (difference != 0) & (difference != 1)
    begins[2:] |= difference[1:] != difference[:-1]
    first = np.flatnonzero(begins)
    lengths = np.diff(np.append(first, count))
    steps = np.zeros(len(first), dtype=np.int8)
    longer = lengths > 1
    steps[longer] = difference[first[longer]]
    row_runs = np.searchsorted(first, offsets).astype(np.int64)
    return wide[first], steps, lengths.astype(np.int32), row_runs


def decode_runs(first: np.ndarray, steps: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The values the runs stand for, one after another (int64)."""
    lengths = lengths.astype(np.int64, copy=False)
    total = int(lengths.sum())
    starts = np.cumsum(lengths) - lengths
    within = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    return np.repeat(first, lengths) + np.repeat(steps.astype(np.int64), lengths) * within
