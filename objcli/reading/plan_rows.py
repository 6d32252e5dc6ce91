"""A plan's rows made on read (``formats/row_plan.py``): each batch of packed rows decoded from its
runs, its store positions turned into the store's ids, and the objective's row step applied with the
generators the run keys to the batch's first row. What ``--format arrow`` writes for the same command,
byte for byte (``tests/reading/test_plan_parity.py``)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import msgspec
import numpy as np

from ..errors import ObjcliError
from ..formats.base import Column
from ..formats.row_plan import COUNTS, ID_ROLES, read_plan_file, with_ids
from ..kernels.runs import decode_runs
from ..rows import Ragged, RowBatch
from ..storage.manifest import Manifest, arrow_dtype
from ..storage.shard_info import ShardRecord
from .store_tokens import StoreTokens

KEPT_SHARDS = 64  # plan files held decoded (a few bytes a segment each)
WINDOW = 64  # rows made at once where no row step needs a whole batch (a reader reading on reads them next)


class PlanShard:
    """One plan file: its batches of packed rows, decoded one batch at a time."""

    def __init__(self, path: Path):
        self.specs, self.arrays, self.header = read_plan_file(path)
        for name in [n for n in self.arrays if n.endswith(".first")]:  # kept as differences (row_plan.py)
            self.arrays[name] = np.cumsum(self.arrays[name])
        batch_rows = self.arrays["batch_rows"]
        self.batch_starts = np.concatenate([[0], np.cumsum(batch_rows)]).astype(np.int64)
        self.rows = int(self.batch_starts[-1])
        self._run_starts = {}  # column -> each row's first run
        for spec in self.specs:
            if spec["kind"] != "scalar":
                counts = self.arrays[f"{spec['name']}.row_runs"]
                self._run_starts[spec["name"]] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def batch_of(self, row: int) -> int:
        return int(np.searchsorted(self.batch_starts, row, side="right")) - 1

    def packed(self, start: int, stop: int) -> RowBatch:
        """Rows ``start:stop`` packed as the run's packer gave them (ids still store positions)."""
        columns = {spec["name"]: self._column(spec, start, stop) for spec in self.specs}
        counts = (self.arrays[name][start:stop] for name in COUNTS)
        return RowBatch(columns, *counts)

    def _column(self, spec: dict, start: int, stop: int):
        name = spec["name"]
        if spec["kind"] == "scalar":
            return self.arrays[name][start:stop].astype(np.int32)
        runs = self._run_starts[name]
        lo, hi = int(runs[start]), int(runs[stop])
        parts = (self.arrays[f"{name}.{part}"][lo:hi] for part in ("first", "steps", "runs"))
        values = decode_runs(*parts, np.int32)
        if spec["kind"] == "fixed":
            return values.reshape(stop - start, -1)
        lengths = self.arrays[f"{name}.lengths"][start:stop]
        return Ragged(values, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))


class Plan:
    """A plan output: its shards over its store, and the objective's row step where it has one."""

    def __init__(self, folder: Path, manifest: Manifest, tokenizer: str | None = None):
        self.folder, self.manifest = folder, manifest
        section = manifest.row_plan
        vocabulary = section.get("vocabulary")
        stores = section.get("stores") or [{k: section.get(k) for k in ("store", "store_manifest_sha256")}]
        named = all(isinstance(s, dict) and all(isinstance(v, str) for v in s.values()) and len(s) == 2 for s in stores)
        if not (named and type(vocabulary) is int and vocabulary > 0):
            raise ObjcliError(
                f"{folder}/manifest.json: its row_plan does not name its stores, their sha256 and a vocabulary "
                "(edited?); write the plan again"
            )
        if vocabulary != manifest.tokenizer.total_vocab_size:
            raise ObjcliError(
                f"{folder}/manifest.json: its row_plan's vocabulary {vocabulary:,} is not its tokenizer's "
                f"{manifest.tokenizer.total_vocab_size:,} (edited?); write the plan again"
            )
        self.vocabulary = vocabulary
        self.widths = {c.name: _width(c.arrow_type) for c in manifest.columns}
        self.stores = [StoreTokens.open(s["store"], s["store_manifest_sha256"], folder) for s in stores]
        self.partition_stores = _partition_stores(folder, section, len(self.stores))
        self.step = _row_step(folder, manifest, tokenizer)
        self._lock = threading.Lock()
        self._shards: dict[str, PlanShard] = {}

    def shard(self, record: ShardRecord) -> PlanShard:
        name = record.files[0]
        with self._lock:
            if name not in self._shards:
                if len(self._shards) >= KEPT_SHARDS:
                    self._shards.pop(next(iter(self._shards)))
                shard = PlanShard(self.folder / name)
                _check_place(shard.header, record, shard.rows)
                self._shards[name] = shard
            return self._shards[name]

    def block(self, record: ShardRecord, row: int, ahead: int = WINDOW) -> tuple[int, RowBatch]:
        """(first row, rows) made around ``row`` of a shard: its batch where a row step draws over the
        batch, else ``ahead`` rows from it (a row made alone costs its own tokens only)."""
        shard = self.shard(record)
        if self.step is None:
            return row, self._made(record, row, min(row + max(ahead, 1), shard.rows))
        batch = shard.batch_of(row)
        start, stop = int(shard.batch_starts[batch]), int(shard.batch_starts[batch + 1])
        return start, self._made(record, start, stop)

    def _made(self, record: ShardRecord, start: int, stop: int) -> RowBatch:
        """Rows ``start:stop`` of a shard, made: ids from the store, then the row step (``start`` is then
        the first row of a batch of the run's: its key)."""
        shard = self.shard(record)
        packed = shard.packed(start, stop)
        store, partition = self.partition_stores.get(record.partition, (0, record.partition))
        tokens = self.stores[store].partition(partition)
        id_names = [spec["name"] for spec in shard.specs if spec["role"] in ID_ROLES]
        for name in id_names:
            packed.columns[name] = with_ids(packed.columns[name], tokens, self.vocabulary)
        if self.step is not None:
            rows = self.step(record.partition, start, packed)
            for name, column in packed.columns.items():  # what the row step passes by (a mixture's source)
                rows.columns.setdefault(name, column)
            packed = rows
        for name, width in self.widths.items():
            _check_width(name, packed.columns.get(name), width)
        return packed

    def shard_columns(self, record: ShardRecord) -> dict[str, Column]:
        """Every row of a shard, as a written shard's ``read_columns`` gives them (int32 and wider)."""
        shard = self.shard(record)
        if self.step is None:  # no draw keyed to a batch: the shard's rows made at once
            rows = self._made(record, 0, shard.rows) if shard.rows else None
        else:
            starts = shard.batch_starts
            batches = [self._made(record, int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]
            rows = RowBatch.concat(batches) if batches else None
        columns = {}
        missing = [info.name for info in self.manifest.columns if rows is not None and info.name not in rows.columns]
        if missing:
            raise ValueError(f"the manifest names column {missing[0]}, which its rows do not have (edited?)")
        for info in self.manifest.columns:
            column = rows.columns[info.name] if rows is not None else np.zeros((0, 0), np.int32)
            if isinstance(column, Ragged):
                columns[info.name] = Column(column.values, column.offsets)
            else:
                columns[info.name] = Column.of_rows(np.asarray(column))
        return columns


def _partition_stores(folder: Path, section: dict, stores: int) -> dict[int, tuple[int, int]]:
    """Each run partition's (store, store partition), where a plan reads several stores (else each its own)."""
    found = section.get("partition_stores", {})
    pairs = {}
    for key, value in found.items() if isinstance(found, dict) else [(None, None)]:
        if not (isinstance(key, str) and key.isdigit() and isinstance(value, list) and len(value) == 2
                and all(type(v) is int for v in value) and 0 <= value[0] < stores and value[1] >= 0):  # fmt: skip
            raise ObjcliError(
                f"{folder}/manifest.json: its row_plan's partition_stores is damaged (edited?); write the plan again"
            )
        pairs[int(key)] = (value[0], value[1])
    return pairs


def _check_place(header: dict, record: ShardRecord, rows: int) -> None:
    """A plan file holds one partition's rows (one split's): the manifest's record of it must say so."""
    if rows != record.rows:
        raise ValueError(f"holds {rows:,} rows, where the manifest says {record.rows:,} (edited?)")
    if "partition" in header and (header["partition"], header["split"]) != (record.partition, record.split):
        raise ValueError(
            f"holds partition {header['partition']}'s rows{' of ' + header['split'] if header['split'] else ''}, "
            f"where the manifest says partition {record.partition}'s (edited?)"
        )


def _width(arrow_type: str) -> np.dtype | None:
    dtype = arrow_dtype(arrow_type)
    return dtype if dtype is not None and dtype.kind in "iu" else None


def _check_width(name: str, column, width: np.dtype | None) -> None:
    """Rows made are read at the manifest's widths: a value past one would wrap, so it is refused."""
    values = column.values if isinstance(column, Ragged) else column
    if width is None or values is None or not np.size(values):
        return
    values = np.asarray(values)
    low, high = np.iinfo(width).min, np.iinfo(width).max
    if values.min() < low or values.max() > high:
        raise ValueError(f"column {name} holds {values.max():,}, past the manifest's {width} (edited?)")


def _row_step(folder: Path, manifest: Manifest, moved_tokenizer: str | None = None):
    """The objective's row step as a function (partition, first row, packed rows) -> rows, or None
    where the objective has none: the objective rebuilt from the manifest's recipe, with its tokenizer
    (by sha256; ``moved_tokenizer`` where it is no longer at the manifest's path) and special tokens."""
    from ..objectives import REGISTRY
    from ..objectives.base import PartitionExamples

    objective_type = REGISTRY.named(manifest.objective)
    if not objective_type.row_step:
        return None
    objective = _objective(folder, manifest, moved_tokenizer)

    def step(partition: int, first_row: int, packed: RowBatch) -> RowBatch:
        examples: PartitionExamples = objective.partition_examples(partition)
        examples.rows_done = first_row  # the batch's key: the rows the chain made before it
        return examples.rows(packed)

    return step


def _objective(folder: Path, manifest: Manifest, moved_tokenizer: str | None):
    from ..recipe import build_objective, config_from_values, load_recipe
    from ..tokenizers import SpecialTokens, load_tokenizer

    config = config_from_values(load_recipe(str(folder / "manifest.json")))
    _check_configuration(folder, manifest, config)
    tokenizer = _tokenizer(moved_tokenizer or manifest.tokenizer.path, manifest.tokenizer.sha256, moved_tokenizer)
    recorded = manifest.special_tokens
    special = SpecialTokens(dict(recorded.ids), dict(recorded.pieces), dict(recorded.added), list(recorded.sentinels))
    tokenizer = load_tokenizer(tokenizer, "reference")
    tokenizer.adopt(special)
    return build_objective(config, tokenizer)


def _check_configuration(folder: Path, manifest: Manifest, config) -> None:
    """The row step draws as the manifest's configuration says: that configuration must be the one its
    ``config_sha256`` was made from (a seed or an option edited would change every row, silently)."""
    from ..storage.identity import side_digests

    if config.config_sha256(manifest.tokenizer.sha256, side_digests(manifest.identity)) != manifest.config_sha256:
        raise ObjcliError(
            f"{folder}/manifest.json: its configuration is not the one its config_sha256 was made from "
            "(edited?); write the plan again"
        )


def _tokenizer(path: str, sha256: str, moved: str | None) -> str:
    """The tokenizer the plan was made with (its row step needs its ids), unchanged: a ``.model``, a
    ``tokenizer.json`` or the folder holding one (``-t FOLDER``), compared by its kind's own digest."""
    if not Path(path).exists():
        where = "is not there" if moved else "is not there (moved?)"
        raise ObjcliError(
            f"{path}: the plan's tokenizer {where}; put it back, or give its new path "
            "(objcli inspect --tokenizer, Rows(..., tokenizer=))"
        )
    if not _same_tokenizer(path, sha256):
        raise ObjcliError(
            f"{path}: not the tokenizer the plan was made with (sha256 differs); give the one the run used, "
            "or write the plan again"
        )
    return path


def _same_tokenizer(path: str, sha256: str) -> bool:
    """The file's digest (a folder's tokenizer.json), else the kind's own (tiktoken's takes its side file)."""
    from ..storage.files import file_sha256
    from ..tokenizers import open_tokenizer

    resolved = Path(path) / "tokenizer.json" if Path(path).is_dir() else Path(path)
    try:
        if file_sha256(resolved) == sha256:
            return True
        return open_tokenizer(path).sha256 == sha256
    except (OSError, ObjcliError):  # unreadable, or not a tokenizer at all
        return False


_PLANS: dict[tuple[str, str], Plan] = {}
_PLANS_LOCK = threading.Lock()


def plan_of(folder: Path, manifest: Manifest, tokenizer: str | None = None) -> Plan:
    """The plan of an output folder, opened once per process, manifest and moved tokenizer."""
    key = (str(folder), hashlib.sha256(msgspec.json.encode(manifest)).hexdigest(), tokenizer)  # as read: edits too
    with _PLANS_LOCK:
        if key not in _PLANS:
            _PLANS[key] = Plan(folder, manifest, tokenizer)
        return _PLANS[key]
