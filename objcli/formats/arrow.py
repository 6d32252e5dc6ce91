"""Arrow IPC stream files (``--format arrow``, ``--format hf``): one record batch per chunk of rows.

Hugging Face ``datasets`` memory-maps these with ``Dataset.from_file`` (REFERENCE §12);
``pyarrow.ipc.open_stream`` reads them anywhere. ``hf`` writes the same shards and, beside them, what
``datasets.load_from_disk`` opens: ``state.json`` and ``dataset_info.json`` (features declared), or with
``--split`` the layout of ``DatasetDict.save_to_disk``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from ..rows import ColumnSpec, RowBatch, fold_value_type
from ..storage.manifest import ColumnInfo, Manifest
from ..storage.shard_info import ShardRecord
from .base import Column, OutputFormat, class_label, commit, register, temp_file

HF_FILES = ("state.json", "dataset_info.json")  # --format hf: what datasets.load_from_disk reads
HF_DATASET_DICT = "dataset_dict.json"  # --format hf --split: the splits, each a folder with HF_FILES


class ArrowWriter:
    suffix = ".arrow"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        import pyarrow as pa  # here, not at the top: only a run that writes Arrow pays for pyarrow

        from ._arrow_columns import arrow_schema, to_record_batch

        self.columns = columns
        self.to_record_batch = to_record_batch
        self.temp = temp_file(base, self.suffix)
        self.writer = pa.ipc.new_stream(pa.PythonFile(self.temp, mode="w"), self._schema(arrow_schema(columns)))

    def _schema(self, schema):
        return schema

    def write(self, rows: RowBatch) -> None:
        self.writer.write_batch(self.to_record_batch(rows, self.columns))

    def close(self) -> list[tuple[Path, str]]:
        self.writer.close()
        return [commit(self.temp)]


BOOKKEEPING = ("__tokens", "__padding", "__documents")  # RowBatch's per-row counts, by name


class RowsToShuffle(ArrowWriter):
    """``--shuffle-rows``, first pass: a partition's rows in order, as Arrow work files that also
    keep each row's bookkeeping (the counts the manifest sums), for the shuffle to move with it."""

    keeps_hidden = True  # with --provenance, the rows' spans too (formats/provenance.py), not a file of their own

    def _schema(self, schema):
        import pyarrow as pa

        for name in BOOKKEEPING:
            schema = schema.append(pa.field(name, pa.int64(), nullable=False))
        self.schema = schema
        return schema

    def write(self, rows: RowBatch) -> None:
        import numpy as np
        import pyarrow as pa

        from ._arrow_columns import int_array

        batch = self.to_record_batch(rows, self.columns)
        counts = [int_array(c, np.int64) for c in (rows.tokens, rows.padding, rows.documents)]
        self.writer.write_batch(pa.RecordBatch.from_arrays([*batch.columns, *counts], schema=self.schema))


def read_arrow_table(path: Path):
    import pyarrow as pa

    return pa.ipc.open_stream(pa.memory_map(str(path))).read_all()


class ArrowFormat(OutputFormat):
    stores_values = True
    name = "arrow"
    writer = ArrowWriter
    streams_to_stdout = True
    hub_loadable = True
    arrow_stream = True

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        from ._arrow_columns import table_columns

        return table_columns(read_arrow_table(folder / shard.files[0]), manifest.columns)


class HfFormat(ArrowFormat):
    name = "hf"
    streams_to_stdout = False
    side_file_pattern = r"state\.json|dataset_info\.json|dataset_dict\.json"

    def refuses_splits(self, remote: bool) -> str | None:
        if remote:
            return (
                "load_from_disk copies one split's folder from object storage, without the shards beside it; "
                "use --format arrow there (load_dataset reads its splits by name)"
            )
        return None

    def side_files(self, shards: list, columns: list[ColumnInfo], config_sha256: str, blend=None) -> dict[str, str]:
        splits = list(dict.fromkeys(s.split for s in shards))
        if splits in ([], [""]):
            return dict(zip(HF_FILES, saved_dataset(shards, columns, config_sha256)))
        return saved_dataset_dict(splits, shards, columns, config_sha256)

    def split_folder_files(self, splits: list[str]) -> list[str]:
        return [f"{split}/{name}" for split in splits for name in HF_FILES] if splits else []

    def remove_side_folders(self, place) -> None:
        """The split folders of an output with splits (their two files, then the folder if that left it
        empty): named by its ``dataset_dict.json``."""
        listing = place.read_json(HF_DATASET_DICT)
        for split in (listing or {}).get("splits", []) if isinstance(listing, dict) else []:
            if not isinstance(split, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", split):
                continue  # never a path: a name objcli could have written
            for name in HF_FILES:
                place.delete(f"{split}/{name}")
            place.remove_empty_folder(split)


def saved_dataset_dict(splits: list[str], shards, columns, config_sha256: str) -> dict[str, str]:
    """``DatasetDict.save_to_disk``'s layout over objcli's shards: ``dataset_dict.json`` naming the
    splits, and a folder per split holding its ``state.json`` and ``dataset_info.json``, whose data
    files are the split's shards beside the folder (``../train-00000-of-00002.arrow``: datasets joins
    the name to the split's folder), so ``load_from_disk(OUT)`` returns a ``DatasetDict``."""
    files = {HF_DATASET_DICT: json.dumps({"splits": splits}) + "\n"}
    for split in splits:
        state, info = saved_dataset([s for s in shards if s.split == split], columns, config_sha256 + split, "../")
        files[f"{split}/{HF_FILES[0]}"], files[f"{split}/{HF_FILES[1]}"] = state, info
    return files


def _value_feature(value_type) -> dict:
    """A value column's type as ``datasets`` declares features (JSON kept tuples as lists)."""
    return fold_value_type(
        value_type,
        lambda name: {"dtype": name, "_type": "Value"},
        lambda item: {"feature": item, "_type": "List"},
        dict,
    )


def _feature(column) -> dict:
    if column.kind == "value":
        return _value_feature(column.value_type)
    if class_label(column):  # datasets shows each row's name (features["source"].int2str)
        return {"names": list(column.categories), "_type": "ClassLabel"}
    value = {"dtype": getattr(column, "disk_dtype", "int32"), "_type": "Value"}  # its width (uint16, …)
    if column.kind == "scalar":
        return value
    # "Sequence" is read by every datasets release (5.x reads it as List); a length, a fixed-size list.
    length = {"length": column.length} if getattr(column, "length", 0) else {}
    return {"feature": value, **length, "_type": "Sequence"}


def saved_dataset(shards, columns, config_sha256: str, folder: str = "") -> tuple[str, str]:
    """(state.json, dataset_info.json) as ``Dataset.save_to_disk`` writes them, over objcli's shards
    (``folder``: where the shards are from the state file's folder)."""
    files = [{"filename": folder + shard.files[0]} for shard in shards]
    state = {
        "_data_files": files,
        "_fingerprint": hashlib.sha256(config_sha256.encode()).hexdigest()[:16],
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    info = {
        "citation": "",
        "description": "written by objcli; see manifest.json",
        "features": {c.name: _feature(c) for c in columns},
        "homepage": "",
        "license": "",
    }
    return json.dumps(state, indent=2) + "\n", json.dumps(info, indent=2) + "\n"


ARROW = register(ArrowFormat())
HF = register(HfFormat())
