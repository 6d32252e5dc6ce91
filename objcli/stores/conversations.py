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
    processor: str | None = None  # --processor: images expanded as the processor does (stores made before: none)
    media_dir: str | None = None


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
    columns_before += (
        (
            *columns_before[0],
            StoredColumn("c_answer", "int8", np.int8, "1 where the span's turn writes an answer", True, high=1),
            _listed("c_end", "each span's end of turn's first token (its last + 1 without one)"),
            _listed("c_part_span", "each part's span, among the record's"),
            StoredColumn("c_part_kind", "int8", np.int8, "each part's kind: 0 reasoning, 1 tool calls", True, high=1),
            _listed("c_part_first", "each part's first token, in the record's ids"),
            _listed("c_part_last", "each part's last token (inclusive)"),
        ),
    )
    # Each image (--processor): its image tokens in the record's ids and its reference, as UTF-8 bytes.
    columns = (
        *columns_before[1],
        _listed("c_image_first", "each image's first image token, in the record's ids"),
        _listed("c_image_end", "one past each image's last image token"),
        _listed("c_image_ref_bytes", "each image's reference's UTF-8 bytes"),
        StoredColumn("c_image_ref", "uint8", np.uint8, "the references' UTF-8 bytes one after another", True, high=255),
    )
    option = KindOption(
        "chat",
        "Render each record with the chat template, as --objective chat does, and keep its ids and supervised spans: "
        "a chat store, for --objective chat at any --seq-len, --packing, --loss-on, --overlong.",
    )
    renders = "chat"
    section, section_type = "chat", _Chat
    rendering = ("messages_key", "chat_template", "template_date", "assistant_span", "turns", "processor", "media_dir")
    rendering_run = ("bos", "eos")

    def encode(self, texts: list, batch_index: int, encode, renderer) -> Encoded:
        encoded = renderer.encoded(DocumentBatch(texts, None, None, 0, batch_index, encode), parts=True)
        stored = StoredConversations.of(len(texts), encoded, RENDER_FAILURES)
        columns = {"c_examples": stored.examples, "c_first": stored.first, "c_last": stored.last}
        columns["c_failed"] = stored.failed
        columns |= dict(zip(PART_COLUMNS, stored.parts))
        columns |= dict(zip(IMAGE_COLUMNS, stored.images))
        return Encoded(encoded.tokens, stored.record_offsets(), columns, tuple(encoded.failed.values()))

    def read(self, metadata: dict, reasons: tuple[str, ...], path, record_tokens) -> dict:
        failed = checked_failures(metadata["c_failed"], reasons, path)
        lists = (metadata[name] for name in ("c_examples", "c_first", "c_last"))
        parts = tuple(metadata[name] for name in PART_COLUMNS) if PART_COLUMNS[0] in metadata else None
        images = tuple(metadata[name] for name in IMAGE_COLUMNS) if IMAGE_COLUMNS[0] in metadata else None
        return {"records": StoredConversations(*lists, failed, reasons, parts, images)}


PART_COLUMNS = ("c_answer", "c_end", "c_part_span", "c_part_kind", "c_part_first", "c_part_last")
IMAGE_COLUMNS = ("c_image_first", "c_image_end", "c_image_ref_bytes", "c_image_ref")


@dataclass
class StoredConversations:
    examples: Ragged  # per record: the tokens of each conversation it gives
    first: Ragged  # per record: each supervised span's first token, in the record's ids
    last: Ragged  # its last token (inclusive)
    failed: np.ndarray  # int8 per record: 0, or 1 + the index in ``reasons`` of why it renders nothing
    reasons: tuple[str, ...]  # the store's names of the reasons (its manifest's ``render_failures``)
    parts: tuple[Ragged, ...] | None = None  # per record, PART_COLUMNS' lists (None: a store made before)
    images: tuple[Ragged, ...] | None = None  # per record, IMAGE_COLUMNS' lists (None: a store made before)

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
        images = _stored_images(encoded.images, encoded.record, encoded.offsets[examples.offsets], records)
        return cls(examples, *spans, failed, reasons, parts, images)

    def _lists(self) -> list[Ragged]:
        return [self.examples, self.first, self.last, *(self.parts or ()), *(self.images or ())]

    def _of_lists(self, lists: list[Ragged], failed: np.ndarray) -> StoredConversations:
        parts = tuple(lists[3:9]) if self.parts is not None else None
        images = tuple(lists[9:]) if self.images is not None else None
        return StoredConversations(*lists[:3], failed, self.reasons, parts, images)

    def record_offsets(self) -> np.ndarray:
        """Each record's ids in the batch's: its conversations', one after another."""
        return lengths_to_offsets(self.examples.values)[self.examples.offsets]

    def slice(self, start: int, stop: int) -> StoredConversations:
        return self._of_lists([x.slice(start, stop) for x in self._lists()], self.failed[start:stop])

    def take(self, indices: np.ndarray) -> StoredConversations:
        return self._of_lists([x.take(indices) for x in self._lists()], self.failed[indices])

    @staticmethod
    def concat(parts: list[StoredConversations]) -> StoredConversations:
        if len({(p.parts is None, p.images is None) for p in parts}) > 1:  # shards of one store are of one era
            parts = [dataclasses.replace(p, parts=None, images=None) for p in parts]
        lists = [Ragged.concat(column) for column in zip(*(p._lists() for p in parts))]
        return parts[0]._of_lists(lists, np.concatenate([p.failed for p in parts]))

    def batch(self, offsets: np.ndarray) -> tuple:
        """What ``DocumentBatch.records`` holds for these records (``offsets``: each one's ids in
        the batch's): each conversation's token offsets and record, each span's conversation and first
        and last token, the records that render nothing (record -> reason), the spans' parts, and the
        images (``ImageTokens``; None from a store made before them)."""
        example_offsets = lengths_to_offsets(self.examples.values)
        record = np.repeat(np.arange(len(self.failed), dtype=np.int64), np.diff(self.examples.offsets))
        base = np.repeat(np.asarray(offsets[:-1], np.int64), np.diff(self.first.offsets))
        first, last = self.first.values + base, self.last.values + base
        # A span lies in its conversation; of conversations starting at one token, the empty ones hold none.
        owner = np.searchsorted(example_offsets[:-1], first, side="right") - 1
        failed = {int(k): self.reasons[self.failed[k] - 1] for k in np.flatnonzero(self.failed).tolist()}
        images = _image_tokens(self.images, offsets, example_offsets)
        return example_offsets, record, owner, first, last, failed, self._turn_parts(offsets), images

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


def _stored_images(images, example_record, record_starts, records: int) -> tuple[Ragged, ...]:
    """The batch's images (``ImageTokens``, batch coordinates; None: no --processor) as IMAGE_COLUMNS'
    lists, per record (its first token ``record_starts``)."""
    if images is None or not len(images.owner):
        empty, none = lengths_to_offsets(np.zeros(records, np.int64)), np.zeros(0, np.int32)
        return (Ragged(none, empty), Ragged(none, empty), Ragged(none, empty), Ragged(none.astype(np.uint8), empty))
    record = example_record[images.owner]
    offsets = lengths_to_offsets(np.bincount(record, minlength=records))
    base = record_starts[record]
    encoded = [r.encode("utf-8") for r in images.references]
    lengths = np.array([len(b) for b in encoded], np.int64)
    ref_offsets = lengths_to_offsets(np.bincount(record, weights=lengths, minlength=records).astype(np.int64))
    return (
        Ragged((images.start - base).astype(np.int32), offsets),
        Ragged((images.end - base).astype(np.int32), offsets),
        Ragged(lengths.astype(np.int32), offsets),
        Ragged(np.frombuffer(b"".join(encoded), np.uint8).copy(), ref_offsets),
    )


def _image_tokens(images: tuple[Ragged, ...] | None, offsets: np.ndarray, example_offsets: np.ndarray):
    """A store's images in the batch's coordinates (``offsets``: each record's ids), as ``ImageTokens``."""
    if images is None:
        return None
    from ..objectives.chat_images import ImageTokens

    first, end, ref_bytes, refs = images
    base = np.repeat(np.asarray(offsets[:-1], np.int64), np.diff(first.offsets))
    start = first.values.astype(np.int64) + base
    owner = np.searchsorted(example_offsets[:-1], start, side="right") - 1
    bounds = lengths_to_offsets(ref_bytes.values.astype(np.int64))
    data = refs.values.tobytes()
    references = [data[a:b].decode("utf-8") for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    return ImageTokens(owner.astype(np.int64), start, end.values.astype(np.int64) + base, references)
