"""Megatron-LM indexed dataset: ``.bin`` + ``.idx`` (REFERENCE §11).

``.bin`` holds every sequence's tokens back to back, little-endian, no header. ``.idx``:

    offset      size      field
    0           9         magic b"MMIDIDX\\x00\\x00"
    9           8         uint64 version = 1
    17          1         uint8 dtype code (8 = uint16, 4 = int32)
    18          8         uint64 sequence count S
    26          8         uint64 document-index length S + 1
    34          4*S       int32 sequence lengths
    34 + 4S     8*S       int64 byte offset of each sequence in .bin (first 0)
    34 + 12S    8*(S+1)   int64 document boundaries: 0, 1, ..., S (one sequence per document)

Only ``input_ids`` is written: one sequence per row, in files named as Megatron's own
``preprocess_data.py`` names them, ``{prefix}_input_ids_document.bin/.idx``. With ``--packing none``
(the default for this format) a row is a whole document, never cut at ``--seq-len``, with its one
EOS: what Megatron-LM's ``GPTDataset`` expects (it shuffles documents, packs and builds positions
itself). ``--packing concat`` writes packed rows as sequences instead.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.megatron_layout import DOCUMENT_SUFFIX, MAGIC
from .base import TEMP_SUFFIX, HashingFile, commit

DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}


class MegatronWriter:
    suffix = ".bin"

    @staticmethod
    def stored_columns(columns: list[ColumnSpec]) -> list[tuple[ColumnSpec, np.dtype]]:
        """Only the tokens: Megatron rebuilds positions and document boundaries itself."""
        spec = next(c for c in columns if c.name == "input_ids")
        return [(spec, spec.disk_dtype() if spec.disk_dtype() in DTYPE_CODES else np.dtype(np.int32))]

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        self.dtype = self.stored_columns(columns)[0][1]
        name = base.name + DOCUMENT_SUFFIX  # Megatron's own naming: {prefix}_{key}_document.bin/.idx
        self.bin = HashingFile(base.with_name(name + ".bin" + TEMP_SUFFIX))
        self.idx = HashingFile(base.with_name(name + ".idx" + TEMP_SUFFIX))
        self.lengths: list[np.ndarray] = []

    def write(self, rows: RowBatch) -> None:
        column = rows.columns["input_ids"]
        if isinstance(column, Ragged):
            values, lengths = column.values, np.diff(column.offsets)
        else:
            values, lengths = column.reshape(-1), np.full(len(column), column.shape[1], dtype=np.int64)
        self.bin.write(values.astype(self.dtype.newbyteorder("<")).tobytes())
        self.lengths.append(lengths.astype(np.int64))

    def close(self) -> list[tuple[Path, str]]:
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, dtype=np.int64)
        count = len(lengths)
        byte_offsets = np.zeros(count, dtype=np.int64)
        np.cumsum(lengths[:-1] * self.dtype.itemsize, out=byte_offsets[1:])
        header = MAGIC + struct.pack("<QBQQ", 1, DTYPE_CODES[self.dtype], count, count + 1)
        self.idx.write(header)
        self.idx.write(lengths.astype("<i4").tobytes())
        self.idx.write(byte_offsets.astype("<i8").tobytes())
        self.idx.write(np.arange(count + 1, dtype="<i8").tobytes())
        return [commit(self.bin), commit(self.idx)]
