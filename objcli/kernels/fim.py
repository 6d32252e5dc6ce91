"""Fill-in-the-middle (REFERENCE §8), vectorized over a batch of documents.

A transformed document is cut at two character positions drawn uniformly from [0, len(text)]
(inclusive, sorted) into prefix / middle / suffix, each tokenized separately, and laid out as

    psm              <PRE> prefix <SUF> suffix <MID> middle
    spm (starcoder)  <PRE> <SUF> suffix <MID> prefix middle        prefix and middle stay contiguous
    spm (naive)      <SUF> suffix <PRE> prefix <MID> middle

Each output document is a list of six ranges (a special token is a range of length 1 in a small
table appended to the source), so the whole batch is assembled by one ragged gather.
"""

from __future__ import annotations

import numpy as np

from .ragged import gather_ranges, lengths_to_offsets

NONE, PSM, SPM = 0, 1, 2
PRE, SUF, MID = 0, 1, 2
# Slot templates: ("piece", k) is prefix (0) / middle (1) / suffix (2); ("special", s) a sentinel.
LAYOUTS = {
    "psm": [("special", PRE), ("piece", 0), ("special", SUF), ("piece", 2), ("special", MID), ("piece", 1)],
    "starcoder": [("special", PRE), ("special", SUF), ("piece", 2), ("special", MID), ("piece", 0), ("piece", 1)],
    "naive": [("special", SUF), ("piece", 2), ("special", PRE), ("piece", 0), ("special", MID), ("piece", 1)],
}


def draw_cuts(rng: np.random.Generator, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two positions uniform in [0, length] per document, sorted: (start, end) of the middle."""
    first = rng.integers(0, lengths + 1)
    second = rng.integers(0, lengths + 1)
    return np.minimum(first, second), np.maximum(first, second)


def first_units(modes: np.ndarray, every_document: bool) -> np.ndarray:
    """Each document's first unit, for ``assemble``, when the units are the plain documents' texts
    in order (or, with ``every_document``, all documents' texts) followed by the prefix, middle
    and suffix of each transformed document in order. modes [PSM, NONE, SPM] -> [1, 0, 4]."""
    plain = modes == NONE
    transformed_rank = np.cumsum(~plain) - 1
    if every_document:
        return np.where(plain, np.arange(len(modes)), len(modes) + 3 * transformed_rank)
    return np.where(plain, np.cumsum(plain) - 1, int(plain.sum()) + 3 * transformed_rank)


def assemble(
    tokens: np.ndarray,
    offsets: np.ndarray,
    modes: np.ndarray,
    first_unit: np.ndarray,
    sentinel_ids: np.ndarray,
    spm_order: str,
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, offsets) of every document, FIM-transformed where ``modes`` is PSM or SPM.

    ``tokens``/``offsets`` hold tokenized units in any order; ``first_unit[d]`` is the unit of
    document d's whole text when it stays plain, or of its prefix, followed by its middle and
    suffix units, when it is transformed. ``sentinel_ids`` = [PRE, SUF, MID] ids.
    """
    documents = len(modes)
    special_base = len(tokens)
    source = np.concatenate([tokens, np.asarray(sentinel_ids, dtype=tokens.dtype)])
    unit_lengths = np.diff(offsets)
    starts = np.zeros((documents, 6), dtype=np.int64)
    lengths = np.zeros((documents, 6), dtype=np.int64)
    plain = np.flatnonzero(modes == NONE)
    starts[plain, 0] = offsets[first_unit[plain]]
    lengths[plain, 0] = unit_lengths[first_unit[plain]]
    for mode, layout in ((PSM, LAYOUTS["psm"]), (SPM, LAYOUTS[spm_order])):
        rows = np.flatnonzero(modes == mode)
        for slot, (kind, which) in enumerate(layout):
            if kind == "special":
                starts[rows, slot] = special_base + which
                lengths[rows, slot] = 1
            else:
                unit = first_unit[rows] + which
                starts[rows, slot] = offsets[unit]
                lengths[rows, slot] = unit_lengths[unit]
    tokens = gather_ranges(source, starts.ravel(), lengths.ravel())
    return tokens, lengths_to_offsets(lengths.sum(axis=1))
