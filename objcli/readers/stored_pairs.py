"""A pair store's records (``objcli tokenize --preference``): for each record, its three renderings'
token counts (the prompt with the generation prompt, prompt + chosen, prompt + rejected; its ids are
theirs, one after another), where both completions part from the prompt, its margin, and why a record
gives no pair. What ``--objective preference`` and ``reward`` get from rendering and encoding, kept so
that a derived run does neither, for any ``--seq-len`` and ``--packing``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.ragged import lengths_to_offsets


@dataclass
class StoredPairs:
    lengths: np.ndarray  # (records, 3) int64: P, PC and PR tokens (0 where the record gives no pair)
    prompt: np.ndarray  # int64 per record: where both completions part from P
    margin: np.ndarray  # float64 per record: its margin, NaN for none
    failed: np.ndarray  # int8 per record: 0, or 1 + the index in ``reasons`` of why it gives no pair
    reasons: tuple[str, ...]  # the store's names of the reasons (its manifest's ``render_failures``)

    @classmethod
    def of(cls, records: int, encoded, reasons: tuple[str, ...]) -> StoredPairs:
        """A batch's records from ``preference_tokens.EncodedPairs`` (its pairs in record order)."""
        lengths, prompt = np.zeros((records, 3), np.int64), np.zeros(records, np.int64)
        margin, failed = np.full(records, np.nan), np.zeros(records, np.int8)
        lengths[encoded.record], prompt[encoded.record] = encoded.lengths, encoded.prompt
        margin[encoded.record] = encoded.margins
        for record, reason in encoded.failed.items():
            failed[record] = 1 + reasons.index(reason)
        return cls(lengths, prompt, margin, failed, reasons)

    def inconsistent(self, record_tokens: np.ndarray) -> str:
        """What does not hold between these records and their ids (``record_tokens``: each one's count),
        or "": three non-negative lengths summing to the record's ids, none for a record that gives no
        pair, and the prompt's end within all three."""
        if np.any(self.lengths < 0) or not np.array_equal(self.lengths.sum(axis=1), record_tokens):
            return "its records' q_lengths do not add up to their ids"
        if np.any(self.lengths[self.failed != 0]):
            return "a record that gives no pair has ids"
        if np.any(self.prompt < 0) or np.any(self.prompt > self.lengths.min(axis=1, initial=1 << 62)):
            return "a record's q_prompt lies outside its renderings"
        return ""

    def record_offsets(self) -> np.ndarray:
        """Each record's ids in the batch's: its three renderings', one after another."""
        return lengths_to_offsets(self.lengths.sum(axis=1))

    def slice(self, start: int, stop: int) -> StoredPairs:
        columns = (c[start:stop] for c in (self.lengths, self.prompt, self.margin, self.failed))
        return StoredPairs(*columns, self.reasons)

    def take(self, indices: np.ndarray) -> StoredPairs:
        columns = (c[indices] for c in (self.lengths, self.prompt, self.margin, self.failed))
        return StoredPairs(*columns, self.reasons)

    @staticmethod
    def concat(parts: list[StoredPairs]) -> StoredPairs:
        names = ("lengths", "prompt", "margin", "failed")
        return StoredPairs(*(np.concatenate([getattr(p, n) for p in parts]) for n in names), parts[0].reasons)

    def batch(self, offsets: np.ndarray) -> tuple:
        """What ``DocumentBatch.records`` holds for these records (``offsets``: each one's ids in the
        batch's): ``EncodedPairs``' fields but its tokens."""
        record = np.flatnonzero(self.failed == 0)
        lengths = self.lengths[record]
        starts = np.asarray(offsets[:-1], np.int64)[record, None] + np.cumsum(lengths, axis=1) - lengths
        failed = {int(k): self.reasons[self.failed[k] - 1] for k in np.flatnonzero(self.failed).tolist()}
        return starts, lengths, self.prompt[record], record, self.margin[record], failed
