"""``--provenance``: where every segment of every row comes from, in a Parquet file beside each shard.

Rows carry it as hidden ragged columns (``__p_*``, one entry per source span of a segment) through
the packers, the row step, the splits, the row shuffle's work files and reshard, so it moves with
its row wherever the row goes; the shard's sink writes it, one table row per span:

=============  =======  ===========================================================================
column         type     what
=============  =======  ===========================================================================
``row``        int64    the row, counted in the shard
``segment``    int32    the segment of the row (0-based), as ``segment_ids`` - 1 numbers them
``file``       string   the input file, as the manifest names it
``record``     int64    the record's index in the file (0-based line of JSON lines or text, row of
                        Parquet, element of a JSON array, the line a paragraph starts on)
``start``      int64    the span's first character in the record's text
``end``        int64    one past its last character
``copy``       int32    with a mixture that repeats a source, which copy of the document (0: first)
=============  =======  ===========================================================================

The file is named ``<shard>.provenance`` (``part-00000-of-00004.provenance``): it ends the shard's
``files`` in the manifest (sha256 checked by ``verify``, copied by merge, renamed by append), and no
loader of any format picks it up (none reads ``*.provenance``); DuckDB, pandas and pyarrow read it
as Parquet.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.shard_info import ShardRecord
from .base import commit, temp_file

SUFFIX = ".provenance"
FIELDS = ("segment", "file", "record", "start", "end", "copy")
COLUMNS = tuple(f"__p_{name}" for name in FIELDS)
# As the row shuffle's work files declare them (int64 lists: records and characters may pass int32).
SPECS = tuple(ColumnSpec(name, "ragged", 0, 2**62, "provenance", role="per_segment") for name in COLUMNS)


def provenance_file(shard: ShardRecord) -> str | None:
    """The shard's provenance file, if it has one."""
    return next((name for name in shard.files if name.endswith(SUFFIX)), None)


class ProvenanceWriter:
    """Gathers the spans of the rows written to one shard; ``close`` writes them as Parquet."""

    def __init__(self, base: Path, files: list[str]):
        self.base, self.files = base, files
        self.parts: list[dict[str, np.ndarray]] = []
        self.rows = 0

    def write(self, rows: RowBatch) -> None:
        offsets = rows.columns[COLUMNS[0]].offsets
        part = {"row": self.rows + np.repeat(np.arange(rows.num_rows, dtype=np.int64), np.diff(offsets))}
        for name, column in zip(FIELDS, COLUMNS):
            part[name] = np.asarray(rows.columns[column].values, dtype=np.int64)
        self.parts.append(part)
        self.rows += rows.num_rows

    def close(self) -> tuple[Path, str]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ._arrow_columns import int_array, string_array

        joined = {
            k: np.concatenate([p[k] for p in self.parts]) if self.parts else np.zeros(0, np.int64)
            for k in ("row", *FIELDS)
        }
        # From the buffers: pa.array of numbers or strings imports pandas (0.2 s of a run's CPU).
        columns = {k: int_array(joined[k], np.int32 if k in ("segment", "copy") else np.int64) for k in joined}
        columns["file"] = pa.DictionaryArray.from_arrays(int_array(joined["file"]), string_array(self.files))
        table = pa.table({name: columns[name] for name in ("row", *FIELDS)})
        temp = temp_file(self.base, SUFFIX)
        pq.write_table(table, temp, compression="zstd")
        return commit(temp)


def join_provenance(ranges: list[tuple[Path, int, int]], base: Path) -> tuple[Path, str]:
    """One provenance file for rows joined back to back (a Megatron join): each file's rows
    ``start:stop`` (a shard, or part of one), counted on from the rows before them. Returns (its path,
    its sha256)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ._arrow_columns import column_numpy, int_array, read_parquet

    tables, before = [], 0
    for path, start, stop in ranges:
        table = read_parquet(path)
        row = column_numpy(table.column("row"))
        lo, hi = np.searchsorted(row, [start, stop])  # a file's rows are in order (read_provenance checks)
        table = table.slice(int(lo), int(hi - lo))
        shifted = int_array(row[lo:hi] - start + before, np.int64)  # pyarrow.compute: pandas
        tables.append(table.set_column(table.schema.get_field_index("row"), "row", shifted))
        before += stop - start
    temp = temp_file(base, SUFFIX)
    pq.write_table(pa.concat_tables(tables).unify_dictionaries(), temp, compression="zstd")
    return commit(temp)


def read_provenance(path: Path, rows: int, files: list[str]) -> dict[str, Ragged]:
    """A provenance file as the hidden columns of its shard's ``rows`` rows, file names as indices into
    ``files`` (names not in it yet are added), so the columns can be written again under any shard."""
    from ._arrow_columns import column_numpy, numpy_of, read_parquet, single_array

    table = read_parquet(path)
    row = column_numpy(table.column("row"))
    if len(row) and (np.any(np.diff(row) < 0) or row[-1] >= rows):
        raise ValueError(f"{path.name}: rows out of order or past the shard's {rows}")
    offsets = np.searchsorted(row, np.arange(rows + 1)).astype(np.int64)
    names = single_array(table.column("file"))
    if len(names) and not hasattr(names, "dictionary"):
        names = names.dictionary_encode()
    index = {name: i for i, name in enumerate(files)}
    for name in names.dictionary.to_pylist() if len(names) else ():
        if name not in index:  # a merged output's file: named once more, for the shards written now
            index[name] = len(files)
            files.append(name)
    file_ids = np.zeros(0, np.int64)
    if len(names):
        known = np.array([index[name] for name in names.dictionary.to_pylist()], dtype=np.int64)
        file_ids = known[numpy_of(names.indices)]
    columns = {"__p_file": Ragged(file_ids, offsets)}
    for name in ("segment", "record", "start", "end", "copy"):
        columns[f"__p_{name}"] = Ragged(column_numpy(table.column(name)).astype(np.int64), offsets)
    return columns
