"""A store's token places (``--provenance``) kept as the exceptions to a prediction: each token's
characters in its document's text are, almost always, its piece's characters (a word mark a space), so a
store keeps the tokenizer's per-id table once and, per document, only the tokens whose length differs from
it or that start before the previous one's end (a text's first word mark, a character cut between two
byte-level tokens, a normalization). Exact both ways: ``places_of(fixes_of(...))`` gives the ends and
backs ``run/provenance.token_places`` measured, a few bytes a document instead of 5 a token."""

from __future__ import annotations

import numpy as np


def _lengths(ends: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each token's characters: its end less the previous token's (0 before a document's first)."""
    previous = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    counts = np.diff(offsets)
    previous[offsets[:-1][counts > 0]] = 0
    return ends.astype(np.int64) - previous


def fixes_of(tokens, offsets, ends, back, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(token index in its document, its characters, its back, per-document offsets into them) of the tokens
    whose places the table does not predict."""
    lengths = _lengths(np.asarray(ends), offsets)
    fixed = np.flatnonzero((lengths != table[tokens]) | (np.asarray(back) != 0))
    document = np.searchsorted(offsets, fixed, side="right") - 1
    fix_offsets = np.searchsorted(fixed, offsets).astype(np.int64)
    return (
        (fixed - offsets[document]).astype(np.int32),
        lengths[fixed].astype(np.int32),
        np.asarray(back)[fixed].astype(np.int8),
        fix_offsets,
    )


def places_of(tokens, offsets, table: np.ndarray, at, lengths, backs, fix_offsets) -> tuple[np.ndarray, np.ndarray]:
    """Each token's end (int32) and back (int8), from the table and a document's fixes (``fixes_of``)."""
    counts = np.diff(offsets)
    length = table[tokens].astype(np.int64)
    document = np.repeat(np.arange(len(counts)), np.diff(fix_offsets))
    where = offsets[:-1][document] + np.asarray(at, np.int64)
    length[where] = lengths
    running = np.cumsum(length)
    ends = running - np.repeat(np.concatenate([[0], running])[offsets[:-1]], counts)
    back = np.zeros(len(tokens), np.int8)
    back[where] = backs
    return ends.astype(np.int32), back
