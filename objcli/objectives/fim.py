"""Fill-in-the-middle for code (REFERENCE §8), at document or context level.

``--fim-level document`` (default; only an offline tool can do it): with probability
``--fim-rate`` a document is cut at two character positions (code points, uniform in [0, len],
sorted), the three pieces are tokenized separately (one batched call for the whole batch) and laid
out as PSM or, with probability ``--fim-spm-rate``, SPM (``--spm-order starcoder`` or ``naive``);
then documents are packed by the run's packer (``concat``, ``best-fit`` or ``none``). ``--fim-split-token S``
splits each document at the text S first, transforms each fragment independently and joins them with S's
token.

``--fim-level context`` (Megatron-LM's behaviour): rows are packed first; each EOS-separated
segment of a row is decoded, transformed with probability ``--fim-rate`` and re-encoded, and the
row is truncated or padded (with the FIM pad token) back to ``--seq-len``. A segment whose tokens
do not survive decode/re-encode is left as plain CLM and counted.

Rows are causal-LM rows plus ``fim_modes``: one entry per segment (0 none, 1 psm, 2 spm; for a
document split at ``--fim-split-token``: 2 if any fragment is spm, else 1 if any is psm).
Randomness is keyed to (seed, partition, batch) per step: a document batch's first document at document
level, a batch of packed rows' first row at context level (as a plan's reader makes them again, on read);
no shared stream, so the output never depends on read order or on a resume (the flaw in Megatron's FIM).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels import PADDING_DOC
from ..kernels.fim import NONE, PSM, SPM, assemble, draw_cuts, first_units
from ..kernels.packing import first_of_segments, segments_and_positions
from ..kernels.ragged import gather_ranges, lengths_to_offsets
from ..options import Options, option
from ..rows import HIDDEN, POSITION_IDS, ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, document_examples, register
from .supply import Provides, Reads

TOKEN_PRESETS = {
    "starcoder": ("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>"),
    "codellama": ("<PRE>", "<SUF>", "<MID>", "<EOT>"),
}
LEVELS = ("document", "context")
SPM_ORDERS = ("starcoder", "naive")


def parse_fim_tokens(spec: str) -> tuple[str, str, str, str]:
    if spec in TOKEN_PRESETS:
        return TOKEN_PRESETS[spec]
    names = tuple(name.strip() for name in spec.split(","))
    if len(names) != 4 or not all(names):
        raise ObjcliError(f"--fim-tokens {spec}: a preset ({', '.join(TOKEN_PRESETS)}) or four names 'PRE,SUF,MID,PAD'")
    return names  # type: ignore[return-value]


@dataclass(frozen=True)
class FimOptions(Options):
    fim_rate: float = option(0.5, "Probability that a document (or segment) is transformed.", minimum=0, maximum=1)
    fim_spm_rate: float = option(0.5, "Probability of SPM rather than PSM.", minimum=0, maximum=1)
    spm_order: str = option(
        "starcoder",
        "starcoder: <PRE><SUF>suffix<MID>prefix middle; naive: <SUF>suffix<PRE>prefix<MID>middle.",
        choices=SPM_ORDERS,
    )
    fim_level: str = option(
        "document", "Transform documents before packing, or segments of packed rows (Megatron).", choices=LEVELS
    )
    fim_tokens: str = option("starcoder", "starcoder, codellama, or four names 'PRE,SUF,MID,PAD'.")
    fim_split_token: str | None = option(
        None, "Split documents at this text and transform fragments independently (file-level FIM)."
    )

    def __post_init__(self):
        super().__post_init__()
        if self.fim_split_token is not None and (not self.fim_split_token or self.fim_level == "context"):
            raise ObjcliError("--fim-split-token needs a non-empty separator and --fim-level document")
        parse_fim_tokens(self.fim_tokens)


@register("fim")
class FillInTheMiddle(Objective):
    options_type = FimOptions
    examples_are_documents = True
    row_step = True  # --fim-level context: after the packer
    supervision = "next-token"
    next_token_rows = True
    # Context level: rows packed as clm packs them, their segments rearranged by the row step (on read, in a
    # plan); re-encoding changes each row's padding, so a plan run makes its rows to count their tokens.
    plans_rows = True
    plan_counts_rows = True

    def plan_refusal(self) -> str | None:
        if self.options.fim_level == "document":
            return (
                "fim at --fim-level document cuts each text's characters before packing (it runs from text), so "
                "its rows are written, not planned"
            )
        return None

    warnings = {
        "fim_units_not_round_trip": (
            "fim: {count:,} transformed documents have pieces that do not survive decode(encode(piece)) with this "
            "tokenizer (it normalizes whitespace or adds a dummy prefix); for code, train one with "
            "'objcli train-tokenizer --preset code'"
        )
    }

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        o = self.options
        self.tokenizer = tokenizer
        self.bos_id = tokenizer.resolve("bos") if context.bos else None
        self.eos_id = tokenizer.resolve("eos")
        pre, suf, mid, pad = parse_fim_tokens(o.fim_tokens)
        self.sentinels = np.array(
            [
                tokenizer.resolve("fim_prefix", pre),
                tokenizer.resolve("fim_suffix", suf),
                tokenizer.resolve("fim_middle", mid),
            ],
            dtype=np.int32,
        )
        pads = context.pads_rows
        if pads and o.fim_level == "context":  # its one packer, concat, pads only with --remainder pad
            raise ObjcliError(
                "--remainder pad: FIM at --fim-level context rearranges whole rows cut from the stream "
                "and drops the partial last one; use --fim-level document, or leave --remainder out"
            )
        self.fim_pad_id = tokenizer.resolve("fim_pad", pad) if o.fim_level == "context" or pads else None
        self.pad_id = self.fim_pad_id if pads else None  # context level drops its remainder
        self.split_id = tokenizer.resolve("fim_split", o.fim_split_token) if o.fim_split_token else None
        self.vocab_size = tokenizer.total_vocab_size

    @classmethod
    def encodes_rows(cls, options) -> bool:
        return True  # each transformed unit's pieces are decoded and encoded again

    @classmethod
    def reads(cls, options) -> Reads:
        if options.fim_level == "document":  # it cuts each text's characters
            return Reads(Provides.TEXT, instead="--fim-level context, which works on tokens")
        return super().reads(options)

    @classmethod
    def keeps_remainder(cls, packing: str, options) -> str | None:
        # Context level rearranges whole rows cut from the stream (Megatron drops the partial last one).
        return None if options.fim_level == "context" else super().keeps_remainder(packing, options)

    provenance = "tokens"  # at context level; at document level "documents" (provenance_of)

    @classmethod
    def provenance_of(cls, options) -> str | None:
        """Document level: each example is one document, rearranged (its span: the whole document).
        Context level rearranges the segments of rows packed from the documents as clm packs them:
        a segment's span is the text it was packed from (what FIM's sentinels push past the row's end
        is cut, so a row may hold less of its last span's text)."""
        return "documents" if options.fim_level == "document" else "tokens"

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        # Context level transforms segments of rows cut from a stream, as Megatron does.
        return ("concat",) if options.fim_level == "context" else ("concat", "best-fit", "none")

    def _modes(self, kind: str) -> ColumnSpec:
        return ColumnSpec("fim_modes", kind, 0, 2, "0 none, 1 psm, 2 spm", role="per_segment")

    def example_columns(self) -> list[ColumnSpec]:
        ids = ColumnSpec("input_ids", "ragged", 0, self.vocab_size - 1, "token ids")
        return [ids] if self.options.fim_level == "context" else [ids, self._modes("scalar")]

    def columns(self, packed: list[ColumnSpec]) -> list[ColumnSpec]:
        return [*packed, self._modes("ragged")] if self.options.fim_level == "context" else packed

    def partition_examples(self, partition_index: int):
        return _FimPartition(self, partition_index)


class _FimPartition(PartitionExamples):
    def __init__(self, objective: FillInTheMiddle, partition: int):
        super().__init__(objective, partition)
        self.join_eos = objective.eos_id if objective.context.eos else None
        # The run's batched encode (``DocumentBatch.encode``); a plan's reader, which has no batches of
        # documents, encodes with the tokenizer itself (threads never change tokens).
        self.encode = objective.tokenizer.encode

    def _transform(self, texts: list[str], key: int, eligible=None, tokens=None, offsets=None):
        """FIM-transform a batch of units (documents, fragments or segments): (tokens, offsets, modes).

        Units outside ``eligible`` (a boolean mask) pass through unchanged. Without ``tokens``, the
        units are tokenized here, each text once, in one call: a plain unit whole, a transformed one
        as its prefix, middle and suffix. With them (segments of packed rows), only pieces are.
        """
        o = self.o.options
        count = len(texts)
        every_document = tokens is not None
        apply = self.rng(key, "apply").random(count) < o.fim_rate
        if eligible is not None:
            apply &= eligible
        spm = self.rng(key, "spm").random(count) < o.fim_spm_rate
        modes = np.where(apply, np.where(spm, SPM, PSM), NONE)
        chosen = np.flatnonzero(apply)
        lengths = np.fromiter((len(texts[i]) for i in chosen), dtype=np.int64, count=len(chosen))
        start, end = draw_cuts(self.rng(key, "cut"), lengths)
        pieces = [part for i, a, b in zip(chosen, start, end) for part in (texts[i][:a], texts[i][a:b], texts[i][b:])]
        if tokens is None:
            whole = [texts[i] for i in np.flatnonzero(~apply)]
            tokens, offsets = self.encode(whole + pieces)
        else:
            whole = texts
            piece_tokens, piece_offsets = self.encode(pieces)
            tokens = np.concatenate([tokens, piece_tokens])
            offsets = np.concatenate([offsets[:-1], piece_offsets + offsets[-1]])
        if len(pieces):
            self._count_lossy_pieces(pieces, tokens, offsets[len(whole) :])
        for mode, name in ((NONE, "none"), (PSM, "psm"), (SPM, "spm")):
            self.counters[f"fim {name}"] += int(np.sum(modes == mode))
        first = first_units(modes, every_document)
        out_tokens, out_offsets = assemble(tokens, offsets, modes, first, self.o.sentinels, o.spm_order)
        return out_tokens, out_offsets, modes

    def _count_lossy_pieces(self, pieces, piece_tokens, piece_offsets) -> None:
        """Count transformed units whose pieces do not decode back to their text (a tokenizer that
        normalizes whitespace or adds a dummy prefix damages code cut into pieces)."""
        decoded = self.o.tokenizer.decode_ranges(piece_tokens, piece_offsets)
        lossy = np.fromiter(map(str.__ne__, decoded, pieces), dtype=bool, count=len(pieces)).reshape(-1, 3).any(axis=1)
        self.counters["fim_units_not_round_trip"] += int(lossy.sum())

    def examples(self, batch: DocumentBatch) -> RowBatch:
        self.encode = batch.encode
        if self.o.options.fim_level == "context":
            return document_examples(batch, self.o.bos_id, self.join_eos)
        key = batch.first_document
        if self.o.split_id is None:
            tokens, offsets, modes = self._transform(batch.texts, key)
        else:
            tokens, offsets, modes = self._fragments(batch, key)
        transformed = DocumentBatch(batch.texts, tokens, offsets, batch.first_document, batch.batch_index)
        examples = document_examples(transformed, self.o.bos_id, self.join_eos)
        examples.columns["fim_modes"] = modes
        return examples

    def rows(self, rows: RowBatch | None) -> RowBatch | None:
        if self.o.options.fim_level != "context" or rows is None:
            return rows
        key = self.rows_done  # the rows packed before these: a plan's reader keys them alike
        self.rows_done += rows.num_rows
        return self._context(rows, key)

    def _fragments(self, batch: DocumentBatch, key: int):
        """Split documents at the separator text, transform fragments, join them with its token."""
        separator = self.o.options.fim_split_token
        per_document = [text.split(separator) for text in batch.texts]
        counts = np.fromiter(map(len, per_document), dtype=np.int64, count=len(per_document))
        fragments = [f for parts in per_document for f in parts]
        out_tokens, out_offsets, modes = self._transform(fragments, key)
        # Each fragment is followed by the separator, except the last of its document.
        last = np.zeros(len(fragments), dtype=bool)
        last[np.cumsum(counts) - 1] = True
        source = np.concatenate([out_tokens, np.array([self.o.split_id], dtype=out_tokens.dtype)])
        starts = np.stack([out_offsets[:-1], np.full(len(fragments), len(out_tokens))], axis=1)
        lengths = np.stack([np.diff(out_offsets), (~last).astype(np.int64)], axis=1)
        joined = gather_ranges(source, starts.ravel(), lengths.ravel())
        document_lengths = np.add.reduceat(lengths.sum(axis=1), np.concatenate([[0], np.cumsum(counts)[:-1]]))
        document_modes = np.maximum.reduceat(modes, np.concatenate([[0], np.cumsum(counts)[:-1]]))
        return joined, lengths_to_offsets(document_lengths), document_modes

    def _round_trip(self, unit_tokens, unit_offsets, unit_lengths):
        """(decoded texts, whether each unit re-encodes to the same tokens): what does not stays
        plain CLM."""
        texts = self.o.tokenizer.decode_ranges(unit_tokens, unit_offsets)
        again, again_offsets = self.encode(texts)
        same = np.diff(again_offsets) == unit_lengths
        # Among units of unchanged length, any differing token makes the unit differ.
        candidates = np.flatnonzero(same)
        differs = gather_ranges(again, again_offsets[candidates], unit_lengths[candidates]) != gather_ranges(
            unit_tokens, unit_offsets[candidates], unit_lengths[candidates]
        )
        owner = np.repeat(candidates, unit_lengths[candidates])
        same[np.unique(owner[differs])] = False
        return texts, same

    def _context(self, rows: RowBatch, key: int) -> RowBatch:
        """Megatron-style: transform each EOS-separated segment of packed rows, then refit the rows."""
        o, row_length, eos = self.o, self.o.context.row_length, self.o.eos_id
        ids = rows.columns["input_ids"]
        count = len(ids)
        unit_row, unit_tokens, unit_offsets, followed_by_eos = eos_units(ids.ravel(), row_length, eos)
        units, unit_lengths = len(unit_row), np.diff(unit_offsets)
        texts, same = self._round_trip(unit_tokens, unit_offsets, unit_lengths)
        self.counters["fim_segments_not_round_trip"] += int(np.sum(~same & (unit_lengths > 0)))
        out_tokens, out_offsets, modes = self._transform(
            texts, key, eligible=same & (unit_lengths > 0), tokens=unit_tokens, offsets=unit_offsets
        )
        # Rows again: each unit's output, then EOS where it had one; cut or pad to row_length.
        source = np.concatenate([out_tokens, np.array([eos], dtype=out_tokens.dtype)])
        starts = np.stack([out_offsets[:-1], np.full(units, len(out_tokens))], axis=1).ravel()
        lengths = np.stack([np.diff(out_offsets), followed_by_eos.astype(np.int64)], axis=1).ravel()
        tokens = gather_ranges(source, starts, lengths)
        unit_id = np.repeat(np.arange(units), lengths.reshape(units, 2).sum(axis=1))
        row_lengths = np.bincount(unit_row[unit_id], minlength=count)
        position = np.arange(len(tokens)) - np.repeat(lengths_to_offsets(row_lengths)[:-1], row_lengths)
        keep = position < row_length
        self.counters["fim_tokens_truncated"] += int(np.sum(~keep))
        out = np.full((count, row_length), o.fim_pad_id, dtype=np.int32)
        docs = np.full((count, row_length), PADDING_DOC, dtype=np.int64)
        row = unit_row[unit_id][keep]
        out[row, position[keep]] = tokens[keep]
        docs[row, position[keep]] = unit_id[keep]
        segment_ids, positions = segments_and_positions(docs)
        unit_modes = np.where(docs >= 0, modes[np.maximum(docs, 0)], 0)
        padding = np.sum(segment_ids == 0, axis=1)
        self.counters["fim_padding"] += int(padding.sum())
        columns = {
            "input_ids": out,
            "segment_ids": segment_ids,
            POSITION_IDS: positions,
            "fim_modes": Ragged(*first_of_segments(segment_ids, unit_modes.ravel())),
            **{name: column for name, column in rows.columns.items() if name.startswith(HIDDEN)},  # ride along
        }
        return RowBatch(columns, tokens=row_length - padding, padding=padding, documents=rows.documents)


def eos_units(flat: np.ndarray, row_length: int, eos: int):
    """Packed rows' EOS-separated units (the runs between EOS tokens within a row, possibly empty; each
    but the last of its row is followed by one EOS): each unit's row, the units' tokens without their
    EOS and their offsets, and whether an EOS follows each."""
    is_eos = flat == eos
    unit_start = np.zeros(len(flat), dtype=bool)
    unit_start[::row_length] = True
    unit_start[1:] |= is_eos[:-1] & (np.arange(1, len(flat)) % row_length != 0)
    unit_of_token = np.cumsum(unit_start) - 1
    units = int(unit_of_token[-1]) + 1
    unit_row = (np.flatnonzero(unit_start) // row_length).astype(np.int64)
    body = ~is_eos
    unit_offsets = lengths_to_offsets(np.bincount(unit_of_token[body], minlength=units))
    followed_by_eos = np.bincount(unit_of_token[is_eos], minlength=units) > 0
    return unit_row, flat[body], unit_offsets, followed_by_eos
