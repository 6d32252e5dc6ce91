"""What every packer shares: its settings, its interface and the per-segment columns."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from ..kernels.packing import first_of_segments
from ..options import Registry
from ..rows import POSITION_IDS, ColumnSpec, Ragged, RowBatch

MAX_POSITIONS = 2**31 - 1  # position_ids are int32
# Packers by name (--packing's choices): ``@register("NAME")`` on a class of this package's modules.
PACKERS: Registry[type] = Registry("packer")
register = PACKERS.register
CU_SEQLENS, CU_SEQLENS_PADDED = "cu_seqlens", "cu_seqlens_padded"  # --pad-to-multiple's sequence bounds


@dataclass(frozen=True)
class SequencePadding:
    """``--pad-to-multiple``: every packed sequence of ``n`` tokens takes ``ceil(n / multiple) * multiple
    + shift`` places in its row, its tokens first, then ``pad_id`` (labels -100) in its own segment, its
    positions running on (context parallelism's THD layout: every sequence a multiple of 2 x CP)."""

    multiple: int
    shift: int  # 1 where the reader shifts each sequence (NVIDIA's packed SFT: n tokens, n - 1 inputs)
    pad_id: int
    limit: int  # the most real tokens a sequence may hold (its padded length fits a row)

    def padded(self, lengths: np.ndarray) -> np.ndarray:
        return -(-lengths // self.multiple) * self.multiple + self.shift


@dataclass(frozen=True)
class PackSettings:
    # Tokens a row holds: --seq-len (one more with --row-tokens seq-len+1); None: a document a row, never
    # cut (formats of whole documents, whose trainer cuts its own windows).
    row_length: int | None
    columns: tuple[ColumnSpec, ...]  # the objective's example columns
    pad_id: int | None = None  # None: no padding (concat then drops its remainder)
    window: int = 4_000_000  # best-fit: tokens gathered before packing (bounds memory)
    documents: bool = True  # examples are documents, joined into a stream (else finished examples)
    overlap: int = 0  # concat: tokens each row shares with the next (1: Megatron's row_length + 1 windows)
    sequence_padding: SequencePadding | None = None  # best-fit: --pad-to-multiple

    @property
    def longest_row(self) -> int:
        """The most tokens a row can hold: its length, or for whole documents the most int32 positions count."""
        return self.row_length if self.row_length is not None else MAX_POSITIONS

    def spec(self, name: str) -> ColumnSpec:
        return next(c for c in self.columns if c.name == name)


class Packer(Protocol):
    counters: Counter

    def __init__(self, settings: PackSettings) -> None: ...

    @staticmethod
    def pads_rows(remainder: str) -> bool: ...

    def columns(self) -> list[ColumnSpec]:
        """The row columns this packer writes for the objective's example columns."""
        ...

    def process(self, examples: RowBatch | None) -> RowBatch | None: ...

    def finish(self) -> RowBatch | None: ...


def per_example_names(settings: PackSettings) -> list[str]:
    """Example columns with one value per example: they become per-segment columns."""
    return [c.name for c in settings.columns if c.kind == "scalar"]


def token_columns(settings: PackSettings) -> list[ColumnSpec]:
    """Example columns of one value per token (placed with the tokens)."""
    lists = list_columns(settings)
    return [c for c in settings.columns if c.kind != "scalar" and c not in lists]


def list_columns(settings: PackSettings) -> list[ColumnSpec]:
    """Example columns of one list per example (a conversation's images and their token spans): a packed
    row holds its examples' lists joined in the order their tokens come."""
    return [c for c in settings.columns if c.kind == "value" and isinstance(c.value_type, tuple)
            and c.value_type[0] == "list"]  # fmt: skip


def joined_lists(settings: PackSettings, values: dict, owner, row, start, rows: int, cut) -> dict[str, np.ndarray]:
    """Each list column per row: the lists of the examples placed in it (``owner``, in row-major order,
    each starting at ``start`` in row ``row``); token spans (role ``image_spans``) moved by that start.
    An example whose tokens a packer cut (``cut``) cannot keep spans of its whole: objectives with lists
    fit their examples to a row first."""
    out = {}
    for spec in list_columns(settings):
        per_example = values[spec.name]
        if np.any(cut) and any(len(per_example[k]) for k in np.asarray(owner)[np.asarray(cut)].tolist()):
            raise ValueError(f"column {spec.name}: an example holding a list was cut across rows")
        joined = [[] for _ in range(rows)]
        spans = spec.role == "image_spans"
        for k, r, at in zip(np.asarray(owner).tolist(), np.asarray(row).tolist(), np.asarray(start).tolist()):
            items = per_example[k]
            joined[r].extend([[a + at, b + at] for a, b in items] if spans else items)
        column = np.empty(rows, dtype=object)
        for r, items in enumerate(joined):
            column[r] = items
        out[spec.name] = column
    return out


def packed_columns(settings: PackSettings, kind: str) -> list[ColumnSpec]:
    """Aligned token columns (as ``kind``), then segment ids and positions, then one ragged
    per-segment column for each per-example value."""
    row_length = settings.longest_row
    # Fixed rows are --seq-len long, every one (a short last row is padded or dropped).
    length = (settings.row_length or 0) if kind == "fixed" else 0
    aligned = [replace(c, kind=kind, length=length) for c in token_columns(settings)]
    segments = [
        ColumnSpec(
            "segment_ids",
            kind,
            0,
            row_length,
            "1-based example per row, 0 = padding",
            role="segment_ids",
            length=length,
        ),
        ColumnSpec(
            POSITION_IDS, kind, 0, row_length - 1, "position within the example", role="positions", length=length
        ),
    ]
    return aligned + segments + per_segment_columns(settings) + list_columns(settings)


def sequence_bound_columns(settings: PackSettings) -> list[ColumnSpec]:
    """With ``--pad-to-multiple``, each row's sequence bounds as Transformer Engine's THD attention takes
    them: ``cu_seqlens`` (real lengths summed) and ``cu_seqlens_padded`` (where each sequence starts in
    the row; every length a multiple), each with the row's trailing padding as one more sequence."""
    if settings.sequence_padding is None:
        return []
    top = settings.longest_row
    return [
        ColumnSpec(CU_SEQLENS, "ragged", 0, top, "sequence bounds: real lengths summed", role="cu_seqlens"),
        ColumnSpec(CU_SEQLENS_PADDED, "ragged", 0, top, "sequence bounds in the row, padded", role="cu_seqlens_padded"),
    ]


def per_segment_columns(settings: PackSettings) -> list[ColumnSpec]:
    """Each per-example value as a ragged column of one value per segment (prefix lengths and
    categories keep their role; anything else becomes ``per_segment``)."""
    return [
        ColumnSpec(
            c.name,
            "ragged",
            c.min_value,
            c.max_value,
            f"per segment: {c.doc}",
            role=c.role if c.role in ("prefix_length", "category") else "per_segment",
            categories=c.categories,
        )
        for c in settings.columns
        if c.kind == "scalar"
    ]


def segment_values(segment_ids: np.ndarray, token_values: np.ndarray) -> Ragged:
    """Per row, the value at the first token of each segment: a ragged column, one entry per segment."""
    return Ragged(*first_of_segments(segment_ids, token_values))


def count_empty(lengths: np.ndarray, counters: Counter) -> None:
    """Documents with no tokens (possible only with neither BOS nor EOS) are skipped."""
    empty = int(np.sum(lengths == 0))
    if empty:
        counters["skipped:no_tokens"] += empty


@dataclass
class PlannedRows:
    """Rows as runs, as a sink and ``PlanWriter`` take them (``RowBatch``'s bookkeeping, no columns): what a
    packer's planner (``concat.ConcatPlanner``, ``best_fit.BestFitPlanner``) makes from lengths alone."""

    runs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # column -> runs and row offsets
    tokens: np.ndarray
    padding: np.ndarray
    documents: np.ndarray
    segment_count: int
    columns: dict = None  # none: the rows are their runs
    batches: np.ndarray | None = None  # the row step's batches (rows each) where not one

    @property
    def num_rows(self) -> int:
        return len(self.tokens)

    def slice(self, start: int, stop: int) -> PlannedRows:
        if (start, stop) != (0, self.num_rows):
            raise ValueError("planned rows are written whole (the plan format keeps a partition in one file)")
        return self

    def segments(self) -> int:
        return self.segment_count
