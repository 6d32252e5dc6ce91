"""A batch's conversations as tokens (``chat.py``): what rendering and encoding give, and what a chat
store keeps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import IGNORE
from ..kernels.chat import truncation_ends
from ..kernels.example_runs import ExampleRuns, in_ranges
from ..kernels.ragged import gather_ranges, lengths_to_offsets
from ..rows import DOCUMENT, Ragged, RowBatch
from .chat_images import ImageTokens
from .chat_parts import TurnParts


@dataclass
class ConversationTokens:
    """A batch's conversations as tokens: what rendering and encoding give, and what a chat store keeps
    (its records' ids, so a derived run renders nothing)."""

    tokens: np.ndarray  # every example's ids, one after another
    offsets: np.ndarray  # each example's, len + 1
    record: np.ndarray  # each example's record in the batch
    owner: np.ndarray  # each supervised span's example (spans that map to no token are gone)
    first: np.ndarray  # its first token, in ``tokens``
    last: np.ndarray  # its last token (inclusive)
    failed: dict[int, str]  # record -> why it renders nothing (RENDER_FAILURES)
    parts: TurnParts | None = None  # the spans' parts (a chat store's, or found for --assistant-parts)
    images: ImageTokens | None = None  # --processor: each image's tokens and reference
    unlearned: np.ndarray | None = None  # --assistant-parts: tokens inside supervised spans that carry no loss

    @classmethod
    def empty(cls, failed: dict[int, str]) -> ConversationTokens:
        none = np.zeros(0, np.int64)
        return cls(np.zeros(0, np.int32), np.zeros(1, np.int64), none, none, none, none, failed)

    def fit(self, seq_len: int, truncate: bool) -> tuple[np.ndarray, np.ndarray]:
        """Each conversation's length in a row (0: none; cut after the last supervised span that fits, or
        dropped whole), and the supervised spans that stay in it."""
        lengths = np.diff(self.offsets)
        local_last = self.last - self.offsets[self.owner]  # within its conversation
        if truncate:
            keep_to = truncation_ends(lengths, self.owner, local_last, np.ones(len(self.owner), dtype=bool), seq_len)
        else:
            keep_to = np.where(lengths <= seq_len, lengths, 0)
        return keep_to, local_last < keep_to[self.owner]

    def runs(self, learned: np.ndarray | None, chosen: np.ndarray, new_lengths: np.ndarray, firsts) -> ExampleRuns:
        """The chosen examples as runs, each cut to its new length (a plan from lengths; ``firsts``: each
        one's first store position): its ids one run, its labels those of the ``learned`` spans (a mask of
        them; None: every token) and -100 between."""
        starts = self.offsets[:-1][chosen]
        lengths = new_lengths.astype(np.int64)
        ones = np.ones(len(chosen), np.int64)
        ids = (np.arange(len(chosen), dtype=np.int64), firsts.astype(np.int64), ones, lengths)
        labels = ids
        if learned is not None:
            spans = (np.searchsorted(chosen, self.owner[learned]), self.first[learned], self.last[learned] + 1)
            labels = in_ranges(lengths, starts, spans, firsts, IGNORE)
        columns = {"input_ids": ids, "labels": labels}
        return ExampleRuns(lengths, self._first_of_record(chosen), columns, records=self.record[chosen])

    def _first_of_record(self, chosen: np.ndarray) -> np.ndarray:
        """By chosen example: 1 where it is its record's first (a record is one document, counted there:
        --turns each writes several)."""
        first = np.ones(len(chosen), dtype=np.int64)
        first[1:] = self.record[chosen][1:] != self.record[chosen][:-1]
        return first

    def rows(self, labels: np.ndarray, chosen: np.ndarray, new_lengths: np.ndarray) -> RowBatch:
        """The chosen examples as rows, each cut to its new length, with their labels (and images)."""
        tokens, offsets, record = self.tokens, self.offsets, self.record
        ids = gather_ranges(tokens, offsets[:-1][chosen], new_lengths)
        new_offsets = lengths_to_offsets(new_lengths)
        columns = {
            "input_ids": Ragged(ids, new_offsets),
            "labels": Ragged(gather_ranges(labels, offsets[:-1][chosen], new_lengths), new_offsets),
            DOCUMENT: record[chosen].astype(np.int64),  # each example's record in the batch (--provenance)
        }
        if self.images is not None:
            images = self.images.of_rows(chosen, offsets[:-1][chosen], new_lengths)
            columns["images"], columns["image_spans"] = images
        return RowBatch(
            columns,
            tokens=new_lengths.astype(np.int64),
            padding=np.zeros(len(chosen), dtype=np.int64),
            documents=self._first_of_record(chosen),
        )
