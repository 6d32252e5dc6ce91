"""What every packer shares: its settings, its interface and the per-segment columns."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from ..kernels.packing import first_of_segments
from ..rows import POSITION_IDS, ColumnSpec, Ragged, RowBatch

MAX_POSITIONS = 2**31 - 1  # position_ids are int32


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


def packed_columns(settings: PackSettings, kind: str) -> list[ColumnSpec]:
    """Aligned token columns (as ``kind``), then segment ids and positions, then one ragged
    per-segment column for each per-example value."""
    row_length = settings.longest_row
    # Fixed rows are --seq-len long, every one (a short last row is padded or dropped).
    length = (settings.row_length or 0) if kind == "fixed" else 0
    aligned = [replace(c, kind=kind, length=length) for c in settings.columns if c.kind != "scalar"]
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
    return aligned + segments + per_segment_columns(settings)


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
