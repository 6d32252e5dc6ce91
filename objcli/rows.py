"""Rows as objectives emit them and writers consume them.

A column is one of four kinds:
- ``fixed``: a 2-D array (rows, length), every row the same length (packed rows);
- ``ragged``: a :class:`Ragged` (flat values + int64 offsets), rows of varying length;
- ``scalar``: a 1-D array, one value per row (e.g. a label);
- ``value``: a 1-D object array, one Python value a row of the column's ``value_type`` (a string, a
  number, a list of messages, a record: RL prompts in verl's layout, a reward margin), written by the
  Arrow formats only.

and plays one *role*, which is all that ``stats``, ``inspect`` and ``verify`` look at (never a
column's or an objective's name):

==================  =====================================================================
``tokens``          token ids the model reads (``family`` names the column itself)
``labels``          token ids the model predicts, ``IGNORE`` (-100) where no loss is taken
``segment_ids``     1-based example per token of ``family``, 0 = padding
``positions``       position of each token of ``family`` within its example
``attention_mask``  1 for tokens, 0 for padding (rows of ``family``)
``token_type_ids``  0 for the first sentence, 1 for the second (rows of ``family``)
``prefix_length``   bidirectional attention over positions < k: one per row, or one per segment
``per_segment``     one value per segment of a packed row (e.g. the FIM mode of each document)
``example_label``   one class label per row (e.g. NSP's next_sentence_label)
``category``        one index per row into ``categories`` (e.g. UL2's denoiser)
``target_depth``    per token, how many of K prediction heads have a target in its segment (MTP)
``pair_side``       per segment, 0 for a pair's chosen side and 1 for its rejected (segments 2k-1, 2k)
``data``            a ``value`` column: what the trainer reads besides tokens (no token checks)
==================  =====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from .kernels import IGNORE
from .kernels.ragged import gather_ranges, lengths_to_offsets

ColumnKind = Literal["fixed", "ragged", "scalar", "value"]
# The per-token positions' column: the name Hugging Face models take (``forward(position_ids=…)``), so
# Trainer keeps it (remove_unused_columns) and transformers finds packed sequences by it (a sequence
# starts wherever a position does not follow the one before). Outputs written before used "positions";
# readers go by the manifest's names and roles.
POSITION_IDS = "position_ids"
HIDDEN = "__"  # columns rows carry through the stages but no format writes (--provenance's)
DOCUMENT = "__document"  # an example's document among its batch's, where examples are not one each
ROLES = (
    "tokens",
    "labels",
    "segment_ids",
    "positions",
    "attention_mask",
    "token_type_ids",
    "prefix_length",
    "per_segment",
    "example_label",
    "category",
    "target_depth",
    "pair_side",
    "data",
    "loss_mask",  # whether the next token is learned (NVIDIA's packed SFT layout)
    "sequence_starts",  # where each packed sequence starts in its row (its seq_start_id)
    "cu_seqlens",  # --pad-to-multiple: 0, then the row's sequences' real lengths summed (THD attention)
    "cu_seqlens_padded",  # and where each starts in the row, padded to the multiple (the row's end last)
    "images",  # a value column: each row's images (paths or URLs), in the order their tokens come
    "image_spans",  # a value column: each image's [first, last + 1) image tokens in the row's ``family``
)


def fold_value_type(value_type, leaf, listed, record):
    """A value column's type (``ColumnSpec.value_type``: a name, ``("list", T)``, ``("struct", ((name,
    T), ...))``; lists where JSON kept tuples) folded from its leaves up: ``leaf(name)``,
    ``listed(item's fold)``, ``record(((name, field's fold), ...))``. The one walk of the grammar every
    writer, card and check builds its form of the type with."""
    if isinstance(value_type, str):
        return leaf(value_type)
    kind, inner = value_type
    if kind == "list":
        return listed(fold_value_type(inner, leaf, listed, record))
    return record(tuple((name, fold_value_type(t, leaf, listed, record)) for name, t in inner))


@dataclass(frozen=True)
class ColumnSpec:
    """What a column holds, so writers can choose a schema and the narrowest safe dtype."""

    name: str
    kind: ColumnKind
    min_value: int
    max_value: int
    doc: str = ""
    role: str = "tokens"
    family: str = "input_ids"  # the tokens (or labels) column whose rows this column runs alongside
    categories: tuple[str, ...] = ()  # role "category": the name of each index
    # kind "value": "string", "int64", "float64", ("list", T) or ("struct", ((name, T), ...)).
    value_type: str | tuple = ""
    # kind "fixed": the values every row holds, where the run fixes it (a packer's --seq-len rows); the
    # Arrow formats then write a fixed-size list, which needs no offsets. 0: rows of one batch are alike
    # but the run does not say how long (written as a list, as outputs before it were).
    length: int = 0

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"column {self.name}: unknown role {self.role!r}")
        if self.length and self.kind != "fixed":
            raise ValueError(f"column {self.name}: only a fixed column has a length")

    def fill_value(self, pad_id: int | None) -> int:
        """What padding holds in this column: the pad token, -100 for labels, else 0."""
        if self.role == "tokens":
            return 0 if pad_id is None else pad_id
        return IGNORE if self.role == "labels" else 0

    def narrow_dtype(self) -> np.dtype:
        """The narrowest integer every value of the column fits: uint8/16/32 for values from 0 (ids under
        a 65,536 vocabulary, positions under 65,536, segment numbers, masks), int8/16 where -100 is one
        (labels of a vocabulary under 32,768), else int32. What Arrow, Parquet and ``hf`` shards store."""
        low, high = self.min_value, self.max_value
        if low >= 0:
            return np.dtype(np.uint8 if high < 2**8 else np.uint16 if high < 2**16 else np.uint32)
        if -(2**7) <= low and high < 2**7:
            return np.dtype(np.int8)
        return np.dtype(np.int16 if -(2**15) <= low and high < 2**15 else np.int32)

    def disk_dtype(self) -> np.dtype:
        """uint16 when every value fits (REFERENCE §1: Megatron's vocab < 65,500 rule), int16 for
        small signed values (labels with -100 and a small vocabulary), else int32."""
        if self.min_value >= 0 and self.max_value < 65_500:
            return np.dtype(np.uint16)
        if -32_768 <= self.min_value and self.max_value < 32_768:
            return np.dtype(np.int16)
        return np.dtype(np.int32)


def with_family_lengths(columns: list[ColumnSpec]) -> list[ColumnSpec]:
    """Each fixed column of no length given the length of the column it runs alongside (its ``family``),
    where that one has a length: a row of labels or a mask is as long as the row of tokens it is for."""
    lengths = {c.name: c.length for c in columns if c.length}
    return [
        replace(c, length=lengths[c.family]) if c.kind == "fixed" and not c.length and c.family in lengths else c
        for c in columns
    ]


@dataclass(frozen=True)
class Ragged:
    values: np.ndarray
    offsets: np.ndarray  # int64, len = rows + 1

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def slice(self, start: int, stop: int) -> Ragged:
        lo, hi = self.offsets[start], self.offsets[stop]
        return Ragged(self.values[lo:hi], self.offsets[start : stop + 1] - lo)

    def take(self, rows: np.ndarray) -> Ragged:
        lengths = np.diff(self.offsets)[rows]
        return Ragged(gather_ranges(self.values, self.offsets[:-1][rows], lengths), lengths_to_offsets(lengths))

    @staticmethod
    def concat(parts: list[Ragged]) -> Ragged:
        lengths = np.concatenate([np.diff(p.offsets) for p in parts])
        return Ragged(np.concatenate([p.values for p in parts]), lengths_to_offsets(lengths))


RowColumn = np.ndarray | Ragged  # a column of a RowBatch: 2-D rows, ragged rows, or one value a row


@dataclass
class RowBatch:
    """Rows plus per-row bookkeeping that is counted in the manifest but not written."""

    columns: dict[str, RowColumn]
    tokens: np.ndarray  # non-padding tokens per row
    padding: np.ndarray  # padding tokens per row
    documents: np.ndarray  # documents whose first token lands in the row

    @property
    def num_rows(self) -> int:
        return len(self.tokens)

    def slice(self, start: int, stop: int) -> RowBatch:
        columns = {
            name: col.slice(start, stop) if isinstance(col, Ragged) else col[start:stop]
            for name, col in self.columns.items()
        }
        return RowBatch(columns, self.tokens[start:stop], self.padding[start:stop], self.documents[start:stop])

    def take(self, rows: np.ndarray) -> RowBatch:
        """These rows, in this order (a copy)."""
        columns = {name: col.take(rows) if isinstance(col, Ragged) else col[rows] for name, col in self.columns.items()}
        return RowBatch(columns, self.tokens[rows], self.padding[rows], self.documents[rows])

    @staticmethod
    def concat(batches: list[RowBatch]) -> RowBatch:
        """The rows of every batch, in order (a copy)."""
        columns = {}
        for name, column in batches[0].columns.items():
            parts = [b.columns[name] for b in batches]
            columns[name] = Ragged.concat(parts) if isinstance(column, Ragged) else np.concatenate(parts)
        counts = (np.concatenate([getattr(b, f) for b in batches]) for f in ("tokens", "padding", "documents"))
        return RowBatch(columns, *counts)

    def segments(self) -> int:
        """Examples packed in these rows: segments where rows carry ``segment_ids``, else one per row."""
        segment_ids = self.columns.get("segment_ids")
        if isinstance(segment_ids, np.ndarray) and segment_ids.ndim == 2 and len(segment_ids):
            return int(segment_ids.max(axis=1).sum())
        starts = self.columns.get("seq_start_id")  # NVIDIA's packed rows read back: one a sequence start
        if isinstance(starts, Ragged):
            return len(starts.values)
        return self.num_rows

    def row_segments(self) -> np.ndarray:
        """``segments()`` row by row."""
        segment_ids = self.columns.get("segment_ids")
        if isinstance(segment_ids, np.ndarray) and segment_ids.ndim == 2:
            return segment_ids.max(axis=1, initial=0).astype(np.int64)
        starts = self.columns.get("seq_start_id")
        if isinstance(starts, Ragged):
            return np.diff(starts.offsets).astype(np.int64)
        return np.ones(self.num_rows, np.int64)

    def row_nbytes(self) -> np.ndarray:
        """In-memory bytes per row (int32 values), used to size shards given in bytes. Hidden columns
        (``__`` names: where rows come from, with --provenance) are not written to shards: not counted."""
        sizes = np.zeros(self.num_rows, dtype=np.int64)
        for name, col in self.columns.items():
            if name.startswith(HIDDEN):
                continue
            if isinstance(col, Ragged):
                sizes += np.diff(col.offsets) * 4
            elif col.ndim == 2:
                sizes += col.shape[1] * 4
            else:
                sizes += 4
        return sizes
