"""Rows to Arrow arrays and back, for the Arrow and Parquet formats and the row shuffle's work files.

Arrow arrays are read as NumPy views without pyarrow's ``to_numpy``, which imports pandas (200 ms on
every ``stats``, ``verify``, ``inspect``, ``reshard`` and ``--shuffle-rows``) to answer the same
question. Imported only where Arrow is written or read: pyarrow is 25 ms of a command's start-up."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from ..rows import ColumnSpec, Ragged, RowBatch, fold_value_type
from ..storage.manifest import ColumnInfo
from .base import Column, arrow_width

_WIDTHS = {
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
}


def numpy_of(array) -> np.ndarray:
    """A fixed-width integer Arrow array with no nulls as a read-only NumPy view of its buffer (a
    boolean one unpacked from its bits); anything else through pyarrow."""
    if pa.types.is_boolean(array.type) and not array.null_count:
        bits = np.unpackbits(np.frombuffer(array.buffers()[1], np.uint8), bitorder="little")
        return bits[array.offset : array.offset + len(array)].astype(bool)
    dtype = _WIDTHS.get(str(array.type))
    if dtype is None or array.null_count:
        return array.to_numpy(zero_copy_only=False)
    item = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * item)


def list_parts(column) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of a list array, values as stored (offsets may not start at 0 in a slice); a
    fixed-size list's offsets are those its rows' one length makes (int64)."""
    if pa.types.is_fixed_size_list(column.type):
        size = column.type.list_size
        return numpy_of(column.values), (np.arange(len(column) + 1, dtype=np.int64) + column.offset) * size
    return numpy_of(column.values), numpy_of(column.offsets)


def single_array(column) -> pa.Array:
    """A table's column (chunked) as one array: its only chunk as it is, chunks joined, or, for a
    column of no chunks (an empty Parquet file's), an empty array of its type: built from buffers
    for integers, booleans and lists of them (``combine_chunks`` of no chunks imports pandas)."""
    kind = column.type
    if column.num_chunks == 1:
        return column.chunk(0)
    if column.num_chunks or not (pa.types.is_integer(kind) or pa.types.is_boolean(kind) or _is_list(kind)):
        return column.combine_chunks()
    if _is_list(kind):
        values = single_array(pa.chunked_array([], type=kind.value_type))
        if pa.types.is_fixed_size_list(kind):
            return pa.FixedSizeListArray.from_arrays(values, kind.list_size)
        width = np.int64 if pa.types.is_large_list(kind) else np.int32
        lists = pa.LargeListArray if pa.types.is_large_list(kind) else pa.ListArray
        return lists.from_arrays(int_array(np.zeros(1, width), width), values)
    return pa.Array.from_buffers(kind, 0, [None, pa.py_buffer(b"")])


def _is_list(kind) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def column_numpy(column) -> np.ndarray:
    """A table's integer or boolean column (chunked) as NumPy: a view of its buffer when it is one chunk."""
    return numpy_of(single_array(column))


def list_ragged(array) -> tuple[np.ndarray, np.ndarray]:
    """(values, int64 offsets from 0) of a list array's rows: only the values its rows hold (a slice's
    list array keeps its parent's values and offsets)."""
    values, offsets = list_parts(array)
    offsets = offsets.astype(np.int64)
    return values[offsets[0] : offsets[-1]], offsets - offsets[0]


class MissingColumn(ValueError):
    """A Parquet file lacks a column asked for (``ParquetFile.read`` would leave it out silently)."""


def read_parquet(path, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file's table (``pq.read_table`` goes through pyarrow.dataset, which imports pandas:
    0.3 s of CPU in every process that reads one). A column the file lacks is a ``MissingColumn``."""
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    missing = [c for c in columns or () if c not in file.schema_arrow.names]
    if missing:
        raise MissingColumn(f"no column {missing[0]!r}")
    return file.read(columns=columns)


def value_arrow_type(value_type) -> pa.DataType:
    """A value column's Arrow type (``rows.ColumnSpec.value_type``; lists where JSON kept tuples)."""
    leaves = {
        "string": pa.string(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "null": pa.null(),
    }
    return fold_value_type(
        value_type, leaves.__getitem__, pa.list_, lambda fields: pa.struct([pa.field(n, t) for n, t in fields])
    )


def arrow_schema(columns: list[ColumnSpec]) -> pa.Schema:
    """Integer lists for token-like columns at their values' width (fixed-size lists where the run fixes
    a row's length: no offsets), integer scalars; a value column its own type (its rows may be null: a
    record without a margin)."""
    fields = []
    for c in columns:
        if c.kind == "value":
            fields.append(pa.field(c.name, value_arrow_type(c.value_type)))
            continue
        value = pa.from_numpy_dtype(arrow_width(c))
        listed = pa.list_(value, c.length) if c.length else pa.list_(value)
        fields.append(pa.field(c.name, value if c.kind == "scalar" else listed, nullable=False))
    return pa.schema(fields)


def int_array(values: np.ndarray, dtype=np.int32) -> pa.Array:
    # Built from the buffer directly: no copy, and no detour through pyarrow's pandas shim.
    values = np.ascontiguousarray(values, dtype=dtype)
    if values.dtype == np.bool_:  # Arrow keeps booleans as bits
        return pa.Array.from_buffers(
            pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(values, bitorder="little"))]
        )
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def string_array(texts: list[str]) -> pa.Array:
    """Strings from their UTF-8 bytes and offsets (``pa.array`` of a list imports pandas: 0.2 s)."""
    encoded = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return pa.Array.from_buffers(
        pa.string(), len(texts), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


def to_arrow(column, dtype=np.int32) -> pa.Array:
    if isinstance(column, Ragged):
        values, offsets = column.values, column.offsets
    elif column.ndim == 2:
        rows, length = column.shape
        values = column.reshape(-1)
        offsets = np.arange(0, rows * length + 1, length, dtype=np.int64)
    else:
        return int_array(column, dtype)
    offsets = np.ascontiguousarray(offsets, dtype=np.int32)
    child = int_array(values, dtype)
    return pa.ListArray.from_buffers(
        pa.list_(child.type), len(offsets) - 1, [None, pa.py_buffer(offsets)], children=[child]
    )


def fixed_rows(column, spec: ColumnSpec) -> pa.Array:
    """A fixed column's rows as a fixed-size list of ``spec.length`` values each, from a 2-D array or
    from ragged rows that are all that long; rows of another length are a bug in the step that made them."""
    if isinstance(column, Ragged):
        lengths = np.diff(column.offsets)
        values, widths = column.values[column.offsets[0] : column.offsets[-1]], lengths[lengths != spec.length]
    else:
        values, widths = column.reshape(-1), column.shape[1:] if len(column) else ()
    width = int(widths[0]) if len(widths) else spec.length
    if width != spec.length:
        raise ValueError(f"column {spec.name}: rows of {width} values where the run declared {spec.length}")
    return pa.FixedSizeListArray.from_arrays(int_array(values, arrow_width(spec)), spec.length)


def to_record_batch(rows: RowBatch, columns: list[ColumnSpec]) -> pa.RecordBatch:
    arrays = [
        pa.array(rows.columns[c.name].tolist(), value_arrow_type(c.value_type))
        if c.kind == "value"
        else fixed_rows(rows.columns[c.name], c)
        if c.length
        else to_arrow(rows.columns[c.name], arrow_width(c))
        for c in columns
    ]
    return pa.record_batch(arrays, schema=arrow_schema(columns))


def table_columns(table: pa.Table, specs: list[ColumnInfo]) -> dict[str, Column]:
    """An Arrow or Parquet shard's columns, checked against the manifest's schema."""
    # Parquet names a list's values "element", Arrow "item": compare the types, not the names.
    # At any depth (a list inside a record, a value column's), so both sides are written without the names.
    expected = [(c.name, re.sub(r"list<\w+: ", "list<", c.arrow_type)) for c in specs]
    found = [(f.name, re.sub(r"list<\w+: ", "list<", str(f.type))) for f in table.schema]
    if found != expected:
        raise ValueError(f"schema {found} is not the manifest's {expected}")
    columns = {}
    for spec in specs:
        array = table.column(spec.name).combine_chunks()
        if spec.kind == "value":
            values = np.empty(len(array), dtype=object)
            values[:] = array.to_pylist()
            columns[spec.name] = Column(values, np.arange(len(array) + 1, dtype=np.int64))
        elif spec.kind == "scalar":
            columns[spec.name] = Column.of_rows(_widened(numpy_of(array)))
        else:
            values, offsets = list_parts(array)
            columns[spec.name] = Column(_widened(values), offsets.astype(np.int64))
    return columns


def _widened(values: np.ndarray) -> np.ndarray:
    """Narrow integers as the commands compute with them (int32: no unsigned wrap-around in a difference);
    the writers narrow them again, so a rewritten row keeps its bytes."""
    return values.astype(np.int32) if values.dtype.kind in "iu" and values.dtype.itemsize < 4 else values
