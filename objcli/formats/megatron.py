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

from pathlib import Path

import numpy as np

from ..kernels import IGNORE
from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.manifest import ColumnInfo, Manifest
from ..storage.shard_info import ShardRecord
from .base import Column, OutputFormat, arrow_type_name, commit, register, temp_file
from .megatron_index import (  # noqa: F401 - the layout's names, where the format's readers look for them
    DOCUMENT_SUFFIX,
    DTYPE_CODES,
    HEADER_BYTES,
    MAGIC,
    MASK_CODE,
    MASK_SUFFIX,
    READ_DTYPES,
    index_array,
    index_header,
    read_index_header,
    read_megatron_index,
)

MASKED = ("labels", "loss_mask")  # columns written as the loss mask's prefix: chat's labels, or the mask read back


def input_ids_only(columns: list[ColumnSpec], dtype) -> list[ColumnInfo]:
    """Formats that store only the tokens (the trainer rebuilds positions and boundaries itself)."""
    spec = next(c for c in columns if c.name == "input_ids")
    return [ColumnInfo.of(spec, dtype(spec), arrow_type_name(spec))]


def megatron_dtype(spec: ColumnSpec) -> np.dtype:
    return spec.disk_dtype() if spec.disk_dtype() in DTYPE_CODES else np.dtype(np.int32)


class _IndexedFile:
    """One ``.bin``/``.idx`` pair being written: sequences back to back, then their index."""

    def __init__(self, base: Path, dtype: np.dtype, code: int):
        self.dtype, self.code = dtype, code
        self.bin = temp_file(base, ".bin")
        self.idx = temp_file(base, ".idx")
        self.lengths: list[np.ndarray] = []

    def write(self, values: np.ndarray, lengths: np.ndarray) -> None:
        self.bin.write(values.astype(self.dtype.newbyteorder("<")).tobytes())
        self.lengths.append(lengths.astype(np.int64))

    def close(self) -> list[tuple[Path, str]]:
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, dtype=np.int64)
        count = len(lengths)
        byte_offsets = np.zeros(count, dtype=np.int64)
        np.cumsum(lengths[:-1] * self.dtype.itemsize, out=byte_offsets[1:])
        self.idx.write(index_header(self.code, count, count + 1))
        self.idx.write(lengths.astype("<i4").tobytes())
        self.idx.write(byte_offsets.astype("<i8").tobytes())
        self.idx.write(np.arange(count + 1, dtype="<i8").tobytes())
        return [commit(self.bin), commit(self.idx)]


def _flat(column) -> tuple[np.ndarray, np.ndarray]:
    """(values, each row's length) of a ragged or fixed-length column."""
    flat = column if isinstance(column, Ragged) else Column.of_rows(column)
    return flat.values, np.diff(flat.offsets)


class MegatronWriter:
    suffix = ".bin"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        dtype = megatron_dtype(next(c for c in columns if c.name == "input_ids"))
        self.tokens = _IndexedFile(base.with_name(base.name + DOCUMENT_SUFFIX), dtype, DTYPE_CODES[dtype])
        masked = any(c.role in MASKED for c in columns)  # chat: the loss mask, a prefix beside
        self.mask = (
            _IndexedFile(base.with_name(base.name + MASK_SUFFIX), np.dtype(np.uint8), MASK_CODE) if masked else None
        )

    def write(self, rows: RowBatch) -> None:
        values, lengths = _flat(rows.columns["input_ids"])
        self.tokens.write(values, lengths)
        if self.mask is not None and "loss_mask" in rows.columns:  # rows of this layout already (reshard)
            self.mask.write(_flat(rows.columns["loss_mask"])[0], lengths)
        elif self.mask is not None:
            labels, _ = _flat(rows.columns["labels"])
            self.mask.write((labels != IGNORE).astype(np.uint8), lengths)

    def close(self) -> list[tuple[Path, str]]:
        return self.tokens.close() + (self.mask.close() if self.mask is not None else [])


def data_args_name(split: str) -> str:
    """Megatron-LM's --data-args-path file of a split (weight prefix per shard)."""
    return "megatron.txt" if split in ("", "train") else f"megatron-{split}.txt"


def data_args(shards, blend: dict[int, tuple[str, float]] | None = None) -> str:
    """Megatron-LM's ``--data-args-path`` file: ``weight prefix`` per shard, weights in tokens (Megatron
    normalises them). Prefixes are relative to the output folder, so the output's bytes do not depend on
    where it was written; run Megatron from inside the folder, or prefix them (see the README).

    A mixture (``blend``: each partition's source and share): a shard's weight is its source's share
    times its part of that source's tokens in the split, so Megatron's blended dataset samples each
    source at its share, and a source's shards in proportion to their tokens."""
    if not blend:
        lines = [f"{shard.tokens} {shard.files[0].removesuffix('.bin')}" for shard in shards]
        return "\n".join(lines) + "\n"
    source_tokens: dict[str, int] = {}
    for shard in shards:
        source = blend[shard.partition][0]
        source_tokens[source] = source_tokens.get(source, 0) + shard.tokens
    lines = []
    for shard in shards:
        source, share = blend[shard.partition]
        if shard.tokens:
            lines.append(f"{share * shard.tokens / source_tokens[source]:.12g} {shard.files[0].removesuffix('.bin')}")
    return "\n".join(lines) + "\n"


class MegatronFormat(OutputFormat):
    name = "megatron"
    writer = MegatronWriter
    whole_documents = True
    merge_joins_shards = True  # one .bin/.idx pair per split, as Megatron-LM's merge_datasets.py makes
    joins_shards = True  # a run's partitions joined into prefixes as large as --shard-size says
    blends_sources = True
    side_file_pattern = r"megatron(-[a-z][a-z0-9_]*)?\.txt"

    def recorded_columns(self, columns: list[ColumnSpec]) -> list[ColumnInfo]:
        stored = input_ids_only(columns, megatron_dtype)
        if any(c.role in MASKED for c in columns):  # rows whose labels are their tokens or -100 (chat)
            mask = ColumnSpec("loss_mask", "ragged", 0, 1, "1 where the token is learned (its label)", role="loss_mask")
            stored.append(ColumnInfo.of(mask, np.dtype(np.uint8), "list<item: uint8>"))
        return stored

    def join(self, pieces: list, work: Path, prefix: str, partition: int, ordinal: int) -> ShardRecord:
        from .megatron_join import Piece, join

        return join([Piece(*piece) for piece in pieces], work, prefix, partition, ordinal)

    def cuts_between_rows(self, shard: ShardRecord) -> bool:
        from .megatron_join import splits_into_rows

        return splits_into_rows(shard)

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        prefix = shard.files[0].removesuffix(".bin")
        dtype, _, offsets, _ = read_megatron_index(folder / f"{prefix}.idx")
        disk_dtype = manifest.columns[0].disk_dtype
        if dtype.name != disk_dtype:
            raise ValueError(f".idx holds {dtype.name} tokens, the manifest says {disk_dtype}")
        values = np.fromfile(folder / f"{prefix}.bin", dtype=dtype)
        if len(values) != offsets[-1]:
            raise ValueError(f".idx lists {int(offsets[-1]):,} tokens, the .bin holds {len(values):,}")
        columns = {"input_ids": token_stream(values, offsets.astype(np.int64))}
        if any(c.name == "loss_mask" for c in manifest.columns):
            mask = prefix.removesuffix(DOCUMENT_SUFFIX) + MASK_SUFFIX
            mask_dtype, _, mask_offsets, _ = read_megatron_index(folder / f"{mask}.idx")
            if mask_dtype != np.uint8 or not np.array_equal(mask_offsets, offsets):
                raise ValueError(f"{mask}.idx does not hold one uint8 mask value for each token of {prefix}")
            columns["loss_mask"] = token_stream(np.fromfile(folder / f"{mask}.bin", dtype=np.uint8), mask_offsets)
        return columns

    def side_files(self, shards: list, columns: list[ColumnInfo], config_sha256: str, blend=None) -> dict[str, str]:
        # One file per split: megatron.txt for train (--data-args-path, or --train-data-path $(cat ...)),
        # megatron-validation.txt for --valid-data-path $(cat ...), and so on.
        return {
            data_args_name(split): data_args([s for s in shards if s.split == split], blend)
            for split in dict.fromkeys(s.split for s in shards)
        }


def token_stream(values: np.ndarray, offsets: np.ndarray) -> Column:
    """Tokens end to end and the index's offsets, checked against each other."""
    if len(values) != offsets[-1]:
        raise ValueError(f"the index describes {int(offsets[-1]):,} tokens, the file holds {len(values):,}")
    return Column(values, offsets)


MEGATRON = register(MegatronFormat())
