"""``best-fit``: best-fit-decreasing packing (REFERENCE §2) within windows of about ``window`` tokens.

Only examples longer than a row are split (into row-sized pieces); pieces are placed longest first
into the open row with the least room that still fits; the rest of a row is padding. Every token
is placed. Every aligned column of the examples (``labels`` beside ``input_ids``) is placed with
its tokens; per-example values become per-segment columns.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..kernels import PADDING_DOC
from ..kernels.bestfit import best_fit_decreasing
from ..kernels.example_runs import ExampleRuns
from ..kernels.packing import cumulative_bounds, segments_and_positions
from ..kernels.ragged import distinct_sorted, lengths_to_offsets, range_indices, split_long_items
from ..rows import POSITION_IDS, ColumnSpec, Ragged, RowBatch
from .base import (
    CU_SEQLENS,
    CU_SEQLENS_PADDED,
    PackSettings,
    PlannedRows,
    count_empty,
    joined_lists,
    list_columns,
    packed_columns,
    per_example_names,
    register,
    segment_values,
    sequence_bound_columns,
    token_columns,
)


@register("best-fit")
class BestFitPacker:
    @staticmethod
    def pads_rows(remainder: str) -> bool:
        """Whether rows get padding, so the objective must name a pad token (``--remainder``: drop or pad)."""
        return True  # what no example fills

    def __init__(self, settings: PackSettings):
        self.settings = settings
        self.row_length = settings.row_length
        self.aligned = token_columns(settings)
        self.lists = [c.name for c in list_columns(settings)]
        self.tag_names = per_example_names(settings)
        self.counters: Counter = Counter()
        self.pending: list[RowBatch] = []
        self.pending_tokens = 0
        self.examples_seen = 0

    def columns(self) -> list[ColumnSpec]:
        return packed_columns(self.settings, "fixed") + sequence_bound_columns(self.settings)

    def process(self, examples: RowBatch | None) -> RowBatch | None:
        if examples is None:
            return None
        self.pending.append(examples)
        self.pending_tokens += len(examples.columns["input_ids"].values)
        return self._pack() if self.pending_tokens >= self.settings.window else None

    def finish(self) -> RowBatch | None:
        return self._pack() if self.pending else None

    def _gather(self):
        """The pending examples as one batch: (lengths, aligned values, per-example values,
        documents starting in each example, example ids)."""
        pending, self.pending, self.pending_tokens = self.pending, [], 0
        lengths = np.concatenate([np.diff(p.columns["input_ids"].offsets) for p in pending])
        values = {c.name: np.concatenate([p.columns[c.name].values for p in pending]) for c in self.aligned}
        tags = {name: np.concatenate([p.columns[name] for p in pending]) for name in self.tag_names + self.lists}
        documents = np.concatenate([p.documents for p in pending])
        example_ids = self.examples_seen + np.arange(len(lengths), dtype=np.int64)
        self.examples_seen += len(lengths)
        return lengths, values, tags, documents, example_ids

    def _pack(self) -> RowBatch | None:
        row_length, padding = self.row_length, self.settings.sequence_padding
        lengths, values, tags, example_documents, example_ids = self._gather()
        assigned = assign(lengths, self.settings, self.counters)
        if assigned is None:
            return None
        placed, owners = assigned.placed, assigned.owners
        # A row's pieces lie end to end from its start, padding after them: with the pieces taken in
        # row-major order, one boolean mask places them, and one index gathers every column.
        taken = range_indices(assigned.starts, placed.lengths)
        columns = {}
        for spec in self.aligned:
            columns[spec.name] = placed.column(
                values[spec.name][taken],
                spec.fill_value(self.settings.pad_id),
                spec.fill_value(padding.pad_id) if padding else None,
            )
        segment_ids, positions = segments_and_positions(placed.column(example_ids[owners], PADDING_DOC, per_slot=True))
        columns["segment_ids"], columns[POSITION_IDS] = segment_ids, positions
        for name in self.tag_names:
            columns[name] = segment_values(segment_ids, placed.column(tags[name][owners], 0, per_slot=True))
        if self.lists:
            cut = assigned.cut()
            columns.update(joined_lists(self.settings, tags, owners, placed.row, placed.starts(), placed.rows, cut))
        if padding:
            columns[CU_SEQLENS], columns[CU_SEQLENS_PADDED] = placed.sequence_bounds()
        padding_count = row_length - placed.real_per_row
        documents = assigned.documents(example_documents)
        return RowBatch(columns, tokens=row_length - padding_count, padding=padding_count, documents=documents)


@dataclass
class Assignment:
    """Where a window's examples go, decided from their lengths alone: their pieces (an example longer than a
    row cut in row-sized pieces) placed in rows, in row-major order (``placed``), each piece's first token in
    the examples joined end to end (``starts``) and its example (``owners``)."""

    placed: _Placed
    starts: np.ndarray
    owners: np.ndarray
    first_piece: np.ndarray  # by piece, in row-major order: whether it is its example's first

    def documents(self, example_documents: np.ndarray) -> np.ndarray:
        """Documents a row holds the start of: each example's, in the row holding its first piece."""
        firsts = self.first_piece
        weights = example_documents[self.owners[firsts]]
        return np.bincount(self.placed.row[firsts], weights=weights, minlength=self.placed.rows).astype(np.int64)

    def cut(self) -> np.ndarray:
        """By piece: whether its example was cut in pieces (longer than a row)."""
        return np.bincount(self.owners)[self.owners] > 1


def assign(lengths: np.ndarray, settings: PackSettings, counters: Counter) -> Assignment | None:
    """Best-fit-decreasing over a window's example ``lengths``: what ``BestFitPacker`` gathers the columns
    by and ``BestFitPlanner`` writes as runs; None where no example has a token."""
    row_length, padding = settings.row_length, settings.sequence_padding
    count_empty(lengths, counters)
    offsets = lengths_to_offsets(lengths)
    chunk_offsets, source = split_long_items(offsets, padding.limit if padding else row_length)
    chunk_lengths = np.diff(chunk_offsets)
    keep = chunk_lengths > 0
    chunk_starts, chunk_lengths, source = chunk_offsets[:-1][keep], chunk_lengths[keep], source[keep]
    if not len(chunk_lengths):
        return None
    first_chunk = np.ones(len(source), dtype=bool)
    first_chunk[1:] = source[1:] != source[:-1]
    counters["documents_split"] += len(distinct_sorted(source[~first_chunk]))  # examples cut in pieces
    slot_lengths = padding.padded(chunk_lengths) if padding else chunk_lengths  # places each piece takes
    row, offset, rows = best_fit_decreasing(slot_lengths, row_length)
    order = np.argsort(row * row_length + offset, kind="stable")
    placed = _Placed(row[order], chunk_lengths[order], slot_lengths[order], rows, row_length)
    return Assignment(placed, chunk_starts[order], source[order], first_chunk[order])


class BestFitPlanner:
    """``best-fit``'s rows as runs, from the examples' runs alone (``kernels/example_runs.py``): what
    ``--format plan`` writes for an objective whose examples it can give as runs (clm, mlm, mtp: documents
    with BOS and EOS; chat: conversations with their labels). A window's examples are assigned as
    ``BestFitPacker`` assigns them (``assign``); each placed piece is the runs it cuts, each row's padding
    one more. No array a token; tested byte for byte against the packer through the plan's reader."""

    def __init__(self, settings: PackSettings):
        self.settings = settings
        self.fills = {spec.name: spec.fill_value(settings.pad_id) for spec in token_columns(settings)}
        self.counters: Counter = Counter()
        self.pending: list[ExampleRuns] = []
        self.pending_tokens = 0

    def feed(self, examples: ExampleRuns | None) -> PlannedRows | None:
        """A batch's examples: the rows of a full window."""
        if examples is None:
            return None
        self.pending.append(examples)
        self.pending_tokens += int(examples.lengths.sum())
        return self._plan() if self.pending_tokens >= self.settings.window else None

    def finish(self) -> PlannedRows | None:
        return self._plan() if self.pending else None

    def _plan(self) -> PlannedRows | None:
        examples = ExampleRuns.concat(self.pending)
        self.pending, self.pending_tokens = [], 0
        assigned = assign(examples.lengths, self.settings, self.counters)
        if assigned is None:
            return None
        placed, row = assigned.placed, assigned.placed.row
        # After a row's last piece, the row's padding (a run of 0 tokens dropped).
        last_in_row = np.append(row[1:] != row[:-1], True)
        padding = np.where(last_in_row, self.settings.row_length - placed.real_per_row[row], 0)
        runs = {}
        for name in examples.columns:
            piece, *cut = examples.cut(name, assigned.starts, placed.lengths, assigned.owners)
            runs[name] = _with_padding(piece, cut, padding, self.fills.get(name, 0), row, placed.rows)
        constant = np.zeros(len(row), np.int64)
        segment = np.arange(len(row)) - np.searchsorted(row, row) + 1  # each piece its own, from 1 a row
        pieces = np.stack([placed.lengths, padding], axis=1)  # segments, positions: a run a piece, then padding
        runs["segment_ids"] = _runs(np.stack([segment, constant], axis=1), pieces, np.array([0, 0]), row, placed.rows)
        runs[POSITION_IDS] = _runs(np.stack([constant, constant], axis=1), pieces, np.array([1, 0]), row, placed.rows)
        real = placed.real_per_row
        documents = assigned.documents(examples.documents)
        return PlannedRows(runs, real, self.settings.row_length - real, documents, len(row))


def _with_padding(piece: np.ndarray, cut: list, padding: np.ndarray, fill: int, row: np.ndarray, rows: int):
    """Pieces' runs (``cut``: first value, step, length, in row-major order) and after each row's last piece
    its ``padding`` run: runs and runs a row, as a plan keeps them."""
    first, step, length = cut
    ends = np.searchsorted(piece, np.arange(len(padding)), side="right")  # past each piece's last run
    padded = np.flatnonzero(padding > 0)
    at = ends[padded]
    first = np.insert(first, at, fill)
    step = np.insert(step, at, 0).astype(np.int8)
    length = np.insert(length, at, padding[padded]).astype(np.int32)
    per_row = np.bincount(row[piece], minlength=rows) + np.bincount(row[padded], minlength=rows)
    return first.astype(np.int64), step, length, per_row.astype(np.int64)


def _runs(values: np.ndarray, lengths: np.ndarray, steps: np.ndarray, row: np.ndarray, rows: int):
    """Runs (first value, step, length, runs a row) of pieces' (pieces, k) candidate runs, in row-major
    order, those of 0 tokens dropped; a run of one token steps 0, as ``kernels/runs.encode_runs`` says."""
    keep = lengths > 0
    flat_lengths = lengths[keep]
    step = (np.broadcast_to(steps, lengths.shape)[keep] * (flat_lengths > 1)).astype(np.int8)
    per_row = np.bincount(np.broadcast_to(row[:, None], lengths.shape)[keep], minlength=rows).astype(np.int64)
    return values[keep].astype(np.int64), step, flat_lengths.astype(np.int32), per_row


class _Placed:
    """Pieces placed in rows, in row-major order: each takes ``slots[i]`` places (its tokens, then with
    --pad-to-multiple its sequence's padding) from where the one before it ends; the row's rest is padding."""

    def __init__(self, row: np.ndarray, lengths: np.ndarray, slots: np.ndarray, rows: int, row_length: int):
        self.row, self.lengths, self.slots, self.rows, self.row_length = row, lengths, slots, rows, row_length
        self.filled = np.bincount(row, weights=slots, minlength=rows).astype(np.int64)
        self.real_per_row = np.bincount(row, weights=lengths, minlength=rows).astype(np.int64)
        self.padded = not np.array_equal(slots, lengths)

    @cached_property
    def occupied(self) -> np.ndarray:
        return np.arange(self.row_length) < self.filled[:, None]

    @cached_property
    def real(self) -> np.ndarray | None:
        """By place of every piece: whether it holds a token (not its sequence's padding); None: all do."""
        if not self.padded:
            return None
        return range_indices(np.zeros(len(self.slots), np.int64), self.slots) < np.repeat(self.lengths, self.slots)

    def column(self, values: np.ndarray, fill: int, inside: int | None = None, per_slot=False) -> np.ndarray:
        """A (rows, row_length) column: ``values`` (every piece's tokens, or with ``per_slot`` one value a
        piece, repeated over its places), ``inside`` on a sequence's own padding, ``fill`` after the pieces."""
        out = np.full((self.rows, self.row_length), fill, dtype=values.dtype)
        if per_slot:
            out[self.occupied] = np.repeat(values, self.slots)
        elif self.real is None:
            out[self.occupied] = values
        else:
            flat = np.full(len(self.real), inside, dtype=values.dtype)
            flat[self.real] = values
            out[self.occupied] = flat
        return out

    def starts(self) -> np.ndarray:
        """Where each piece starts in its row."""
        begins = np.cumsum(self.slots) - self.slots
        return begins - begins[np.searchsorted(self.row, self.row)]

    def sequence_bounds(self) -> tuple[Ragged, Ragged]:
        """``cu_seqlens`` (the sequences' real lengths summed) and ``cu_seqlens_padded`` (their places), each
        row's trailing padding one sequence more, real length 0 (Megatron-Bridge's collate, for THD)."""
        tail = self.filled < self.row_length
        real_tail = np.where(tail, self.real_per_row, -1)
        padded_tail = np.where(tail, self.row_length, -1)
        real = cumulative_bounds(self.row, self.lengths, self.rows, real_tail)
        padded = cumulative_bounds(self.row, self.slots, self.rows, padded_tail)
        return Ragged(*real), Ragged(*padded)
