"""The one materializer: rows made from an assignment (packed rows whose id columns hold store positions,
``formats/row_plan.py``) and the tokens. A run over a token store packs positions whatever it writes; a
row format gets its rows from here as it runs (``run/chain.py``), and ``objcli.reading`` gets a plan's
rows from here on read, so a plan read back equals the rows written for the same command by construction.

An id column's value ``v`` is an id where ``v < vocabulary`` (BOS, EOS, pad, sentinels, -100) and the
tokens' value at position ``v - vocabulary`` otherwise; then the objective's row step (BERT's masking, a
prefix's split) runs over the rows with ids, keyed as the run keys it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..kernels.runs import decode_runs
from ..rows import ColumnSpec, Ragged, RowBatch

ID_ROLES = ("tokens", "labels")  # columns whose values are ids (store positions in an assignment)
RowStep = Callable[[RowBatch], RowBatch]


def id_columns(roles: dict[str, str | None]) -> list[str]:
    """The packed columns (name -> role) holding ids, positions where they come from the tokens."""
    return [name for name, role in roles.items() if role in ID_ROLES]


def materialize(packed: RowBatch, ids, vocabulary: int, id_names: list[str], step: RowStep | None) -> RowBatch:
    """``packed``'s rows made: positions turned into ``ids`` (anything with ``take`` and ``len``), then the
    row ``step``; a column the step passes by (a mixture's source, a hidden key) is kept as packed."""
    for name in id_names:
        packed.columns[name] = with_ids(packed.columns[name], ids, vocabulary)
    if step is None:
        return packed
    rows = step(packed)
    for name, column in packed.columns.items():
        rows.columns.setdefault(name, column)
    return rows


def with_ids(column, ids, vocabulary: int):
    """Store positions (``vocabulary`` and up) turned into the tokens' ids; ids and -100 kept."""
    values = column.values if isinstance(column, Ragged) else column
    stored = values >= vocabulary
    made = values.copy()
    positions = values[stored] - vocabulary
    if len(positions) and positions.max() >= len(ids):
        raise ValueError(f"places a token at {positions.max():,}, past its store partition's {len(ids):,}")
    made[stored] = ids.take(positions)
    return Ragged(made, column.offsets) if isinstance(column, Ragged) else made


def decoded(planned, specs: list[ColumnSpec]) -> RowBatch:
    """Rows planned as runs (``packing/concat_plan.py``) as packed rows of positions: each fixed column
    ``rows x row_length`` int32."""
    rows = planned.num_rows
    columns = {}
    for spec in specs:
        first, steps, lengths, _ = planned.runs[spec.name]
        columns[spec.name] = decode_runs(first, steps, lengths).astype(np.int32).reshape(rows, -1)
    return RowBatch(columns, planned.tokens, planned.padding, planned.documents)


class Spool:
    """A partition's ids by position (from its first token, past the vocabulary): what a run's packed
    positions are made from. Each batch's documents put their ids at their positions, whatever order, subset
    or repeats the run's passes give them in (splits, shuffled windows, a mixture's copies); nothing is
    dropped, as a packer may hold any document it was given."""

    def __init__(self, vocabulary: int):
        self.vocabulary = vocabulary
        self.buffer = np.zeros(0, np.int32)

    def __len__(self) -> int:
        return len(self.buffer)

    def put(self, positions: np.ndarray, ids: np.ndarray) -> None:
        if not len(positions):
            return
        places = positions - self.vocabulary
        end = int(places.max()) + 1
        if end > len(self.buffer):  # doubling: each id copied a bounded number of times
            grown = np.zeros(max(end, 2 * len(self.buffer)), np.int32)
            grown[: len(self.buffer)] = self.buffer
            self.buffer = grown
        self.buffer[places] = ids

    def take(self, positions: np.ndarray) -> np.ndarray:
        return self.buffer.take(positions)
