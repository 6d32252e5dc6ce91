"""Reading a finished output folder back, row by row, whatever its format."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..writers.flat import FLAT_FORMATS, read_flat
from .arrow_numpy import list_parts, numpy_of
from .manifest import Manifest, ShardRecord, read_manifest


def _arrow_batches(path: Path):
    import pyarrow as pa

    with pa.ipc.open_stream(pa.memory_map(str(path))) as reader:
        yield from reader


def _parquet_batches(path: Path):
    import pyarrow.parquet as pq

    yield from pq.ParquetFile(path).iter_batches()


def _rows_from_batches(batches) -> Iterator[dict[str, np.ndarray]]:
    for batch in batches:
        columns = {}
        for name, column in zip(batch.schema.names, batch.columns):
            if hasattr(column, "offsets"):
                values, offsets = list_parts(column)
                columns[name] = [values[offsets[i] : offsets[i + 1]] for i in range(len(column))]
            else:
                columns[name] = numpy_of(column)
        for i in range(batch.num_rows):
            yield {name: col[i] for name, col in columns.items()}


def _npy_rows(folder: Path, shard: ShardRecord, manifest: Manifest) -> Iterator[dict[str, np.ndarray]]:
    prefix = shard.files[0].split(".")[0]
    arrays = {}
    for column in manifest.columns:
        name = column.name
        values = np.load(folder / f"{prefix}.{name}.npy", mmap_mode="r")
        if column.kind == "ragged":
            offsets = np.load(folder / f"{prefix}.{name}.offsets.npy")
            arrays[name] = [values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
        else:
            arrays[name] = values
    for i in range(shard.rows):
        yield {name: np.asarray(a[i]) for name, a in arrays.items()}


MEGATRON_DTYPES = {8: np.uint16, 4: np.int32}  # Megatron-LM's dtype codes that objcli writes


def read_megatron_index(path: Path) -> tuple[np.dtype, np.ndarray, np.ndarray]:
    """(token dtype, sequence lengths, byte pointers) of a Megatron ``.idx`` file (``MMIDIDX``
    version 1); ``ValueError`` when the header is not one."""
    idx = path.read_bytes()
    if idx[:9] != b"MMIDIDX\x00\x00":
        raise ValueError("the .idx file lacks the MMIDIDX header")
    dtype = MEGATRON_DTYPES.get(idx[17])
    if dtype is None:
        raise ValueError(f".idx dtype code {idx[17]} is not one objcli writes (uint16: 8, int32: 4)")
    count = int(np.frombuffer(idx, "<u8", 1, 18)[0])
    lengths = np.frombuffer(idx, "<i4", count, 34).astype(np.int64)
    pointers = np.frombuffer(idx, "<i8", count, 34 + 4 * count)
    return np.dtype(dtype), lengths, pointers


def read_table(path: Path, fmt: str):
    """A whole Arrow or Parquet shard as a ``pyarrow.Table``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.read_table(path) if fmt == "parquet" else pa.ipc.open_stream(pa.memory_map(str(path))).read_all()


def read_token_stream(folder: Path, shard: ShardRecord, manifest: Manifest) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, row offsets) of a shard of Megatron's or a flat format, checked against its own index
    and the dtype the manifest states."""
    disk_dtype = manifest.columns[0].disk_dtype
    if manifest.format in FLAT_FORMATS:
        values, offsets = read_flat(folder, shard.files, manifest.format, disk_dtype)
    else:
        prefix = shard.files[0].removesuffix(".bin")
        dtype, lengths, pointers = read_megatron_index(folder / f"{prefix}.idx")
        if dtype.name != disk_dtype:
            raise ValueError(f".idx holds {dtype.name} tokens, the manifest says {disk_dtype}")
        values = np.fromfile(folder / f"{prefix}.bin", dtype=dtype)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        if not np.array_equal(pointers, offsets[:-1] * dtype.itemsize):
            raise ValueError(".idx lengths and pointers do not describe the .bin file")
    if len(values) != offsets[-1]:
        raise ValueError(f"the index describes {int(offsets[-1]):,} tokens, the file holds {len(values):,}")
    return values, offsets


def _stream_rows(folder: Path, shard: ShardRecord, manifest: Manifest) -> Iterator[dict[str, np.ndarray]]:
    values, offsets = read_token_stream(folder, shard, manifest)
    for start, end in zip(offsets[:-1], offsets[1:]):
        yield {"input_ids": values[start:end]}


def unreadable(folder: Path, name: str, error: Exception) -> ObjcliError:
    """A damaged shard, as stats and inspect report it (verify names every problem)."""
    detail = str(error).splitlines()[0] if str(error) else type(error).__name__
    return ObjcliError(f"{folder / name}: cannot be read ({detail}); run 'objcli verify {folder}', then rebuild with --overwrite")


READ_ERRORS = (OSError, ValueError, EOFError)  # pyarrow's ArrowInvalid is a ValueError


def iter_rows(folder: str | Path, manifest: Manifest | None = None) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """(shard file, row) for every row of a finished output, in order."""
    folder = Path(folder)
    manifest = manifest or read_manifest(folder)
    fmt = manifest.format
    for shard in manifest.shards:
        first = shard.files[0]
        if not (folder / first).exists():
            raise ObjcliError(f"{folder / first}: listed in the manifest but missing; rerun the transform")
        if fmt in ("arrow", "hf"):
            rows = _rows_from_batches(_arrow_batches(folder / first))
        elif fmt == "parquet":
            rows = _rows_from_batches(_parquet_batches(folder / first))
        elif fmt == "npy":
            rows = _npy_rows(folder, shard, manifest)
        else:
            rows = _stream_rows(folder, shard, manifest)
        try:
            for row in rows:
                yield first, row
        except READ_ERRORS as error:
            raise unreadable(folder, first, error) from None


def read_shard_columns(folder: Path, manifest: Manifest, shard: ShardRecord) -> dict:
    try:
        return _read_shard_columns(folder, manifest, shard)
    except READ_ERRORS as error:
        raise unreadable(folder, shard.files[0], error) from None


def _read_shard_columns(folder: Path, manifest: Manifest, shard: ShardRecord) -> dict:
    """Columns of one shard: fixed-length columns as 2-D arrays, ragged as (values, offsets),
    scalars as 1-D arrays."""
    fmt, kinds = manifest.format, {c.name: c.kind for c in manifest.columns}
    first = folder / shard.files[0]
    if fmt in ("arrow", "hf", "parquet"):
        table = read_table(first, fmt)
        columns = {}
        for name in table.column_names:
            column = table.column(name).combine_chunks()
            if kinds[name] == "scalar":
                columns[name] = numpy_of(column)
                continue
            values, offsets = list_parts(column)
            offsets = offsets.astype(np.int64)
            columns[name] = values.reshape(len(column), -1) if kinds[name] == "fixed" and len(column) else (values, offsets)
        return columns
    if fmt == "npy":
        prefix = shard.files[0].split(".")[0]
        columns = {}
        for name, kind in kinds.items():
            values = np.load(folder / f"{prefix}.{name}.npy", mmap_mode="r")
            columns[name] = (values, np.load(folder / f"{prefix}.{name}.offsets.npy")) if kind == "ragged" else values
        return columns
    return {"input_ids": read_token_stream(folder, shard, manifest)}  # Megatron, flat: input_ids end to end
