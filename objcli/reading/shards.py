"""Reading a finished output back, shard by shard or row by row, whatever its format: every command
that reads shards (verify, inspect, stats, reshard, merge's checks) goes through ``stored_columns``:
the format's own ``read_columns``, or a plan's rows made (``plan_rows.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..formats import format_of
from ..formats.base import Column
from ..storage.manifest import Manifest, read_manifest
from ..storage.shard_info import ShardRecord

READ_ERRORS = (OSError, ValueError, EOFError)  # pyarrow's ArrowInvalid is a ValueError


def unreadable(folder: Path, name: str, error: Exception) -> ObjcliError:
    """A damaged shard, as stats and inspect report it (verify names every problem)."""
    detail = str(error).splitlines()[0] if str(error) else type(error).__name__
    return ObjcliError(
        f"{folder / name}: cannot be read ({detail}); run 'objcli verify {folder}', then rebuild with --overwrite"
    )


def stored_columns(
    folder: Path, manifest: Manifest, shard: ShardRecord, tokenizer: str | None = None
) -> dict[str, Column]:
    """One shard's columns: as its format stores them, or a plan's rows made from its store (with
    ``tokenizer``, the run's tokenizer's new path where it moved); ``ValueError`` or ``OSError`` when the
    files disagree with the manifest."""
    if format_of(manifest.format).packs_positions:
        from .plan_rows import plan_of

        return plan_of(folder, manifest, tokenizer).shard_columns(shard)
    return format_of(manifest.format).read_columns(folder, manifest, shard)


def shard_columns(
    folder: Path, manifest: Manifest, shard: ShardRecord, tokenizer: str | None = None
) -> dict[str, Column]:
    """One shard's columns as stored (flat values + row offsets); a damaged shard is one line."""
    first = folder / shard.files[0]
    if not first.exists():
        raise ObjcliError(f"{first}: listed in the manifest but missing; rerun the transform")
    try:
        return stored_columns(folder, manifest, shard, tokenizer)
    except READ_ERRORS as error:
        raise unreadable(folder, shard.files[0], error) from None


def read_shard_columns(folder: Path, manifest: Manifest, shard: ShardRecord) -> dict:
    """One shard's columns as arrays: fixed-length columns 2-D, ragged as (values, offsets), scalars and
    value columns 1-D (a value column's of Python objects)."""
    kinds = {c.name: c.kind for c in manifest.columns}
    columns = {}
    for name, column in shard_columns(folder, manifest, shard).items():
        if kinds[name] in ("scalar", "value"):
            columns[name] = column.values
        elif kinds[name] == "fixed" and shard.rows:
            columns[name] = column.values.reshape(shard.rows, -1)
        else:
            columns[name] = (column.values, column.offsets)
    return columns


def iter_rows(
    folder: str | Path, manifest: Manifest | None = None, tokenizer: str | None = None
) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """(shard file, row) for every row of a finished output, in order (``tokenizer``: as ``stored_columns``)."""
    folder = Path(folder)
    manifest = manifest or read_manifest(folder)
    scalars = {c.name for c in manifest.columns if c.kind in ("scalar", "value")}
    for shard in manifest.shards:
        columns = shard_columns(folder, manifest, shard, tokenizer)
        for row in range(shard.rows):
            yield (
                shard.files[0],
                {
                    name: (c.values[row] if name in scalars else c.values[c.offsets[row] : c.offsets[row + 1]])
                    for name, c in columns.items()
                },
            )
