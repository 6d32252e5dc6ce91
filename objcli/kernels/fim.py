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


def assemble(
    doc_tokens: np.ndarray,
    doc_offsets: np.ndarray,
    modes: np.ndarray,
    piece_tokens: np.ndarray,
    piece_offsets: np.ndarray,
    sentinel_ids: np.ndarray,
    spm_order: str,
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, offsets) of every document, FIM-transformed where ``modes`` is PSM or SPM.

    ``piece_offsets`` holds prefix, middle, suffix of each transformed document in turn (in
    document order); ``sentinel_ids`` = [PRE, SUF, MID] ids.
    """
    documents = len(modes)
    piece_base = len(doc_tokens)
    special_base = piece_base + len(piece_tokens)
    source = np.concatenate([doc_tokens, piece_tokens, np.asarray(sentinel_ids, dtype=doc_tokens.dtype)])
    starts = np.zeros((documents, 6), dtype=np.int64)
    lengths = np.zeros((documents, 6), dtype=np.int64)
    plain = modes == NONE
    starts[plain, 0] = doc_offsets[:-1][plain]
    lengths[plain, 0] = np.diff(doc_offsets)[plain]
    transformed_index = np.cumsum(~plain) - 1  # rank among transformed documents
    for mode, layout in ((PSM, LAYOUTS["psm"]), (SPM, LAYOUTS[spm_order])):
        rows = np.flatnonzero(modes == mode)
        if not len(rows):
            continue
        first_piece = 3 * transformed_index[rows]
        for slot, (kind, which) in enumerate(layout):
            if kind == "special":
                starts[rows, slot] = special_base + which
                lengths[rows, slot] = 1
            else:
                piece = first_piece + which
                starts[rows, slot] = piece_base + piece_offsets[piece]
                lengths[rows, slot] = piece_offsets[piece + 1] - piece_offsets[piece]
    tokens = gather_ranges(source, starts.ravel(), lengths.ravel())
    return tokens, lengths_to_offsets(lengths.sum(axis=1))
