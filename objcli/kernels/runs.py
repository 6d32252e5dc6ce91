"""Integer rows as runs: a row plan (``formats/row_plan.py``) keeps each packed row's columns as runs of
values that stay the same or count up by one, a few a segment instead of one a token.

A run is (first value, step 0 or 1, length). Every row starts a run of its own, so a row decodes from
its own runs alone. A run begins at a row's first value, at a value the one before cannot step to (a
difference other than 0 or 1), and where the step changes inside a run that did not just begin: one
run per stretch of stored tokens, per segment number and per position count, decided from neighbours
alone (no loop over tokens), at most twice a greedy loop's runs.
"""

from __future__ import annotations

import numpy as np


def encode_runs(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs of flat ``values`` whose rows are cut at ``offsets``: (each run's first value int64, step
    int8, length int32, and each row's runs as offsets into them, int64, rows + 1)."""
    count = len(values)
    # Differences in int32 where every one fits (a row's values span less than 2**31: a plan's always,
    # whose positions stop below 2**31 and whose smallest value is -100): half the memory traffic.
    narrow = values.dtype == np.int32 and (not count or int(values.max()) - int(values.min()) < 2**31)
    wide = values if narrow else values.astype(np.int64)
    forced = np.zeros(count, dtype=bool)  # a row's first value, or one the value before cannot step to
    row_starts = offsets[:-1][offsets[:-1] < offsets[1:]]
    forced[row_starts] = True
    difference = np.diff(wide)
    forced[1:] |= (difference != 0) & (difference != 1)
    begins = forced.copy()  # and where the step changes within a run that was not just begun
    begins[2:] |= ~forced[1:-1] & (difference[1:] != difference[:-1])
    first = np.flatnonzero(begins)
    lengths = np.diff(np.append(first, count))
    steps = np.zeros(len(first), dtype=np.int8)
    longer = lengths > 1
    steps[longer] = difference[first[longer]]
    row_runs = np.searchsorted(first, offsets).astype(np.int64)
    return wide[first].astype(np.int64), steps, lengths.astype(np.int32), row_runs


def decode_runs(first: np.ndarray, steps: np.ndarray, lengths: np.ndarray, dtype=np.int64) -> np.ndarray:
    """The values the runs stand for, one after another: value ``i`` of a run is ``first + step * i``,
    made as each run's base (its first value less its step times its place) repeated, plus its step
    repeated times the place (2-3x faster than a running sum, which NumPy does not vectorize). ``dtype``
    int32 where every value fits (a plan's): the bases and products wrap alike, so the values come out
    exact at half the memory traffic."""
    lengths = lengths.astype(np.int64, copy=False)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=dtype)
    if total >= 2**31:  # the places themselves need int64; the values are then cast as the sums would wrap
        return decode_runs(first, steps, lengths, np.int64).astype(dtype)
    places = np.arange(total, dtype=dtype)
    starts = np.cumsum(lengths) - lengths
    steps = steps.astype(np.int64)
    base = (first.astype(np.int64) - steps * starts).astype(dtype)  # int32: wrapped, as the sums are
    if not np.any(steps != 1):  # ids' runs over stored tokens: every one counts up
        return np.repeat(base, lengths) + places
    return np.repeat(base, lengths) + np.repeat(steps.astype(dtype), lengths) * places
