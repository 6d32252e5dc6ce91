"""UL2 mixture of denoisers (REFERENCE §7), chosen per example with configurable rates.

Each denoiser computes its own raw length, so rows stay exact-length: in the encoder-decoder layout
every row has ``input_ids`` of exactly ``--seq-len`` (mode token included) and ``labels`` of the
denoiser's computed targets length. Span denoisers (R, X) are T5 span corruption with their
(mean span, noise density); the S denoiser is a prefix LM over a raw example of L tokens (the
longest whose inputs can fill the row: seq_len - mode tokens in encdec, seq_len - mode - 2 in
decoder) split at k drawn uniformly in [round((1 - 2r)(L - 1)), L - 1], as T5's
``random_prefix_noise_mask`` generalised by public UL2 re-implementations (r = 0.5 is T5's uniform
[1, L - 1]); on average a fraction r of the example is target. Its encdec inputs are padded with the
pad token after their EOS (mask them by id, as T5 does); its targets vary in length.

Decoder layout: one row ``mode + inputs + targets`` (the encoder-decoder parts back to back),
padded to ``--seq-len``; ``labels`` = -100 except on the targets; ``prefix_lengths`` = the length
of ``mode + inputs``, over which attention is bidirectional.

A ``denoiser`` column holds each row's index into the table recorded in the manifest
(``config.objective_options.denoisers``); the observed counts are in the partition counters.
The tail of a partition too short for the next example is dropped (counted). Unpacked (``--packing none``),
the denoising is the row step: the objective cuts each row's raw chunk and draws its denoiser (and an S
denoiser's split: the row's counts), the step draws the spans over each batch keyed to the rows before it, so
a plan keeps a run a chunk and its reader draws the same (``formats/row_plan.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ObjcliError
from ..kernels import IGNORE
from ..kernels.ragged import lengths_to_offsets, range_indices
from ..kernels.spans import corrupt_spans, example_lengths, random_spans, span_counts
from ..options import Options, option
from ..rows import ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, register
from .common import extra_ids_option, layout_option, raw_lengths_or_fail
from .stream import TokenStream
from .ul2_denoisers import Budget, Denoiser, load_mixture, prefix_budget, span_decoder_budget

MODE_TOKENS = ("text", "special", "none")


@dataclass(frozen=True)
class Ul2Options(Options):
    mixture: str = option("ul2", "Preset (ul2, ul2-3, ul2r) or a TOML file of [[denoiser]] tables.")
    mode_tokens: str = option("text", "[NLU]/[NLG]/[S2S] as text, one special id each, or none.", choices=MODE_TOKENS)
    layout: str = layout_option("encdec")
    extra_ids: int | None = extra_ids_option()
    denoisers: tuple[Denoiser, ...] = field(default=(), compare=False)

    def __post_init__(self):
        super().__post_init__()
        denoisers = self.denoisers or load_mixture(self.mixture)
        if sum(d.rate for d in denoisers) <= 0:
            raise ObjcliError(f"--mixture {self.mixture}: the rates sum to zero")
        if len({d.name for d in denoisers}) != len(denoisers):
            raise ObjcliError(f"--mixture {self.mixture}: denoiser names must be unique")
        object.__setattr__(self, "denoisers", tuple(denoisers))


@register("ul2")
class Ul2(Objective):
    options_type = Ul2Options
    default_eos = False  # as T5 span corruption
    plans_rows = True  # each denoiser draws from lengths; tokens moved, mode and sentinel ids put between them
    row_step = True  # unpacked: the denoisers' draws over each packed batch of raw chunks
    holds_gil = True  # a batch's work is many array calls a denoiser
    provenance = "stream"  # examples cut from the token stream (stream.py)

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        o = self.options
        self.eos_id = tokenizer.resolve("eos")
        self.join_bos = tokenizer.resolve("bos") if context.bos else None
        self.join_eos = self.eos_id if context.eos else None
        # Decoder rows are padded; so are encdec inputs of an S denoiser, whose split varies.
        pads = o.layout == "decoder" or context.pads_rows or any(d.kind == "prefix" for d in o.denoisers)
        self.pad_id = tokenizer.resolve("pad") if pads else None
        self.denoisers = o.denoisers
        rates = np.array([d.rate for d in self.denoisers], dtype=np.float64)
        self.rates = rates / rates.sum()
        self.budgets = [self._budget(d, self._mode_ids(d, tokenizer)) for d in self.denoisers]
        needed = max(
            [
                span_counts(p.raw, d.noise_density, d.mean_span)[1]
                for d, p in zip(self.denoisers, self.budgets)
                if d.kind == "span"
            ],
            default=0,
        )
        self.sentinels = np.array(tokenizer.resolve_sentinels(needed, o.extra_ids) if needed else [], dtype=np.int32)
        self.vocab_size = tokenizer.total_vocab_size

    def _mode_ids(self, d: Denoiser, tokenizer) -> np.ndarray:
        if self.options.mode_tokens == "none" or not d.mode:
            return np.zeros(0, dtype=np.int32)
        if self.options.mode_tokens == "special":
            return np.array([tokenizer.resolve(f"mode {d.mode}", d.mode)], dtype=np.int32)
        return tokenizer.encode([d.mode])[0]

    def _budget(self, d: Denoiser, mode: np.ndarray) -> Budget:
        seq_len, m = self.context.seq_len, len(mode)
        if self.options.layout == "encdec":
            if d.kind == "span":
                raw, targets = raw_lengths_or_fail(
                    seq_len - m, d.noise_density, d.mean_span, f"--seq-len minus the {d.name} mode token,"
                )
                return Budget(raw, seq_len - m, targets, mode)
            return prefix_budget(seq_len - m, d, mode, seq_len)
        if d.kind == "span":
            raw = span_decoder_budget(seq_len - m, d)
            inputs, targets = example_lengths(raw, d.noise_density, d.mean_span)
            return Budget(raw, inputs, targets, mode)
        return prefix_budget(seq_len - m - 2, d, mode, seq_len)

    @classmethod
    def keeps_remainder(cls, packing: str, options) -> str | None:
        return None  # every row is one denoiser's chunk of the stream: a short last chunk is dropped

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("none", "best-fit") if options.layout == "decoder" else ("none", "trim-and-pack")

    def example_columns(self) -> list[ColumnSpec]:
        if self.context.packed:  # examples denoised before the packer places them
            return self._row_columns()
        chunks = ColumnSpec("input_ids", "ragged", 0, self.vocab_size - 1, "raw chunks, each its denoiser's length")
        return [chunks, self._row_columns()[-1]]

    def columns(self, packed: list[ColumnSpec]) -> list[ColumnSpec]:
        if self.context.packed:
            return packed
        return [*self._row_columns(), *(c for c in packed if c.name not in ("input_ids", "denoiser"))]

    def _row_columns(self) -> list[ColumnSpec]:
        top, seq_len = self.vocab_size - 1, self.context.seq_len
        index = ColumnSpec(
            "denoiser",
            "scalar",
            0,
            len(self.denoisers) - 1,
            "index into the mixture table",
            role="category",
            categories=tuple(d.name for d in self.denoisers),
        )
        if self.options.layout == "encdec":
            return [
                ColumnSpec("input_ids", "fixed", 0, top, "mode token(s) + corrupted inputs + EOS", length=seq_len),
                ColumnSpec(
                    "labels",
                    "ragged",
                    0,
                    top,
                    "targets + EOS (length computed per denoiser)",
                    role="labels",
                    family="labels",
                ),
                index,
            ]
        return [
            ColumnSpec("input_ids", "fixed", 0, top, "mode + inputs + targets, padded", length=seq_len),
            ColumnSpec("labels", "fixed", IGNORE, top, "-100 except on the targets", role="labels"),
            ColumnSpec(
                "prefix_lengths",
                "scalar",
                1,
                seq_len,
                "bidirectional attention over positions < k",
                role="prefix_length",
            ),
            index,
        ]

    def partition_examples(self, partition_index: int):
        return _Ul2Partition(self, partition_index)


class _Ul2Partition(PartitionExamples):
    def __init__(self, objective: Ul2, partition: int):
        super().__init__(objective, partition)
        self.stream = TokenStream(objective.join_bos, objective.join_eos, self.counters)
        self.raw_lengths = np.array([p.raw for p in objective.budgets], dtype=np.int64)

    def _denoise(self, d: Denoiser, budget: Budget, tokens: np.ndarray, first_example: int):
        """(head = mode + inputs, its width per row, targets, their width per row) for this denoiser's
        examples; heads and targets are 2-D, each row valid up to its width."""
        rows = len(tokens)
        if d.kind == "prefix":
            return self._split(budget, tokens, self._split_points(d, budget, rows, first_example))
        nonnoise, noise = random_spans(
            rows,
            budget.raw,
            d.noise_density,
            d.mean_span,
            self.rng(first_example, f"{d.name}/noise"),
            self.rng(first_example, f"{d.name}/nonnoise"),
        )
        inputs, targets = corrupt_spans(tokens, nonnoise, noise, self.o.sentinels, self.o.eos_id)
        head = np.concatenate([np.broadcast_to(budget.mode, (rows, len(budget.mode))), inputs], axis=1)
        return head, np.full(rows, head.shape[1]), targets, np.full(rows, targets.shape[1])

    def _split_points(self, d: Denoiser, budget: Budget, rows: int, first_example: int) -> np.ndarray:
        return self.rng(first_example, f"{d.name}/split").integers(budget.min_split, budget.raw, size=rows)

    def _split(self, budget: Budget, tokens: np.ndarray, k: np.ndarray):
        """The S denoiser: mode + tokens[:k] + EOS as the head, tokens[k:] + EOS as the targets."""
        rows, m, raw = len(tokens), len(budget.mode), budget.raw
        full = np.empty((rows, m + raw + 2), dtype=tokens.dtype)  # mode, tokens with EOS after k, EOS
        full[:, :m] = budget.mode
        column = np.arange(raw)
        full[np.arange(rows)[:, None], m + column + (column >= k[:, None])] = tokens
        full[np.arange(rows), m + k] = self.o.eos_id
        full[:, -1] = self.o.eos_id
        head_width = m + k + 1
        target_width = raw - k + 1
        gather = np.minimum(head_width[:, None] + np.arange(budget.targets), full.shape[1] - 1)
        return full, head_width, np.take_along_axis(full, gather, axis=1), target_width

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        self.stream.extend(batch)
        most = len(self.stream) // int(self.raw_lengths.min())
        if most == 0:
            return None
        first_example = self.stream.examples_taken
        choice = self.rng(first_example, "denoiser").choice(len(self.o.denoisers), size=most, p=self.o.rates)
        ends = np.cumsum(self.raw_lengths[choice])
        rows = int(np.searchsorted(ends, len(self.stream), side="right"))
        if rows == 0:
            return None
        choice, ends = choice[:rows], ends[:rows]
        starts = ends - self.raw_lengths[choice]
        tokens, first, doc_ids = self.stream.take(int(ends[-1]))
        self.stream.count_split_at(first, doc_ids, starts)
        self.stream.examples_taken += rows
        documents = np.add.reduceat(first.astype(np.int64), starts)
        for index, d in enumerate(self.o.denoisers):
            self.counters[f"denoiser {d.name}"] += int(np.count_nonzero(choice == index))
        if self.o.context.packed:
            return self._assemble(tokens, starts, choice, documents, first_example)
        return self._chunks(tokens, ends, choice, documents, first_example)

    def _chunks(self, tokens, ends, choice, documents, first_example) -> RowBatch:
        """Raw chunks for the row step, with the counts of the rows it makes of them (an S denoiser's split
        drawn as the step draws it; a span denoiser's widths follow from its lengths)."""
        o, head, targets = self.o, np.zeros(len(choice), np.int64), np.zeros(len(choice), np.int64)
        for index, (d, budget) in enumerate(zip(o.denoisers, o.budgets)):
            members = np.flatnonzero(choice == index)
            if d.kind == "prefix" and len(members):
                k = self._split_points(d, budget, len(members), first_example)
                head[members], targets[members] = len(budget.mode) + k + 1, budget.raw - k + 1
            elif len(members):
                inputs, target = example_lengths(budget.raw, d.noise_density, d.mean_span)
                head[members], targets[members] = len(budget.mode) + inputs, target
        used, seq_len = head + targets, o.context.seq_len
        padding = seq_len - used if o.options.layout == "decoder" else seq_len - head
        chunks = Ragged(tokens, np.concatenate([[0], ends]).astype(np.int64))
        return RowBatch({"input_ids": chunks, "denoiser": choice.astype(np.int32)}, used, padding, documents)

    def rows(self, rows: RowBatch | None) -> RowBatch | None:
        """The row step, unpacked: each batch of raw chunks denoised, keyed to the rows before it."""
        if rows is None or self.o.context.packed:
            return rows
        key = self.rows_done
        self.rows_done += rows.num_rows
        chunks = rows.columns["input_ids"]
        made = self._assemble(chunks.values, chunks.offsets[:-1], rows.columns["denoiser"], rows.documents, key)
        return RowBatch({**rows.columns, **made.columns}, made.tokens, made.padding, made.documents)

    def _assemble(self, tokens, starts, choice, documents, first_example) -> RowBatch:
        o, rows = self.o, len(choice)
        seq_len = o.context.seq_len
        decoder = o.options.layout == "decoder"
        parts, head_width, target_width = [], np.zeros(rows, np.int64), np.zeros(rows, np.int64)
        for index, (d, budget) in enumerate(zip(o.denoisers, o.budgets)):
            members = np.flatnonzero(choice == index)
            if len(members):
                head, head_width[members], targets, target_width[members] = self._denoise(
                    d, budget, tokens[starts[members, None] + np.arange(budget.raw)], first_example
                )
                parts.append((members, head, targets))
        input_ids = np.full((rows, seq_len), 0 if o.pad_id is None else o.pad_id, dtype=np.int32)
        labels = np.full((rows, seq_len), IGNORE, dtype=np.int32)
        label_offsets = lengths_to_offsets(target_width)
        label_values = np.empty(int(label_offsets[-1]), dtype=np.int32)
        for members, head, targets in parts:
            _place(input_ids, members, np.zeros(len(members), np.int64), head, head_width[members])
            if decoder:
                _place(input_ids, members, head_width[members], targets, target_width[members])
                _place(labels, members, head_width[members], targets, target_width[members])
            else:
                inside = np.arange(targets.shape[1]) < target_width[members, None]
                label_values[range_indices(label_offsets[members], target_width[members])] = targets[inside]
        used = head_width + target_width
        index_column = choice.astype(np.int32)
        if decoder and not o.context.packed:  # a row each, padded as the packer pads examples of their own lengths
            columns = {"input_ids": input_ids, "labels": labels, "prefix_lengths": head_width.astype(np.int32)}
            return RowBatch({**columns, "denoiser": index_column}, used, seq_len - used, documents)
        if decoder:  # examples of their own lengths: the packer packs several in a row
            inside = np.arange(seq_len)[None, :] < used[:, None]
            offsets = lengths_to_offsets(used)
            columns = {
                "input_ids": Ragged(input_ids[inside], offsets),
                "labels": Ragged(labels[inside], offsets),
                "prefix_lengths": head_width.astype(np.int32),
                "denoiser": index_column,
            }
            return RowBatch(columns, tokens=used, padding=seq_len - used, documents=documents)
        columns = {"input_ids": input_ids, "labels": Ragged(label_values, label_offsets), "denoiser": index_column}
        return RowBatch(columns, tokens=used, padding=seq_len - head_width, documents=documents)

    def finish(self) -> RowBatch | None:
        if len(self.stream):
            self.stream.drop_rest()
        return None


def _place(into: np.ndarray, rows: np.ndarray, start: np.ndarray, values: np.ndarray, width: np.ndarray) -> None:
    """into[rows[i], start[i] : start[i] + width[i]] = values[i, :width[i]] for every i."""
    inside = np.arange(values.shape[1]) < width[:, None]
    into[np.repeat(rows, width), range_indices(start, width)] = values[inside]
