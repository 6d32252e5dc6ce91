"""``verify``'s check of packed preference pairs (columns with the ``pair_side`` role): every pair whole
and adjacent in its row (a chosen segment, then its rejected), both sides opening with the same
prompt, and the loss exactly on each side's completion, from its first supervised token to its end."""

from __future__ import annotations

import numpy as np

from ..formats import Column
from ..kernels import IGNORE
from ..kernels.ragged import gather_ranges


def check_pair_sides(tokens: Column, labels: Column, segments: Column, sides: Column) -> list[str]:
    rows = len(segments.offsets) - 1
    ids, targets, segment = (c.values.reshape(rows, -1) for c in (tokens, labels, segments))
    per_row = np.diff(sides.offsets)
    alternating = np.tile(np.array([0, 1]), len(sides.values) // 2)
    if np.any(per_row % 2) or not np.array_equal(sides.values, alternating):
        return ["side: a row's segments are not a chosen then a rejected side for every pair"]
    if not np.array_equal(segment.max(axis=1, initial=0), per_row):
        return ["side: a row holds another number of segments than its sides say"]
    real = segment.ravel() > 0
    key = (np.repeat(np.arange(rows), segment.shape[1]) * (segment.shape[1] + 1) + segment.ravel())[real]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, np.int64)
    lengths = np.diff(np.r_[starts, len(key)])
    if len(starts) != len(sides.values):
        return ["side: a pair's sides are not each one run of tokens"]
    supervised = targets.ravel()[real] != IGNORE
    within = np.arange(len(key)) - np.repeat(starts, lengths)
    prompt = (
        np.minimum.reduceat(np.where(supervised, within, np.repeat(lengths, lengths)), starts) if len(key) else within
    )
    if np.any(prompt >= lengths) or not np.array_equal(np.add.reduceat(supervised, starts), lengths - prompt):
        return ["labels: a side's loss is not exactly on its completion (its tokens after the prompt, to its end)"]
    chosen, rejected = starts[0::2], starts[1::2]
    same = prompt[0::2] == prompt[1::2]
    flat = ids.ravel()[real]
    if not same.all() or not np.array_equal(
        gather_ranges(flat, chosen, prompt[0::2]), gather_ranges(flat, rejected, prompt[1::2])
    ):
        return ["input_ids: a pair's two sides do not open with the same prompt"]
    return []
