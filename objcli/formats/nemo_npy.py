"""NVIDIA's packed SFT layout as the released readers take it (``--format nemo-packed-npy``): Megatron-Bridge
0.3 (``GPTSFTPackedDataset``: ``packed_train_data_path`` must end in ``.npy``, read with
``np.load(allow_pickle=True)``) and NeMo 2's ``llm.gpt.data`` packed datasets. Each split is one ``.npy`` file,
a NumPy object array of dicts ``{"input_ids": [...], "loss_mask": [...], "seq_start_id": [...]}`` (what their
``fill_packing_strategy`` saves), and beside it the packing metadata their builder opens
(``pack_metadata_file_path``): a JSON list holding one dict of ``dataset_max_seqlen``, ``max_samples_per_bin``,
``packing_factor``, ``packing_efficiency``, ``pack_size`` and ``min_packed_seqlen``.

The rows are ``nemo-packed``'s (``nemo_packed.packed_sft_rows``: sequences back to back, no padding, the mask
on the labels); the partitions' shards are joined into one file per split when the run finishes (as many as
``--shard-size`` asks where it is given), as the released readers read one file. The files are pickles, as
those readers' are: load them only from outputs whose sha256 ``objcli verify`` checked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..rows import ColumnSpec, RowBatch
from ..storage.manifest import Manifest
from ..storage.shard_info import ShardRecord
from .base import Column, commit, register, temp_file
from .nemo_packed import NAMES, NemoPackedFormat, packed_sft_rows
from .provenance import join_provenance, provenance_file

METADATA_SUFFIX = "_metadata.jsonl"  # as Megatron-Bridge names it ({pack_size}_metadata.jsonl): JSON inside


def _records(columns: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[dict]:
    """One dict of Python lists a row, as the released packing writes them."""
    split = {name: np.split(values, offsets[1:-1]) for name, (values, offsets) in columns.items()}
    rows = len(columns["input_ids"][1]) - 1
    return [
        {
            "input_ids": split["input_ids"][k].tolist(),
            "loss_mask": split["loss_mask"][k].astype(bool).tolist(),
            "seq_start_id": split["seq_start_id"][k].tolist(),
        }
        for k in range(rows)
    ]


def packing_metadata(records: list[dict], pack_size: int) -> dict:
    """The released ``create_packing_strategy``'s metadata of these rows, in its units: a sequence's length
    is what the collate gives the model of it (its tokens less the last, ``create_hist``'s ``len - 1``), a
    row's packed length their sum (so the reader's ``max_seqlen`` covers the padding after the shortest)."""
    sequences = [np.diff([*row["seq_start_id"], len(row["input_ids"])]) - 1 for row in records]
    packed = [int(s.sum()) for s in sequences] or [0]
    count = sum(len(s) for s in sequences)
    return {
        "dataset_max_seqlen": int(max((int(s.max()) for s in sequences if len(s)), default=0)),
        "max_samples_per_bin": int(max((len(s) for s in sequences), default=0)),
        "packing_factor": round(count / max(len(records), 1), 2),
        "packing_efficiency": round(sum(packed) / max(len(records), 1) / max(pack_size, 1) * 100, 2),
        "pack_size": int(pack_size),
        "min_packed_seqlen": int(min(packed)),
    }


def write_npy(records: list[dict], base: Path, pack_size: int) -> list[tuple[Path, str]]:
    """The ``.npy`` of the rows and its metadata beside it, each committed (temp + rename)."""
    array = np.empty(len(records), dtype=object)
    array[:] = records
    npy = temp_file(base, ".npy")
    np.save(npy, array, allow_pickle=True)
    metadata = temp_file(base, METADATA_SUFFIX)
    metadata.write(json.dumps([packing_metadata(records, pack_size)]).encode())
    return [commit(npy), commit(metadata)]


def read_npy(path: Path) -> list[dict]:
    """The rows of an ``.npy`` as the released readers load it; ``ValueError`` for anything else."""
    import pickle

    try:
        array = np.load(path, allow_pickle=True)
    except (OSError, EOFError, pickle.UnpicklingError) as error:  # a damaged file
        raise ValueError(f"not a NumPy file of packed rows ({error})") from None
    if array.dtype != object or array.ndim != 1 or any(not isinstance(r, dict) for r in array):
        raise ValueError("not an object array of packed rows (dicts of input_ids, loss_mask, seq_start_id)")
    return list(array)


class NemoPackedNpyWriter:
    suffix = ".npy"
    drops_padding = True  # a row's sequences back to back: the packer's padding is not written

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        self.base = base
        ids = next(c for c in columns if c.name == "input_ids")
        self.pack_size = ids.length or 0  # --seq-len: the packed rows' length
        self.records: list[dict] = []

    def write(self, rows: RowBatch) -> None:
        self.records += _records(packed_sft_rows(rows))

    def close(self) -> list[tuple[Path, str]]:
        pack_size = self.pack_size or max((len(r["input_ids"]) for r in self.records), default=0)
        return write_npy(self.records, self.base, pack_size)


class NemoPackedNpyFormat(NemoPackedFormat):
    name = "nemo-packed-npy"
    writer = NemoPackedNpyWriter
    help = (
        "NVIDIA's packed SFT .npy as released Megatron-Bridge (0.3) and NeMo 2 read it, one file a split, "
        "with its packing metadata"
    )
    joins_shards = True  # the released readers take one file a split

    def join_limit(self, config):
        """One file a split, unless --shard-size is given."""
        from .sizes import ShardSize

        return config.shard_limit if "shard_size" in config.given else ShardSize(None, None)

    def join(self, pieces: list, work: Path, prefix: str, partition: int, ordinal: int) -> ShardRecord:
        """The pieces' rows (whole shards, in order) in one ``.npy`` and its metadata."""
        records, shards = [], [shard for _, shard, _, _ in pieces]
        for folder, shard, start, stop in pieces:
            records += read_npy(folder / shard.files[0])[start:stop]
        metadata = [json.loads((folder / s.files[1]).read_text()) for (folder, s, _, _) in pieces]
        pack_size = max(entry[0]["pack_size"] for entry in metadata)
        written = write_npy(records, work / prefix, pack_size)
        if all(provenance_file(shard) for shard in shards):  # --provenance: the spans joined as the rows are
            sidecars = [(folder / provenance_file(shard), start, stop) for folder, shard, start, stop in pieces]
            written.append(join_provenance(sidecars, work / prefix))
        sha256 = {path.name: digest for path, digest in written}
        sizes = {path.name: path.stat().st_size for path, _ in written}
        return ShardRecord.joined(shards, partition, ordinal, sha256, sizes)

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        records = read_npy(folder / shard.files[0])
        if len(records) != shard.rows:
            raise ValueError(f"{len(records):,} rows, the manifest says {shard.rows:,}")
        columns = {}
        for info in manifest.columns:
            if info.name not in NAMES or any(info.name not in r for r in records):
                raise ValueError(f"its rows have no {info.name}")
            parts = [np.asarray(r[info.name], dtype=np.dtype(info.disk_dtype)) for r in records]
            lengths = np.array([len(p) for p in parts], dtype=np.int64)
            values = np.concatenate(parts) if parts else np.zeros(0, np.dtype(info.disk_dtype))
            columns[info.name] = Column(values, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        return columns


NEMO_PACKED_NPY = register(NemoPackedNpyFormat())
