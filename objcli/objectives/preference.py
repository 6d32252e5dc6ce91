"""Preference pairs for DPO (``--objective preference``) and reward models (``--objective reward``),
tokenized exactly as TRL 1.16's trainers tokenize them (``preference_tokens.py``), so a trainer reads
the rows with no tokenizer run.

- ``preference``, ``--packing none``: a row a pair, TRL's columns ``prompt_ids``, ``chosen_ids`` and
  ``rejected_ids`` (what ``DPOTrainer(...).train_dataset`` holds); a pair whose prompt reaches
  ``--seq-len`` is a counted skip (``prompt_too_long``), as TRL drops it.
- ``preference``, ``--packing best-fit``: each pair's prompt + chosen then prompt + rejected,
  adjacent in one row and never split (NeMo-Aligner's packed DPO layout), rows packed best-fit;
  ``segment_ids`` a segment per side (a pair is segments 2k-1 and 2k), ``position_ids`` restarting
  per side, ``labels`` -100 but on each side's completion (TRL's ``completion_mask``), and ``side``,
  per segment, 0 for chosen and 1 for rejected. A pair longer than a row is a counted skip
  (``pair_too_long``).
- ``reward``: ``chosen_ids`` and ``rejected_ids``, prompt and completion whole (what
  ``RewardTrainer(...).train_dataset`` holds); a pair with either side over ``--seq-len`` is a
  counted skip, as it drops it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..kernels import IGNORE
from ..kernels.packing import first_of_segments
from ..kernels.ragged import gather_ranges, lengths_to_offsets
from ..options import Options, option
from ..rows import DOCUMENT, ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, register
from .common import chat_template_option, template_date_option
from .conversations import template_for
from .preference_tokens import EncodedPairs, encode_pairs
from .supply import Provides, Reads

SIDES, SIDE_POSITIONS = "__sides", "__side_positions"  # per token, packed rows only: 0 chosen / 1 rejected


@dataclass(frozen=True)
class PreferenceOptions(Options):
    chat_template: str | None = chat_template_option()
    template_date: str = template_date_option()


class _PairsObjective(Objective):
    """What preference and reward share: the template, BOS and EOS texts, records read whole."""

    options_type = PreferenceOptions
    row_step = True  # packed pairs: a segment per side
    plans_rows = True  # a pair's sides cut from the store's renderings as TRL truncates them: tokens moved
    row_step_reads = SIDES, SIDE_POSITIONS
    seq_len_bounds = "each pair as TRL's max_length does, longer ones skipped"
    records_hint = (
        "check the chat template (--chat-template; conversational pairs need one) and the records' layout "
        "(prompt, chosen and rejected: all strings, or all lists of messages)"
    )
    default_eos = False  # TRL appends EOS text to plain completions itself; templates write their own ends
    boundaries = "pairs as the chat template writes them"
    provenance = "documents"  # a row (a pair) is one record: its span, the record
    supervision = "pairs"  # the loss compares a row's two completions (packed preference rows: labels)
    warnings = {
        "margins_not_kept": "{count:,} records carry a margin, not written: pass --margin (--objective reward)",
    }

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        self.segments_per_example = 2 if context.packed else 1  # packed: a segment a side
        self.tokenizer = tokenizer
        self.supervision = "labels" if context.packed else "pairs"
        try:
            self.template, variables = template_for(
                tokenizer, self.options.chat_template, self.options.template_date, self.name
            )
            self.template_file, self.no_template = Path(self.template.where), ""
        except ObjcliError as missing:  # plain-text pairs need none: a conversational record is a counted skip
            self.template, variables, self.template_file, self.no_template = None, {}, Path(), str(missing)
        bos = tokenizer.model_role_id("bos") if context.bos else None
        self.plain_bos = tokenizer.piece(bos) if bos is not None else ""
        eos = tokenizer.model_role_id("eos")
        self.eos_text = variables.get("eos_token") or (tokenizer.piece(eos) if eos is not None else "")
        self.pad_id = tokenizer.resolve("pad") if context.pads_rows else None
        self.vocab_size = tokenizer.total_vocab_size  # with the pad token, where it was added

    @classmethod
    def reads(cls, options) -> Reads:
        return Reads(Provides.PAIRS)

    def identity_files(self) -> dict[str, Path]:
        return {"chat template": self.template_file} if self.template_file.is_file() else {}

    def _ids(self, name: str, doc: str) -> ColumnSpec:
        return ColumnSpec(name, "ragged", 0, self.vocab_size - 1, doc, family=name)


class _PairsPartition(PartitionExamples):
    def encoded(self, batch: DocumentBatch) -> EncodedPairs:
        if batch.records is not None:  # a pair store's records: rendered and encoded already
            encoded = EncodedPairs(batch.tokens, *batch.records)
        else:
            encoded = encode_pairs(batch.texts, self.o, batch.encode)
        for k, reason in encoded.failed.items():
            self.counters[f"skipped:{reason}"] += 1
            self.note_skip(reason, batch, k)
        return encoded

    def skip(self, encoded: EncodedPairs, out: np.ndarray, reason: str, batch: DocumentBatch) -> None:
        self.counters[f"skipped:{reason}"] += int(out.sum())
        if out.any():
            self.note_skip(reason, batch, int(encoded.record[out][0]))

    def ragged(self, encoded: EncodedPairs, which: int, start=0) -> Ragged:
        starts, lengths = encoded.side(which, start)
        return Ragged(gather_ranges(encoded.tokens, starts, lengths), lengths_to_offsets(lengths))


@register("preference", "dpo")
class Preference(_PairsObjective):
    labels_are_inputs = True  # packed rows: each label the token at its position, or -100

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("none", "best-fit")  # concat would cut a pair across rows

    def example_columns(self) -> list[ColumnSpec]:
        if not self.context.packed:
            return [
                self._ids("prompt_ids", "the prompt, as TRL's DPOTrainer tokenizes it"),
                self._ids("chosen_ids", "the chosen completion"),
                self._ids("rejected_ids", "the rejected completion"),
            ]
        top = self.vocab_size - 1
        return [
            ColumnSpec("input_ids", "ragged", 0, top, "prompt + chosen, then prompt + rejected"),
            ColumnSpec("labels", "ragged", IGNORE, top, "the token on completions, else -100", role="labels"),
            ColumnSpec(SIDES, "ragged", 0, 1, "0 on the chosen side, 1 on the rejected", role="per_segment"),
            ColumnSpec(SIDE_POSITIONS, "ragged", 0, self.context.row_length - 1, "within its side", role="positions"),
        ]

    def columns(self, packed: list[ColumnSpec]) -> list[ColumnSpec]:
        if not self.context.packed:
            return packed
        side = ColumnSpec("side", "ragged", 0, 1, "per segment: 0 chosen, 1 rejected", role="pair_side")
        return [*packed, side]

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _PreferencePartition(self, partition_index)


class _PreferencePartition(_PairsPartition):
    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        encoded = self.encoded(batch)
        carried = int(np.count_nonzero(~np.isnan(encoded.margins)))
        if carried:
            self.counters["margins_not_kept"] += carried
        too_long = encoded.prompt >= self.o.context.seq_len  # TRL's filter: no completion token would be left
        self.skip(encoded, too_long, "prompt_too_long", batch)
        if self.o.context.packed:
            pair_lengths = encoded.lengths[:, 1] + encoded.lengths[:, 2]
            over = ~too_long & (pair_lengths > self.o.context.row_length)
            self.skip(encoded, over, "pair_too_long", batch)
            too_long |= over
        keep = np.flatnonzero(~too_long)
        if not len(keep):
            return None
        encoded = _take(encoded, keep)
        if self.o.context.packed:
            return _packed_examples(encoded)
        columns = {
            DOCUMENT: encoded.record,  # each row's record in the batch (--provenance)
            "prompt_ids": _prompt(encoded),
            "chosen_ids": self.ragged(encoded, 1, encoded.prompt),
            "rejected_ids": self.ragged(encoded, 2, encoded.prompt),
        }
        tokens = encoded.lengths[:, 1] + encoded.lengths[:, 2] - encoded.prompt
        return RowBatch(columns, tokens.astype(np.int64), np.zeros(len(keep), np.int64), np.ones(len(keep), np.int64))

    def rows(self, rows: RowBatch | None) -> RowBatch | None:
        """Packed rows: a segment per side, positions restarting per side, each segment's side."""
        if rows is None or not self.o.context.packed:
            return rows
        segments, sides = rows.columns["segment_ids"], rows.columns[SIDES]
        split = np.where(segments > 0, 2 * segments - 1 + sides, 0).astype(segments.dtype)
        columns = dict(rows.columns)
        columns["segment_ids"], columns["position_ids"] = split, rows.columns[SIDE_POSITIONS].astype(segments.dtype)
        columns["side"] = Ragged(*first_of_segments(split, sides))
        return RowBatch(columns, rows.tokens, rows.padding, rows.documents)


def _prompt(encoded: EncodedPairs) -> Ragged:
    lengths = encoded.prompt
    return Ragged(gather_ranges(encoded.tokens, encoded.starts[:, 0], lengths), lengths_to_offsets(lengths))


def _take(encoded: EncodedPairs, keep: np.ndarray) -> EncodedPairs:
    return EncodedPairs(
        encoded.tokens,
        encoded.starts[keep],
        encoded.lengths[keep],
        encoded.prompt[keep],
        encoded.record[keep],
        encoded.margins[keep],
        encoded.failed,
    )


def _packed_examples(encoded: EncodedPairs) -> RowBatch:
    """Each pair as one example: PC then PR, labels on the completions, each token's side and its
    position within the side."""
    starts = encoded.starts[:, 1:].ravel()
    lengths = encoded.lengths[:, 1:].ravel()
    ids = gather_ranges(encoded.tokens, starts, lengths)
    offsets = lengths_to_offsets(lengths)
    within = np.arange(len(ids), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    prompt = np.repeat(np.repeat(encoded.prompt, 2), lengths)
    labels = np.where(within >= prompt, ids, IGNORE).astype(np.int32)
    sides = np.repeat(np.tile(np.array([0, 1], np.int32), len(encoded.prompt)), lengths)
    pair_offsets = offsets[::2]
    pairs = len(encoded.prompt)
    columns = {
        DOCUMENT: encoded.record,  # each pair's record in the batch (--provenance)
        "input_ids": Ragged(ids, pair_offsets),
        "labels": Ragged(labels, pair_offsets),
        SIDES: Ragged(sides, pair_offsets),
        SIDE_POSITIONS: Ragged(within.astype(np.int32), pair_offsets),
    }
    return RowBatch(columns, np.diff(pair_offsets), np.zeros(pairs, np.int64), np.ones(pairs, np.int64))


@dataclass(frozen=True)
class RewardOptions(PreferenceOptions):
    margin: bool = option(
        False, "[reward] Write each record's margin field as RewardTrainer's margin (a record without one is skipped)."
    )


@register("reward")
class Reward(_PairsObjective):
    options_type = RewardOptions

    def example_columns(self) -> list[ColumnSpec]:
        margin = ColumnSpec("margin", "value", 0, 0, "the record's margin", role="data", value_type="float64")
        return [
            self._ids("chosen_ids", "prompt + chosen, as TRL's RewardTrainer tokenizes it"),
            self._ids("rejected_ids", "prompt + rejected"),
            *([margin] if self.options.margin else []),
        ]

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _RewardPartition(self, partition_index)


class _RewardPartition(_PairsPartition):
    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        encoded = self.encoded(batch)
        margins = ~np.isnan(encoded.margins)
        if not self.o.options.margin and margins.any():
            self.counters["margins_not_kept"] += int(margins.sum())
        over = np.max(encoded.lengths[:, 1:], axis=1, initial=0) > self.o.context.seq_len
        self.skip(encoded, over, "pair_too_long", batch)
        if self.o.options.margin:
            self.skip(encoded, ~over & ~margins, "missing_margin", batch)
            over |= ~margins
        keep = np.flatnonzero(~over)
        if not len(keep):
            return None
        encoded = _take(encoded, keep)
        columns = {
            DOCUMENT: encoded.record,
            "chosen_ids": self.ragged(encoded, 1),
            "rejected_ids": self.ragged(encoded, 2),
        }
        if self.o.options.margin:
            columns["margin"] = encoded.margins.astype(object)  # Python floats: a value column
        tokens = encoded.lengths[:, 1] + encoded.lengths[:, 2]
        return RowBatch(columns, tokens.astype(np.int64), np.zeros(len(keep), np.int64), np.ones(len(keep), np.int64))
