"""``--format plan``: a run over a token store writes each row's plan, not its tokens.

The run is the same run (objective, packer, mixture, splits, seed) fed the store's token *positions*
instead of its ids: an id column's value ``v`` is an id where ``v < vocabulary`` (BOS, EOS, pad, -100)
and the store's token at position ``v - vocabulary`` of the partition otherwise. An objective that only
moves tokens (``Objective.plans_rows``) then packs positions exactly as it packs ids, and each row's columns
are runs of positions, segment numbers and position counts (``kernels/runs.py``): a few runs a segment,
each run's first value kept as its difference from the run before (small numbers, which zstd squeezes).
The row step (BERT's masking, a prefix's split) draws its numbers on read, keyed as the run keys them,
so ``objcli.reading`` gives the same rows the same command writes with ``--format arrow``, byte for byte.

A plan file (``part-00000-of-00004.plan``) holds one partition's rows (one split's) whole, as the row
step needs its batches of rows whole: ``OBJPLAN1`` then a zstd frame of a JSON header (the packed
columns, the arrays' names, dtypes and lengths) and the arrays.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..kernels.runs import encode_runs
from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.manifest import Manifest
from ..storage.shard_info import ShardRecord, work_place
from .base import Column, OutputFormat, commit, register, temp_file

MAGIC = b"OBJPLAN1"
COUNTS = ("tokens", "padding", "documents")  # RowBatch's per-row counts: the row step reads them
ID_ROLES = ("tokens", "labels")  # columns whose values are ids (store positions in a plan)


class PlanWriter:
    suffix = ".plan"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        self.columns = columns  # the packed columns, before the row step
        self.place = work_place(base.name)  # (partition, split): the file says whose rows it holds
        self.temp = temp_file(base, self.suffix)
        self.parts: dict[str, list[np.ndarray]] = {}

    def _add(self, name: str, array: np.ndarray) -> None:
        self.parts.setdefault(name, []).append(array)

    def write(self, rows: RowBatch) -> None:
        batches = getattr(rows, "batches", None)  # planned rows say their batches; else one write, one batch
        self._add("batch_rows", np.array([rows.num_rows], np.int64) if batches is None else batches)
        for name in COUNTS:
            self._add(name, getattr(rows, name).astype(np.int64))
        planned = getattr(rows, "runs", None)  # rows planned from lengths (packing/concat.ConcatPlanner): runs given
        for spec in self.columns:
            if planned is not None and spec.name in planned:
                first, steps, lengths, per_row = planned[spec.name]
                if spec.kind == "ragged":  # each row's length: its runs' lengths summed
                    row_of_run = np.repeat(np.arange(len(per_row)), per_row)
                    self._add(f"{spec.name}.lengths", np.bincount(row_of_run, lengths, len(per_row)).astype(np.int64))
                for part, array in zip(("first", "steps", "runs", "row_runs"), (first, steps, lengths, per_row)):
                    self._add(f"{spec.name}.{part}", array)
                continue
            column = rows.columns[spec.name]
            if spec.kind == "scalar":
                self._add(spec.name, np.asarray(column).astype(np.int64))
                continue
            values, offsets = _flat(column)
            if spec.kind == "ragged":
                self._add(f"{spec.name}.lengths", np.diff(offsets))
            first, steps, lengths, row_runs = encode_runs(values, offsets)
            self._add(f"{spec.name}.first", first)
            self._add(f"{spec.name}.steps", steps)
            self._add(f"{spec.name}.runs", lengths)
            self._add(f"{spec.name}.row_runs", np.diff(row_runs))

    def close(self) -> list[tuple[Path, str]]:
        import zstandard

        arrays = {name: np.concatenate(parts) for name, parts in self.parts.items()}
        for name in [n for n in arrays if n.endswith(".first")]:  # small differences: zstd's to squeeze
            arrays[name] = np.diff(arrays[name], prepend=0)
        # Each array at its values' width, read back at its own: a random row decompresses a plan file whole,
        # and a third of the bytes is a third of the time (600 partitions: 271 KB -> 89 KB a file).
        header = {
            "columns": [_spec_json(spec) for spec in self.columns],
            "arrays": [[name, array.dtype.str, len(array)] for name, array in arrays.items()],
            "widths": {name: _narrowest(array).str for name, array in arrays.items()},
        }
        arrays = {name: array.astype(header["widths"][name], copy=False) for name, array in arrays.items()}
        if self.place is not None:  # checked against the manifest on read (an edited one is refused)
            header["partition"], header["split"] = self.place
        encoded = json.dumps(header).encode()
        payload = b"".join([len(encoded).to_bytes(8, "little"), encoded, *(a.tobytes() for a in arrays.values())])
        # Level 1: a chat plan's file 0.4 % larger than at 3, a best-fit one 2.5 %, in half the time (0.23 ms: 0.54).
        self.temp.write(MAGIC + zstandard.ZstdCompressor(level=1).compress(payload))
        return [commit(self.temp)]


def _narrowest(array: np.ndarray) -> np.dtype:
    """The narrowest of int8, int16, int32 and the array's own integer dtype holding its values."""
    low, high = (int(array.min()), int(array.max())) if len(array) else (0, 0)
    for dtype in map(np.dtype, (np.int8, np.int16, np.int32)):
        if dtype.itemsize < array.dtype.itemsize and np.iinfo(dtype).min <= low <= high <= np.iinfo(dtype).max:
            return dtype
    return array.dtype


def _flat(column) -> tuple[np.ndarray, np.ndarray]:
    flat = column if isinstance(column, Ragged) else Column.of_rows(column)
    return flat.values, flat.offsets


def _spec_json(spec: ColumnSpec) -> dict:
    return {"name": spec.name, "kind": spec.kind, "role": spec.role, "min": spec.min_value, "max": spec.max_value}


def read_plan_file(path: Path) -> tuple[list[dict], dict[str, np.ndarray], dict]:
    """A plan file's packed columns, arrays and header (``partition`` and ``split``: whose rows it holds,
    where the writer recorded them); ``ValueError`` when it is not one or is cut short."""
    import zstandard

    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise ValueError("not an objcli plan file")
    try:
        payload = zstandard.ZstdDecompressor().decompress(data[len(MAGIC) :])
    except zstandard.ZstdError as error:
        raise ValueError(f"damaged plan file ({error})") from None
    size = int.from_bytes(payload[:8], "little")
    try:  # a header edited to other JSON types is a damaged file, as a cut one is
        header = json.loads(payload[8 : 8 + size])
        arrays, at = {}, 8 + size
        widths = header.get("widths", {})  # as stored, where narrower than the array (plans before: none)
        for name, dtype, count in header["arrays"]:
            array = np.frombuffer(payload, dtype=np.dtype(widths.get(name, dtype)), count=count, offset=at)
            arrays[name] = array.astype(dtype, copy=False)
            at += array.nbytes
    except (TypeError, AttributeError, KeyError) as error:
        raise ValueError(f"damaged plan header ({type(error).__name__}: {error})") from None
    if at != len(payload):
        raise ValueError("plan file's arrays do not fill it")
    return header["columns"], arrays, header


def store_manifest_sha256(store: str) -> str | None:
    """The sha256 of a token store's manifest file: the store's identity (it lists every shard's sha256)."""
    from ..storage.copies import local_file_copy
    from ..storage.files import file_sha256
    from ..storage.remote import is_url, join

    try:
        return file_sha256(
            local_file_copy(join(store, "manifest.json")) if is_url(store) else Path(store) / "manifest.json"
        )
    except (OSError, ObjcliError):  # gone: no identity to match
        return None


def _absolute(store: str) -> str:
    import os

    from ..storage.remote import is_url

    return store if is_url(store) else os.path.abspath(store)


class PlanFormat(OutputFormat):
    name = "plan"
    writer = PlanWriter
    help = "each row's plan over its token store (a few bytes a segment); rows are made on read by objcli.reading"
    packers = None
    whole_partitions = True  # a partition's rows in one file: the row step reads its batches whole
    packs_positions = True

    def manifest_sections(self, inputs: list, tokenizer, partitions: list = ()) -> dict:
        """The stores the plan's ids come from (run/stores.check_plan_run refuses any other input): one, or
        with a mixture of stores each with the store partition each of the run's partitions reads."""
        stores = list(dict.fromkeys(f.path for f in inputs))
        where = [_absolute(store) for store in stores]  # a plan read elsewhere finds them
        section = {"vocabulary": tokenizer.total_vocab_size}
        one = len(stores) == 1 and all(p.store_partition == p.index for p in partitions)
        if one:  # as plans of one store always were
            return {
                "row_plan": {"store": where[0], "store_manifest_sha256": store_manifest_sha256(where[0]), **section}
            }
        section["stores"] = [{"store": s, "store_manifest_sha256": store_manifest_sha256(s)} for s in where]
        section["partition_stores"] = {str(p.index): [stores.index(p.store), p.store_partition] for p in partitions}
        return {"row_plan": section}

    def refuses(self, objective, columns) -> str | None:
        why = objective.plan_refusal()
        return f"--format plan: {why}; choose --format arrow (or another row format)" if why else None

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        """A plan's rows are made, not read: from its store, with the objective's row step, which sit above
        the formats (``objcli.reading.shards.stored_columns`` makes them)."""
        raise NotImplementedError("a plan's rows are made by objcli.reading.shards.stored_columns")


PLAN = register(PlanFormat())


def with_ids(column, tokens, vocabulary: int):
    """Store positions (``vocabulary`` and up) turned into the ids at them (``tokens``: anything with ``take``
    and ``len``, the partition's ids by position); ids and -100 kept."""
    values = column.values if isinstance(column, Ragged) else column
    stored = values >= vocabulary
    made = values.copy()
    positions = values[stored] - vocabulary
    if len(positions) and positions.max() >= len(tokens):
        raise ValueError(f"places a token at {positions.max():,}, past its store partition's {len(tokens):,}")
    made[stored] = tokens.take(positions)
    return Ragged(made, column.offsets) if isinstance(column, Ragged) else made
