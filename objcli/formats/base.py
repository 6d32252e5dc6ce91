"""What an output format is: one object that names its writer, says what it stores, reads its shards
back and makes the files its loader opens besides them. Every format module defines one (or a few)
and ``formats/__init__.py`` lists them; nothing else in objcli branches on a format's name."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ..options import Registry
from ..rows import ColumnSpec, RowBatch, fold_value_type
from ..storage.faults import crash_point
from ..storage.files import HashingFile
from ..storage.manifest import ColumnInfo, Manifest
from ..storage.shard_info import TEMP_SUFFIX, ShardRecord


def commit(temp: HashingFile) -> tuple[Path, str]:
    """Close (flush + fsync) a finished temporary file, give it its final name, return its sha256."""
    temp.close()
    final = temp.path.with_name(temp.path.name.removesuffix(TEMP_SUFFIX))
    os.replace(temp.path, final)
    crash_point("shard-committed")
    return final, temp.digest.hexdigest()


def temp_file(base: Path, suffix: str) -> HashingFile:
    """The temporary file a writer fills: ``base`` + ``suffix`` + ``.tmp``, renamed by ``commit``."""
    return HashingFile(base.with_name(base.name + suffix + TEMP_SUFFIX))


class ShardWriter(Protocol):
    """A format's writer. Optional, read with its default where absent: ``drops_padding`` (False): the
    packer's padding is not written (rows' sequences back to back, NVIDIA's layouts), so the sink counts
    none of it in the manifest's padding."""

    def __init__(self, base: Path, columns: list[ColumnSpec]) -> None: ...

    def write(self, rows: RowBatch) -> None: ...

    def close(self) -> list[tuple[Path, str]]:
        """Finish, rename to final names, and return each file written with its sha256."""
        ...


@dataclass
class Column:
    """One column of one shard as read back: flat values plus row offsets (scalars: offsets of one)."""

    values: np.ndarray
    offsets: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @classmethod
    def of_rows(cls, values: np.ndarray) -> Column:
        """A 1-D array of scalars, or a 2-D array of fixed-length rows."""
        width = values.shape[1] if values.ndim == 2 else 1
        return cls(np.asarray(values).reshape(-1), np.arange(values.shape[0] + 1, dtype=np.int64) * width)


def class_label(spec) -> bool:
    """A named category, one a row (a mixture's ``source``, UL2's denoiser): stored as int64, which
    ``datasets``' ``ClassLabel`` is, and declared one, so ``datasets`` shows the names."""
    return spec.role == "category" and spec.kind == "scalar" and bool(spec.categories)


def value_type_name(value_type) -> str:
    """A value column's Arrow type as pyarrow prints it (``list<item: struct<role: string, …>>``)."""
    return fold_value_type(
        value_type,
        lambda name: {"float64": "double"}.get(name, name),
        lambda item: f"list<item: {item}>",
        lambda fields: "struct<" + ", ".join(f"{name}: {t}" for name, t in fields) + ">",
    )


def arrow_width(spec) -> np.dtype:
    """A column's integers in Arrow and Parquet shards: at the width its values need (``narrow_dtype``),
    a named category int64 (``datasets``' ``ClassLabel``), values past int32 (provenance) int64."""
    if class_label(spec) or spec.max_value >= 2**32 or spec.min_value < -(2**31):
        return np.dtype(np.int64)
    return spec.narrow_dtype()


def arrow_type_name(spec: ColumnSpec) -> str:
    """The Arrow type Arrow and Parquet shards give a column, as the manifest names it."""
    if spec.kind == "value":
        return value_type_name(spec.value_type)
    name = arrow_width(spec).name
    if spec.kind == "scalar":
        return name
    return f"fixed_size_list<item: {name}>[{spec.length}]" if spec.length else f"list<item: {name}>"


def _arrow_dtype(spec) -> np.dtype:
    """A column's values as Arrow holds them: at their width (``arrow_width``), a value column Python objects."""
    if spec.kind == "value":
        return np.dtype(object)
    return arrow_width(spec)


class OutputFormat:
    """One output format. Required: ``name``, ``writer`` (a ``ShardWriter``) and ``read_columns``. Optional,
    each with the default declared below:

    - what it stores: ``recorded_columns()`` (its columns and dtypes; its own columns with their roles),
      ``whole_documents``, ``stores_values``, ``refuses()`` (rows it cannot hold), ``refuses_splits()``,
      ``packers``;
    - files beside the shards: ``side_files()``, ``side_file_pattern``, ``remove_side_folders()``,
      ``split_folder_files()``, ``manifest_sections()``, ``hub_loadable``;
    - how shards are made and rebuilt: ``joins_shards`` with ``join()``, ``join_limit()`` and
      ``cuts_between_rows()``, ``merge_joins_shards``, ``arrow_stream``, ``blends_sources``,
      ``whole_partitions``, ``packs_positions`` (a plan's), ``shifts_each_sequence``,
      ``streams_to_stdout``."""

    name: str
    writer: type[ShardWriter]
    help: str = ""
    # Whole documents, only their tokens, back to back: the trainer cuts its own windows. Such a
    # format stores input_ids alone (no row could say its source), and the packer defaults to none.
    whole_documents: bool = False
    packers: tuple[str, ...] | None = None  # the packers it takes (None: any the objective takes)
    side_file_pattern: str | None = None  # names of the files ``side_files`` makes, a regex
    streams_to_stdout: bool = False  # -o - writes this format to standard output
    hub_loadable: bool = False  # datasets.load_dataset(OUT) reads the shards (the card then names each split's)
    arrow_stream: bool = False  # shards are Arrow IPC streams: reshard copies their record batches whole
    merge_joins_shards: bool = False  # merge joins each split's shards into one (else it copies them)
    # A run joins each split's (and source's) partitions' shards into as few as ``join_limit`` allows, with
    # ``join`` (Megatron's prefixes, the released packed-SFT readers' one file a split).
    joins_shards: bool = False
    # A mixture is written as each source's shards plus a blend file the trainer samples by (Megatron's
    # megatron.txt): the sources' shares are the trainer's to meet, so objcli copies no document.
    blends_sources: bool = False
    stores_values: bool = False  # holds value columns (strings, numbers, records): the Arrow formats
    # A partition's rows (one split's) in one shard, whatever the shard limits (a plan: its row step
    # reads its batches of rows whole); and a run that packs store positions for ids (a plan's).
    whole_partitions: bool = False
    packs_positions: bool = False
    # The reader makes a sequence's inputs and labels by shifting within it (NVIDIA's packed SFT: n tokens
    # stored, n - 1 inputs): --pad-to-multiple then pads each sequence to a multiple plus that token, and with
    # EOS, as Megatron-Bridge's pad_seq_to_mult does (its collate finds a sequence's real end by it).
    shifts_each_sequence: bool = False

    def recorded_columns(self, columns: list[ColumnSpec]) -> list[ColumnInfo]:
        """What a shard holds, with each column's dtype on disk: what the manifest lists. By default
        every column as int32, what every Arrow reader handles (a named category as int64)."""
        return [ColumnInfo.of(c, _arrow_dtype(c), arrow_type_name(c)) for c in columns]

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        """Every column of one shard as stored, checked against the manifest's columns (names, types,
        dtypes) and the format's own index; ``ValueError`` or ``OSError`` when the files disagree."""
        raise NotImplementedError

    def join(self, pieces: list, work: Path, prefix: str, partition: int, ordinal: int) -> ShardRecord:
        """One shard in ``work`` named ``prefix`` from ``pieces``, each (folder, shard, first row, end row),
        in order (a format that ``joins_shards``)."""
        raise NotImplementedError

    def join_limit(self, config):
        """How large a joined shard may grow (``formats.sizes.ShardSize``): ``--shard-size``."""
        return config.shard_limit

    def cuts_between_rows(self, shard: ShardRecord) -> bool:
        """Whether a join may cut this shard between rows (its rows' counts then read from its files)."""
        return False

    def manifest_sections(self, inputs: list, tokenizer, partitions: list = ()) -> dict:
        """Sections of the manifest the format's readers need besides the shards (a plan: its stores)."""
        return {}

    def refuses(self, objective, columns) -> str | None:
        """Why this format cannot hold the objective's rows (``columns``: the run's, after the packer and the
        row step) in one line, or None."""
        return None

    def refuses_splits(self, remote: bool) -> str | None:
        """Why this format cannot hold ``--split``'s splits (on object storage when ``remote``), or None."""
        return None

    def side_files(self, shards: list, columns: list[ColumnInfo], config_sha256: str, blend=None) -> dict[str, str]:
        """Files that come with the shards (name relative to the output folder -> text), written just
        before the manifest and checked by ``verify``: what a trainer's loader opens besides the shards.
        ``blend``: a mixture's source and share by partition index (formats that blend sources)."""
        return {}

    def remove_side_folders(self, place) -> None:
        """Folders ``side_files`` made (a rebuild removes them with the files)."""
        return None

    def split_folder_files(self, splits: list[str]) -> list[str]:
        """The files ``side_files`` writes inside folders of the output for these splits (checked for
        links and the user's files before a run starts)."""
        return []


@dataclass(frozen=True)
class SideFiles:
    """The side files of every registered format: what an output folder holds besides its manifest and
    shards that objcli wrote (``--overwrite`` removes them; any other file is the user's)."""

    formats: Callable[[], list[OutputFormat]]

    def is_side_file(self, name: str) -> bool:
        return any(f.side_file_pattern and re.fullmatch(f.side_file_pattern, name) for f in self.formats())

    def remove_folders(self, place) -> None:
        for output_format in self.formats():
            output_format.remove_side_folders(place)


# Output formats by name (--format's choices): each format's module registers its instance
# (``register(ARROW)``); ``formats/__init__.py`` imports every module but the private helpers (``_*.py``).
FORMATS: Registry[OutputFormat] = Registry("output format")
register = FORMATS.register


def column_specs(manifest: Manifest) -> list[ColumnSpec]:
    """The manifest's columns as the writers take them (a value type's lists, as JSON keeps them, as tuples)."""
    return [
        ColumnSpec(
            c.name,
            c.kind,
            c.min_value,
            c.max_value,
            c.description,
            c.role,
            c.family,
            tuple(c.categories),
            _hashable(c.value_type) if c.value_type else "",
            c.length,
        )
        for c in manifest.columns
    ]


def _hashable(value_type):
    return fold_value_type(value_type, str, lambda item: ("list", item), lambda fields: ("struct", fields))
