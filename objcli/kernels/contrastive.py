"""Contrastive pairs: views of text as token ranges, crops, token-level augmentations and negatives
drawn from other documents. Pure NumPy over whole batches; every random draw comes in as an argument
(uniform keys), so a per-example reference loop fed the same keys gives the same answer.

A *view* is up to two ranges of the batch's token array (two when a sentence is cut out of a
passage, as the Inverse Cloze Task does): ``(start_1, length_1, start_2, length_2)``.
"""

from __future__ import annotations

import numpy as np

from .ragged import gather_ranges, lengths_to_offsets


def crop(
    starts: np.ndarray,
    lengths: np.ndarray,
    ratio_keys: np.ndarray,
    position_keys: np.ndarray,
    min_ratio: float,
    max_ratio: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Contriever's ``randomcrop``: a span of ``int(n * ratio)`` tokens (at least one), ratio uniform in
    [min_ratio, max_ratio], at a uniform start. Returns (start, length) per view.

        n = 10, ratio 0.35 -> 3 tokens; start key 0.5 -> start 4 (of the 8 possible, 0..7)
    """
    ratio = min_ratio + (max_ratio - min_ratio) * ratio_keys
    length = np.clip((lengths * ratio).astype(np.int64), 1, np.maximum(lengths, 1))
    offset = np.minimum((position_keys * (lengths - length + 1)).astype(np.int64), lengths - length)
    return starts + np.maximum(offset, 0), np.minimum(length, lengths)


def other_documents(documents: np.ndarray, unit_documents: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each pair's document, one unit of a *different* document per key column, uniformly among
    the units of all other documents. ``unit_documents`` is sorted (units in document order); rows
    whose document owns every unit get -1."""
    first = np.searchsorted(unit_documents, documents, side="left")
    own = np.searchsorted(unit_documents, documents, side="right") - first
    others = len(unit_documents) - own
    pick = (keys * others[:, None]).astype(np.int64)
    pick = np.minimum(pick, np.maximum(others - 1, 0)[:, None])
    pick = pick + (pick >= first[:, None]) * own[:, None]  # skip over the document's own units
    return np.where(others[:, None] > 0, pick, -1)


def rank_within_groups(groups: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Each item's rank (0 for the smallest key) among the items of its group (non-negative ints).

    groups [0, 0, 1, 0], keys [0.5, 0.1, 0.7, 0.3] -> [2, 0, 0, 1]
    """
    order = np.lexsort((keys, groups))
    counts = np.bincount(groups) if len(groups) else np.zeros(0, dtype=np.int64)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - np.repeat(lengths_to_offsets(counts)[:-1], counts)
    return rank


def gather_views(tokens: np.ndarray, views: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flat tokens, offsets) of views given as rows ``(start_1, length_1, start_2, length_2)``."""
    starts = views[:, [0, 2]].reshape(-1)
    lengths = views[:, [1, 3]].reshape(-1)
    return gather_ranges(tokens, starts, lengths), lengths_to_offsets(views[:, 1] + views[:, 3])


def augment(
    values: np.ndarray, offsets: np.ndarray, keys: dict[str, np.ndarray], delete: float, swap: float, keep: float
) -> tuple[np.ndarray, np.ndarray]:
    """Token-level augmentations of ragged views, each view on its own draws, in this order:

    - ``keep`` < 1 (crop): a random contiguous span of max(1, int(n * keep)) tokens;
    - ``delete``: each token dropped with this probability (a view keeps at least its first token);
    - ``swap``: a token trades places with its right neighbour with this probability, unless its left
      neighbour already drew a swap with it (swaps never overlap).

    ``keys`` holds uniforms: ``crop_ratio``/``crop_start`` (one per view), ``delete`` and ``swap`` (one
    per token of the input)."""
    lengths = np.diff(offsets)
    if keep < 1:
        starts, kept = crop(offsets[:-1], lengths, np.ones(len(lengths)), keys["crop_start"], keep, keep)
        values = gather_ranges(values, starts, kept)
        offsets = lengths_to_offsets(kept)
        lengths = kept
    if delete > 0:
        survive = keys["delete"][: len(values)] >= delete
        kept = np.diff(np.concatenate([[0], np.cumsum(survive)])[offsets])  # survivors per view
        emptied = (kept == 0) & (lengths > 0)
        survive[offsets[:-1][emptied]] = True  # a view keeps at least its first token
        values = values[survive]
        lengths = kept + emptied
        offsets = lengths_to_offsets(lengths)
    if swap > 0 and len(values) > 1:
        drawn = keys["swap"][: len(values)] < swap
        drawn[offsets[1:][lengths > 0] - 1] = False  # the last token of a view has no right neighbour
        swaps = drawn.copy()
        swaps[1:] &= ~drawn[:-1]
        where = np.flatnonzero(swaps)
        values = values.copy()
        values[where], values[where + 1] = values[where + 1], values[where].copy()
    return values, offsets
