"""NumPy ``.npy`` files, one per column per shard, for ``np.load(path, mmap_mode="r")``.

- fixed-length columns: a 2-D array ``(rows, seq_len)``;
- variable-length columns: a 1-D array of all values plus ``<column>.offsets.npy`` (int64,
  rows + 1 entries; row i is ``values[offsets[i]:offsets[i + 1]]``);
- scalar columns: a 1-D array.

dtype is uint16 when every possible value fits (ids below 65,500), else int16 or int32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..kernels.ragged import lengths_to_offsets
from ..rows import ColumnSpec, RowBatch
from .base import TEMP_SUFFIX, HashingFile, commit


class NpyWriter:
    suffix = ".npy"

    @staticmethod
    def stored_columns(columns: list[ColumnSpec]) -> list[tuple[ColumnSpec, np.dtype]]:
        return [(c, c.disk_dtype()) for c in columns]

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        self.base = base
        self.columns = columns
        self.parts: dict[str, list] = {c.name: [] for c in columns}

    def write(self, rows: RowBatch) -> None:
        for spec in self.columns:
            self.parts[spec.name].append(rows.columns[spec.name])

    def _save(self, name: str, array: np.ndarray) -> tuple[Path, str]:
        temp = HashingFile(self.base.with_name(f"{self.base.name}.{name}.npy{TEMP_SUFFIX}"))
        np.save(temp, array, allow_pickle=False)
        return commit(temp)

    def close(self) -> list[tuple[Path, str]]:
        files = []
        for spec in self.columns:
            parts = self.parts[spec.name]
            dtype = spec.disk_dtype()
            if spec.kind == "ragged":
                values = np.concatenate([p.values for p in parts]).astype(dtype)
                lengths = np.concatenate([np.diff(p.offsets) for p in parts])
                files.append(self._save(spec.name, values))
                files.append(self._save(f"{spec.name}.offsets", lengths_to_offsets(lengths)))
            else:
                files.append(self._save(spec.name, np.concatenate(parts).astype(dtype)))
        return files


