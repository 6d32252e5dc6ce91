"""A pair store (``objcli tokenize --preference``): a row a record, its ids its three renderings'
ids one after another (the prompt with the generation prompt, prompt + chosen, prompt + rejected),
and for each record their token counts, where both completions part from the prompt, its margin, and
why a record gives no pair. What ``--objective preference`` and ``reward`` get from rendering and
encoding (TRL's tokenization), kept so that a derived run does neither, for any ``--seq-len`` and
``--packing``."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from ..errors import ObjcliError
from ..kernels.ragged import lengths_to_offsets
from ..objectives.base import DocumentBatch
from ..objectives.conversations import RENDER_FAILURES
from ..objectives.supply import Provides
from ..rows import Ragged
from .base import Encoded, KindOption, StoredColumn, StoreKind, checked_failures, register


class _Pairs(msgspec.Struct):
    """How a pair store rendered its records (its manifest's token_store.pairs)."""

    chat_template: str | None
    template_date: str
    bos: bool | None


def _scalar(name: str, arrow: str, dtype, doc: str) -> StoredColumn:
    return StoredColumn(name, arrow, dtype, doc, low=-(2**31), high=2**31 - 1)


@register
class PairStore(StoreKind):
    name = "pairs"
    holds = Provides.PAIRS
    label = "a pair store"
    what = "holds rendered preference pairs"
    serves = "for --objective preference and reward; tokenize the text without --preference"
    prefix = "q_"
    columns = (
        StoredColumn(
            "q_lengths", "int32", np.int32, "tokens of the prompt, prompt + chosen and prompt + rejected", True
        ),
        _scalar("q_prompt", "int32", np.int32, "where both completions part from the prompt's ids"),
        _scalar("q_margin", "float64", np.float64, "the record's margin, NaN for none"),
        _scalar("q_failed", "int8", np.int8, "0, or why the record gives no pair (1 + an index into the reasons)"),
    )
    option = KindOption(
        "preference",
        "Render each preference record as --objective preference and reward do (TRL's tokenization), and keep its "
        "renderings' ids: a pair store, for either at any --seq-len and --packing.",
    )
    renders = "preference"
    section, section_type = "pairs", _Pairs
    rendering = ("chat_template", "template_date")  # TRL's rendering has no other option
    rendering_run = ("bos",)

    def encode(self, texts: list, batch_index: int, encode, renderer) -> Encoded:
        encoded = renderer.encoded(DocumentBatch(texts, None, None, 0, batch_index, encode))
        pairs = StoredPairs.of(len(texts), encoded, RENDER_FAILURES)
        lengths = Ragged(pairs.lengths.ravel(), np.arange(len(texts) + 1, dtype=np.int64) * 3)
        columns = {"q_lengths": lengths, "q_prompt": pairs.prompt, "q_margin": pairs.margin, "q_failed": pairs.failed}
        return Encoded(encoded.tokens, pairs.record_offsets(), columns, tuple(encoded.failed.values()))

    def read(self, metadata: dict, reasons: tuple[str, ...], path, record_tokens) -> dict:
        failed = checked_failures(metadata["q_failed"], reasons, path)
        lengths = metadata["q_lengths"]
        if not np.all(np.diff(lengths.offsets) == 3):
            raise ObjcliError(f"input {path}: a record's q_lengths are not its three renderings'; tokenize it again")
        triples = np.asarray(lengths.values, np.int64).reshape(-1, 3)
        prompt, margin = metadata["q_prompt"].astype(np.int64), metadata["q_margin"].astype(np.float64)
        pairs = StoredPairs(triples, prompt, margin, failed, reasons)
        problem = pairs.inconsistent(record_tokens)
        if problem:
            raise ObjcliError(f"input {path}: {problem} (the store was edited?); tokenize the records again")
        return {"records": pairs}


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
