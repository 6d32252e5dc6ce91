"""NVIDIA's packed SFT layout (``--format nemo-packed``): Parquet rows of ``input_ids``, ``loss_mask`` and
``seq_start_id``, as Megatron-Bridge's ``GPTSFTPackedParquetDataset`` (and NeMo's packed datasets, and
the Nemotron data preparation) read them, in files named ``*.idx.parquet`` as its loader looks for them.

A row holds its sequences back to back, no padding; ``seq_start_id`` lists where each starts. The
mask is aligned to the labels: ``loss_mask[j]`` says whether ``input_ids[j + 1]`` is learned, so it is
0 at each sequence's last token (the reader's collate takes ``input_ids[s:e-1]`` as inputs,
``input_ids[s+1:e]`` as labels and ``loss_mask[s:e-1]`` as their mask). objcli's packed rows map onto it
one to one: a segment is a sequence, padding (segment 0) is dropped, and a position is learned where
the row's ``labels`` (chat: the assistant's tokens) hold the next token, or, for next-token rows
without labels (clm), wherever the next token is in the same sequence."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..kernels import IGNORE
from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.manifest import ColumnInfo, Manifest
from ..storage.shard_info import ShardRecord
from .base import Column, OutputFormat, commit, register, temp_file

NAMES = ("input_ids", "loss_mask", "seq_start_id")


def _flat(column, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of a ragged or fixed-length column."""
    if isinstance(column, Ragged):
        return np.asarray(column.values), np.asarray(column.offsets, dtype=np.int64)
    width = column.shape[1] if column.ndim == 2 else 1
    return column.reshape(-1), np.arange(rows + 1, dtype=np.int64) * width


def packed_sft_rows(rows: RowBatch) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The three columns (values, row offsets) of a batch of objcli rows (see the module)."""
    count = len(rows.tokens)
    if "seq_start_id" in rows.columns:  # rows of this layout already (reshard, merge): as they are
        return {name: _flat(rows.columns[name], count) for name in NAMES}
    ids, offsets = _flat(rows.columns["input_ids"], count)
    row_of = np.repeat(np.arange(count), np.diff(offsets))
    segments = _flat(rows.columns["segment_ids"], count)[0] if "segment_ids" in rows.columns else row_of + 1
    kept = segments > 0  # segment 0 is padding
    ids, segments, row_of = ids[kept], segments[kept], row_of[kept]
    labels = _flat(rows.columns["labels"], count)[0][kept] if "labels" in rows.columns else None
    new_offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of, minlength=count), out=new_offsets[1:])
    position = np.arange(len(ids)) - new_offsets[row_of]
    same_next = np.zeros(len(ids), dtype=bool)  # the next token is in this token's sequence
    same_next[:-1] = (row_of[1:] == row_of[:-1]) & (segments[1:] == segments[:-1])
    learned = same_next.copy()
    if labels is not None:
        learned[:-1] &= labels[1:] != IGNORE
    starts = np.flatnonzero((position == 0) | np.concatenate([[True], segments[1:] != segments[:-1]]))
    start_offsets = np.searchsorted(starts, new_offsets)
    return {
        "input_ids": (ids.astype(np.int32), new_offsets),
        "loss_mask": (learned.astype(np.int8), new_offsets),
        "seq_start_id": (position[starts].astype(np.int32), start_offsets.astype(np.int64)),
    }


class NemoPackedWriter:
    suffix = ".idx.parquet"
    drops_padding = True  # a row's sequences back to back: the packer's padding is not written

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        self.schema = pa.schema([(name, pa.list_(pa.int8() if name == "loss_mask" else pa.int32())) for name in NAMES])
        self.temp = temp_file(base, self.suffix)
        self.writer = pq.ParquetWriter(self.temp, self.schema, compression="zstd")

    def write(self, rows: RowBatch) -> None:
        from ._arrow_columns import int_array

        pa, arrays = self.pa, []
        for values, offsets in packed_sft_rows(rows).values():
            child = int_array(values, values.dtype)
            arrays.append(
                pa.ListArray.from_buffers(
                    pa.list_(child.type),
                    len(offsets) - 1,
                    [None, pa.py_buffer(offsets.astype(np.int32))],
                    children=[child],
                )
            )
        self.writer.write_batch(pa.record_batch(arrays, schema=self.schema))

    def close(self) -> list[tuple[Path, str]]:
        self.writer.close()
        return [commit(self.temp)]


class NemoPackedFormat(OutputFormat):
    name = "nemo-packed"
    writer = NemoPackedWriter
    shifts_each_sequence = True
    help = (
        "NVIDIA's packed SFT Parquet (Megatron-Bridge GPTSFTPackedParquetDataset): input_ids, loss_mask, seq_start_id"
    )

    def refuses(self, objective, columns) -> str | None:
        """Only rows whose loss is on next tokens map onto the layout's mask (chat, clm): not rows whose loss
        compares a pair's sides (a column of role ``pair_side``: packed preference rows)."""
        compares_pairs = any(c.role == "pair_side" for c in columns)
        if objective.labels_are_inputs and objective.supervision == "labels" and not compares_pairs:
            return None
        if objective.next_token_rows and "labels" not in {c.name for c in objective.example_columns()}:
            return None
        return (
            f"--format {self.name} holds next-token rows (a loss mask on the next token), and "
            f"{objective.name}'s rows are not; use it with --objective chat or clm, or choose --format parquet"
        )

    def recorded_columns(self, columns: list[ColumnSpec]) -> list[ColumnInfo]:
        ids = next(c for c in columns if c.name == "input_ids")
        specs = [
            (ColumnSpec("input_ids", "ragged", ids.min_value, ids.max_value, ids.doc), np.int32, "list<item: int32>"),
            (
                ColumnSpec("loss_mask", "ragged", 0, 1, "whether the next token is learned", role="loss_mask"),
                np.int8,
                "list<item: int8>",
            ),
            (
                ColumnSpec(
                    "seq_start_id", "ragged", 0, 2**31 - 1, "where each sequence starts", role="sequence_starts"
                ),
                np.int32,
                "list<item: int32>",
            ),
        ]
        return [ColumnInfo.of(spec, np.dtype(dtype), arrow) for spec, dtype, arrow in specs]

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        from ._arrow_columns import read_parquet, table_columns

        return table_columns(read_parquet(folder / shard.files[0]), manifest.columns)


NEMO_PACKED = register(NemoPackedFormat())
