"""A chat store (``objcli tokenize --chat``): a row a record, its ids its rendered conversations' ids
one after another, and for each record the token counts of the conversations it renders to (one, or
one per assistant turn with ``--turns each``), its supervised spans as ranges of its ids, and why a
record renders nothing. What ``--objective chat`` gets from rendering and encoding, kept so that a
derived run does neither: it cuts, masks and packs the same tokens for any ``--seq-len``,
``--packing``, ``--loss-on`` and ``--overlong``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import msgspec
import numpy as np

from ..kernels.ragged import lengths_to_offsets
from ..objectives.base import DocumentBatch
from ..objectives.chat_parts import TurnParts
from ..objectives.conversations import RENDER_FAILURES
from ..objectives.supply import Provides
from ..rows import Ragged
from .base import Encoded, KindOption, StoredColumn, StoreKind, checked_failures, register


class _Chat(msgspec.Struct):
    """How a chat store rendered its records (its manifest's token_store.chat)."""

    messages_key: str
    chat_template: str | None
    template_date: str
    assistant_span: str
    turns: str
    bos: bool | None
    eos: bool | None


def _listed(name: str, doc: str) -> StoredColumn:
    return StoredColumn(name, "int32", np.int32, doc, True)


@register
class ChatStore(StoreKind):
    name = "conversations"
    holds = Provides.CONVERSATIONS
    label = "a chat store"
    what = "holds rendered conversations"
    serves = "for --objective chat; tokenize the text without --chat"
    prefix = "c_"
    columns_before = (
        (
            _listed("c_examples", "tokens of each conversation the record gives (one each with --turns each)"),
            _listed("c_first", "each supervised span's first token, in the record's ids"),
            _listed("c_last", "each supervised span's last token (inclusive)"),
            StoredColumn(
                "c_failed",
                "int8",
                np.int8,
                "0, or why the record renders no conversation (1 + an index into the reasons)",
                high=127,
            ),
        ),
    )
    # Each turn's parts (objectives/chat_parts.py), so a derived run chooses which carry loss (--assistant-parts).
    columns = (
        *columns_before[0],
        StoredColumn("c_answer", "int8", np.int8, "1 where the span's turn writes an answer", True, high=1),
        _listed("c_end", "each span's end of turn's first token (its last + 1 without one)"),
        _listed("c_part_span", "each part's span, among the record's"),
        StoredColumn("c_part_kind", "int8", np.int8, "each part's kind: 0 reasoning, 1 tool calls", True, high=1),
        _listed("c_part_first", "each part's first token, in the record's ids"),
        _listed("c_part_last", "each part's last token (inclusive)"),
    )
    option = KindOption(
        "chat",
        "Render each record with the chat template, as --objective chat does, and keep its ids and supervised spans: "
        "a chat store, for --objective chat at any --seq-len, --packing, --loss-on, --overlong.",
    )
    renders = "chat"
    section, section_type = "chat", _Chat
    rendering = ("messages_key", "chat_template", "template_date", "assistant_span", "turns")
    rendering_run = ("bos", "eos")

    def encode(self, texts: list, batch_index: int, encode, renderer) -> Encoded:
        encoded = renderer.encoded(DocumentBatch(texts, None, None, 0, batch_index, encode), parts=True)
        stored = StoredConversations.of(len(texts), encoded, RENDER_FAILURES)
        columns = {"c_examples": stored.examples, "c_first": stored.first, "c_last": stored.last}
        columns["c_failed"] = stored.failed
        columns |= dict(zip(PART_COLUMNS, stored.parts))
        return Encoded(encoded.tokens, stored.record_offsets(), columns, tuple(encoded.failed.values()))

    def read(self, metadata: dict, reasons: tuple[str, ...], path, record_tokens) -> dict:
        failed = checked_failures(metadata["c_failed"], reasons, path)
        lists = (metadata[name] for name in ("c_examples", "c_first", "c_last"))
        parts = tuple(metadata[name] for name in PART_COLUMNS) if PART_COLUMNS[0] in metadata else None
        return {"records": StoredConversations(*lists, failed, reasons, parts)}


PART_COLUMNS = ("c_answer", "c_end", "c_part_span", "c_part_kind", "c_part_first", "c_part_last")


@dataclass
class StoredConversations:
    examples: Ragged  # per record: the tokens of each conversation it gives
    first: Ragged  # per record: each supervised span's first token, in the record's ids
    last: Ragged  # its last token (inclusive)
    failed: np.ndarray  # int8 per record: 0, or 1 + the index in ``reasons`` of why it renders nothing
    reasons: tuple[str, ...]  # the store's names of the reasons (its manifest's ``render_failures``)
    parts: tuple[Ragged, ...] | None = None  # per record, PART_COLUMNS' lists (None: a store made before)

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
        spans = (Ragged(encoded.first - base, span_offsets), Ragged(encoded.last - base, span_offsets))
        found = encoded.parts if encoded.parts is not None else TurnParts.plain(encoded.last)
        parts = _stored_parts(found, span_record, span_offsets, base, records)
        return cls(examples, *spans, failed, reasons, parts)

    def _lists(self) -> list[Ragged]:
        return [self.examples, self.first, self.last, *(self.parts or ())]

    def _of_lists(self, lists: list[Ragged], failed: np.ndarray) -> StoredConversations:
        parts = tuple(lists[3:]) if self.parts is not None else None
        return StoredConversations(*lists[:3], failed, self.reasons, parts)

    def record_offsets(self) -> np.ndarray:
        """Each record's ids in the batch's: its conversations', one after another."""
        return lengths_to_offsets(self.examples.values)[self.examples.offsets]

    def slice(self, start: int, stop: int) -> StoredConversations:
        return self._of_lists([x.slice(start, stop) for x in self._lists()], self.failed[start:stop])

    def take(self, indices: np.ndarray) -> StoredConversations:
        return self._of_lists([x.take(indices) for x in self._lists()], self.failed[indices])

    @staticmethod
    def concat(parts: list[StoredConversations]) -> StoredConversations:
        if len({p.parts is None for p in parts}) > 1:  # shards of one store are of one era
            parts = [dataclasses.replace(p, parts=None) for p in parts]
        lists = [Ragged.concat(column) for column in zip(*(p._lists() for p in parts))]
        return parts[0]._of_lists(lists, np.concatenate([p.failed for p in parts]))

    def batch(self, offsets: np.ndarray) -> tuple:
        """What ``DocumentBatch.records`` holds for these records (``offsets``: each one's ids in
        the batch's): each conversation's token offsets and record, each span's conversation and first
        and last token, the records that render nothing (record -> reason), and the spans' parts."""
        example_offsets = lengths_to_offsets(self.examples.values)
        record = np.repeat(np.arange(len(self.failed), dtype=np.int64), np.diff(self.examples.offsets))
        base = np.repeat(np.asarray(offsets[:-1], np.int64), np.diff(self.first.offsets))
        first, last = self.first.values + base, self.last.values + base
        # A span lies in its conversation; of conversations starting at one token, the empty ones hold none.
        owner = np.searchsorted(example_offsets[:-1], first, side="right") - 1
        failed = {int(k): self.reasons[self.failed[k] - 1] for k in np.flatnonzero(self.failed).tolist()}
        return example_offsets, record, owner, first, last, failed, self._turn_parts(offsets)

    def _turn_parts(self, offsets: np.ndarray) -> TurnParts | None:
        if self.parts is None:
            return None
        answer, end, span, kind, part_first, part_last = self.parts
        span_base = np.repeat(self.first.offsets[:-1], np.diff(span.offsets))  # the record's first span
        part_base = np.repeat(np.asarray(offsets[:-1], np.int64), np.diff(span.offsets))
        end_base = np.repeat(np.asarray(offsets[:-1], np.int64), np.diff(end.offsets))
        firsts, lasts = part_first.values + part_base, part_last.values + part_base
        kinds = kind.values.astype(np.int8)
        return TurnParts(
            answer.values.astype(bool), end.values + end_base, span.values + span_base, kinds, firsts, lasts
        )


def _stored_parts(parts, span_record, span_offsets, base, records: int) -> tuple[Ragged, ...]:
    """The spans' parts (``TurnParts``, batch coordinates) as PART_COLUMNS' lists, per record."""
    part_record = span_record[parts.span]
    part_offsets = lengths_to_offsets(np.bincount(part_record, minlength=records))
    part_base = base[parts.span]
    return (
        Ragged(parts.answer.astype(np.int8), span_offsets),
        Ragged(parts.end - base, span_offsets),
        Ragged(parts.span - span_offsets[:-1][part_record], part_offsets),
        Ragged(parts.kind.astype(np.int8), part_offsets),
        Ragged(parts.first - part_base, part_offsets),
        Ragged(parts.last - part_base, part_offsets),
    )
