"""NumPy ``.npy`` files (``--format npy``), one per column per shard, for ``np.load(path, mmap_mode="r")``.

- fixed-length columns: a 2-D array ``(rows, seq_len)``;
- variable-length columns: a 1-D array of all values plus ``<column>.offsets.npy`` (int64,
  rows + 1 entries; row i is ``values[offsets[i]:offsets[i + 1]]``);
- scalar columns: a 1-D array.

dtype is uint16 when every possible value fits (ids below 65,500), else int16 or int32.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ..kernels.ragged import lengths_to_offsets
from ..rows import ColumnSpec, RowBatch
from ..storage.manifest import ColumnInfo, Manifest
from ..storage.shard_info import ShardRecord
from .base import Column, OutputFormat, arrow_type_name, commit, register, temp_file


class NpyWriter:
    suffix = ".npy"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        self.base = base
        self.columns = columns
        self.parts: dict[str, list] = {c.name: [] for c in columns}

    def write(self, rows: RowBatch) -> None:
        for spec in self.columns:
            self.parts[spec.name].append(rows.columns[spec.name])

    def _save(self, name: str, array: np.ndarray) -> tuple[Path, str]:
        temp = temp_file(self.base, f".{name}.npy")
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


class NpyFormat(OutputFormat):
    name = "npy"
    writer = NpyWriter

    def recorded_columns(self, columns: list[ColumnSpec]) -> list[ColumnInfo]:
        # A .npy file of fixed rows is 2-D: its shape says their length, and the manifest names the
        # columns as outputs before fixed-size lists did (an append to one of those still matches).
        return [ColumnInfo.of(c, c.disk_dtype(), arrow_type_name(c)) for c in (replace(c, length=0) for c in columns)]

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        prefix = shard.files[0].split(".")[0]
        columns = {}
        for spec in manifest.columns:
            values = np.load(folder / f"{prefix}.{spec.name}.npy", mmap_mode="r")
            if str(values.dtype) != spec.disk_dtype:
                raise ValueError(f"{spec.name} has dtype {values.dtype}, the manifest says {spec.disk_dtype}")
            if spec.kind == "ragged":
                offsets = np.load(folder / f"{prefix}.{spec.name}.offsets.npy").astype(np.int64)
                columns[spec.name] = Column(values, offsets)
            else:
                columns[spec.name] = Column.of_rows(values)
        return columns


NPY = register(NpyFormat())
