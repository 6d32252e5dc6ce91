"""The token stream of one partition, cut into examples by the objectives that chunk it.

Documents are joined (with BOS/EOS as configured, or with nothing, as T5 does) into one stream per
partition; objectives take examples off its front. The stream remembers which tokens start a
document, so every example can say how many documents start in it (shard accounting) and the
documents left in an unused tail can be counted as skipped.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..kernels.ragged import add_boundary_tokens
from .base import DocumentBatch


class TokenStream:
    def __init__(self, bos_id: int | None, eos_id: int | None, counters: Counter):
        self.bos_id, self.eos_id = bos_id, eos_id
        self.counters = counters
        self.tokens = np.zeros(0, dtype=np.int32)
        self.first = np.zeros(0, dtype=bool)  # True where a document starts
        self.doc_ids = np.zeros(0, dtype=np.int64)
        self.examples_taken = 0  # examples cut so far in this partition (keys randomness)
        # --provenance (run/provenance.Sources, set by the run): each token's place in its document
        # (BOS first), and the examples' source spans, recorded as examples are cut.
        self.sources = None
        self.places = np.zeros(0, dtype=np.int32)
        self.taken_places = self.places

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, batch: DocumentBatch) -> None:
        tokens, offsets = add_boundary_tokens(batch.tokens, batch.offsets, self.bos_id, self.eos_id)
        lengths = np.diff(offsets)
        empty = int(np.sum(lengths == 0))
        if empty:  # a document with no tokens and nothing added around it: nothing to write
            self.counters["skipped:no_tokens"] += empty
        first = np.zeros(len(tokens), dtype=bool)
        first[offsets[:-1][lengths > 0]] = True
        doc_ids = np.repeat(batch.first_document + np.arange(len(lengths), dtype=np.int64), lengths)
        self.tokens = np.concatenate([self.tokens, tokens])
        self.first = np.concatenate([self.first, first])
        self.doc_ids = np.concatenate([self.doc_ids, doc_ids])
        if self.sources is not None:
            places = np.arange(len(tokens), dtype=np.int32) - np.repeat(offsets[:-1], lengths).astype(np.int32)
            self.places = np.concatenate([self.places, places])

    def take(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Remove the first ``count`` tokens: (tokens, first-token flags, document ids)."""
        taken = self.tokens[:count], self.first[:count], self.doc_ids[:count]
        self.tokens, self.first, self.doc_ids = self.tokens[count:], self.first[count:], self.doc_ids[count:]
        self.taken_places, self.places = self.places[:count], self.places[count:]
        return taken

    def take_rows(self, rows: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """``rows`` examples of ``length`` tokens: ((rows, length) tokens, documents started per row)."""
        tokens, first, doc_ids = self.take(rows * length)
        self.count_split(first, doc_ids, length)
        self.examples_taken += rows
        return tokens.reshape(rows, length), first.reshape(rows, length).sum(axis=1)

    def count_split(self, first: np.ndarray, doc_ids: np.ndarray, length: int) -> None:
        """Documents that continue across an example boundary, each counted once."""
        self.count_split_at(first, doc_ids, np.arange(0, len(first), length))

    def count_split_at(self, first: np.ndarray, doc_ids: np.ndarray, starts: np.ndarray) -> None:
        """As ``count_split``, for examples starting at ``starts`` (of any lengths)."""
        if not len(first):
            return
        if self.sources is not None:
            self.sources.cut(self.examples_taken, doc_ids, self.taken_places, starts)
        continued = doc_ids[starts][~first[starts]]
        previous = getattr(self, "_last_split", -1)
        unique = np.unique(continued)
        unique = unique[unique != previous]
        if len(unique):
            self._last_split = int(unique[-1])
        self.counters["documents_split"] += len(unique)

    def drop_rest(self) -> None:
        """Give up the tail: its tokens are counted as dropped, documents wholly in it as skipped."""
        self.counters["tokens_dropped"] += len(self.tokens)
        self.counters["skipped:remainder_dropped"] += int(self.first.sum())
        self.take(len(self.tokens))
