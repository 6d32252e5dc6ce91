"""A chat store's conversations (``objcli tokenize --chat``): for each record, the token counts of the
conversations it renders to (one, or one per assistant turn with ``--turns each``), its supervised spans
as ranges of its ids, and why a record renders nothing. What ``--objective chat`` gets from rendering
and encoding, kept so that a derived run does neither: it cuts, masks and packs the same tokens for any
``--seq-len``, ``--packing``, ``--loss-on`` and ``--overlong``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.ragged import lengths_to_offsets
from ..rows import Ragged


@dataclass
class StoredConversations:
    examples: Ragged  # per record: the tokens of each conversation it gives
    first: Ragged  # per record: each supervised span's first token, in the record's ids
    last: Ragged  # its last token (inclusive)
    failed: np.ndarray  # int8 per record: 0, or 1 + the index in ``reasons`` of why it renders nothing
    reasons: tuple[str, ...]  # the store's names of the reasons (its manifest's ``render_failures``)

    @classmethod
    def of(cls, records: int, encoded, reasons: tuple[str, ...]) -> StoredConversations:
        """A batch's records from the chat objective's ``ConversationTokens`` (its conversations in
        record order): a record's ids are its conversations' ids, one after another."""
        examples = Ragged(np.diff(encoded.offsets), lengths_to_offsets(np.bincount(encoded.record, minlength=records)))
        span_record = encoded.record[encoded.owner]
        base = encoded.offsets[examples.offsets][span_record]  # the record's first token
        span_offsets = lengths_to_offsets(np.bincount(span_record, minlength=records))
        failed = np.zeros(records, np.int8)
        for record, reason in encoded.failed.items():
            failed[record] = 1 + reasons.index(reason)
        return cls(
            examples,
            Ragged(encoded.first - base, span_offsets),
            Ragged(encoded.last - base, span_offsets),
            failed,
            reasons,
        )

    def record_offsets(self) -> np.ndarray:
        """Each record's ids in the batch's: its conversations', one after another."""
        return lengths_to_offsets(self.examples.values)[self.examples.offsets]

    def slice(self, start: int, stop: int) -> StoredConversations:
        lists = (self.examples.slice(start, stop), self.first.slice(start, stop), self.last.slice(start, stop))
        return StoredConversations(*lists, self.failed[start:stop], self.reasons)

    def take(self, indices: np.ndarray) -> StoredConversations:
        lists = (self.examples.take(indices), self.first.take(indices), self.last.take(indices))
        return StoredConversations(*lists, self.failed[indices], self.reasons)

    @staticmethod
    def concat(parts: list[StoredConversations]) -> StoredConversations:
        lists = (Ragged.concat([getattr(p, name) for p in parts]) for name in ("examples", "first", "last"))
        return StoredConversations(*lists, np.concatenate([p.failed for p in parts]), parts[0].reasons)

    def batch(self, offsets: np.ndarray) -> tuple:
        """What ``DocumentBatch.records`` holds for these records (``offsets``: each one's ids in
        the batch's): each conversation's token offsets and record, each span's conversation and first
        and last token, and the records that render nothing (record -> reason)."""
        example_offsets = lengths_to_offsets(self.examples.values)
        record = np.repeat(np.arange(len(self.failed), dtype=np.int64), np.diff(self.examples.offsets))
        base = np.repeat(np.asarray(offsets[:-1], np.int64), np.diff(self.first.offsets))
        first, last = self.first.values + base, self.last.values + base
        # A span lies in its conversation; of conversations starting at one token, the empty ones hold none.
        owner = np.searchsorted(example_offsets[:-1], first, side="right") - 1
        failed = {int(k): self.reasons[self.failed[k] - 1] for k in np.flatnonzero(self.failed).tolist()}
        return example_offsets, record, owner, first, last, failed
