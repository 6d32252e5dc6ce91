"""Prefix LM splits (REFERENCE §6), vectorized over a batch of equal-length examples.

For tokens [a b c d e] split at k = 2:

    encoder-decoder   inputs  [a b EOS]          labels [c d e EOS]
    decoder-only      row     [a b c d e]        labels [-100 -100 c d e]   prefix length 2
"""

from __future__ import annotations

import numpy as np

from . import IGNORE
from .ragged import lengths_to_offsets


def draw_split_points(rng: np.random.Generator, rows: int, length: int) -> np.ndarray:
    """Split points uniform in [1, length - 1]: both parts are non-empty."""
    return rng.integers(1, length, size=rows, dtype=np.int64)


def split_encoder_decoder(
    tokens: np.ndarray, split: np.ndarray, eos_id: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(inputs values, inputs offsets, labels values, labels offsets): prefix + EOS, rest + EOS."""
    rows, length = tokens.shape
    extended = np.concatenate([tokens, np.full((rows, 1), eos_id, dtype=tokens.dtype)], axis=1)
    column = np.arange(length + 1)
    in_prefix = (column[None, :] < split[:, None]) | (column[None, :] == length)
    in_rest = column[None, :] >= split[:, None]  # the EOS column belongs to both
    return (
        extended[in_prefix],
        lengths_to_offsets(split + 1),
        extended[in_rest],
        lengths_to_offsets(length - split + 1),
    )


def decoder_labels(tokens: np.ndarray, split: np.ndarray) -> np.ndarray:
    """Labels equal to the tokens after the prefix and IGNORE on it (the model shifts them)."""
    column = np.arange(tokens.shape[1])
    return np.where(column[None, :] >= split[:, None], tokens, IGNORE).astype(np.int32)
