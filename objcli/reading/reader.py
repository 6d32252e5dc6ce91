"""One reader for every objcli output: a plan over its store (rows made on read) or written shards of
any row format, local or on object storage. ``Rows(folder)[i]`` is row ``i`` as a dict of NumPy arrays
with the columns and dtypes of the Arrow output of the same command; ``iterate(start)`` goes on from
any row; ``shard(rank, world)`` gives disjoint contiguous ranges; ``state``/``resume`` continue a run
exactly where it stopped."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..formats import format_of
from ..rows import Ragged
from ..storage.manifest import Manifest, arrow_dtype, read_manifest, read_pinned_manifest
from .stream_shards import StreamShards

STATE_VERSION = 2  # 2: the output's identity is its manifest's sha256 (1: its configuration's)
WINDOW = 64  # a plan's rows made at once by a reader reading on (one at a time at random)


class Rows:
    """The rows of an output folder (one split's with ``split``), in the order its manifest lists them.
    They are one run's: a file read after another run replaced the output is refused in one line.
    ``tokenizer``: a plan's tokenizer where it moved since the run (a row step needs its ids)."""

    def __init__(
        self,
        folder: str | Path,
        split: str | None = None,
        *,
        tokenizer: str | None = None,
        _range: tuple[int, int] | None = None,
    ):
        self.folder = _local_folder(folder)
        self.manifest: Manifest
        self.manifest, self._pin = read_pinned_manifest(self.folder)
        self.tokenizer = tokenizer
        self.split = split
        if split is not None and split not in {s.split for s in self.manifest.shards}:
            names = sorted({s.split for s in self.manifest.shards if s.split}) or ["none"]
            raise ObjcliError(f"{folder}: has no split {split!r} (its splits: {', '.join(names)}); name one of them")
        self.shards = [s for s in self.manifest.shards if split is None or s.split == split]
        self.starts = np.concatenate([[0], np.cumsum([s.rows for s in self.shards])]).astype(np.int64)
        total = int(self.starts[-1])
        self.start, self.stop = _range or (0, total)
        self.dtypes = {c.name: arrow_dtype(c.arrow_type) for c in self.manifest.columns}
        self.kinds = {c.name: c.kind for c in self.manifest.columns}
        self._plan = format_of(self.manifest.format).packs_positions
        self._plan_rows = None
        self._order = _shuffled_order(self.manifest, self.shards) if self._plan else None
        self._streams = (
            StreamShards(self.folder, self.manifest) if format_of(self.manifest.format).arrow_stream else None
        )
        self._lock = threading.Lock()
        self._cached: tuple[tuple[int, int], int, dict] | None = None  # (shard, batch), first row, columns

    @property
    def columns(self) -> list[str]:
        return [c.name for c in self.manifest.columns]

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"rows are read one at a time: an int, not {type(index).__name__}")
        position = int(index) + (len(self) if index < 0 else 0)
        if not 0 <= position < len(self):
            raise IndexError(f"row {index} of {len(self)}")
        return self._row(self.start + position)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self.iterate(0)

    def file_of(self, index: int) -> str:
        """The file (a shard's first) that row ``index`` of this view lies in."""
        position = self.start + index
        position = self._order.natural(position) if self._order is not None else position
        where = int(np.searchsorted(self.starts, position, side="right")) - 1
        return self.shards[where].files[0]

    def iterate(self, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        """Rows from ``start`` (0 to ``len(self)``, within this view) to its end."""
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or not 0 <= start <= len(self):
            raise ValueError(f"start {start!r}: a start is a row of this view, 0 to {len(self)}")
        return self._rows_from(int(start))

    def _rows_from(self, start: int) -> Iterator[dict[str, np.ndarray]]:
        for position in range(self.start + start, self.stop):
            yield self._row(position)

    def shard(self, rank: int, world: int, drop_remainder: bool = False) -> Rows:
        """Rank ``rank`` of ``world``'s rows: contiguous and disjoint, every row once. The remainder is
        spread (the first ``len % world`` ranks get one row more); ``drop_remainder`` gives every rank
        ``len // world`` rows and leaves the last ``len % world`` rows out, as equal steps need."""
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} of world {world}: a rank is 0 to world - 1")
        count = len(self)
        if drop_remainder:
            each = count // world
            lo, hi = rank * each, (rank + 1) * each
        else:
            each, extra = divmod(count, world)
            lo = rank * each + min(rank, extra)
            hi = lo + each + (rank < extra)
        view = Rows.__new__(Rows)
        view.__dict__.update(self.__dict__)
        view.start, view.stop = self.start + lo, self.start + hi
        view._lock, view._cached = threading.Lock(), None
        return view

    def to_iterable_dataset(self, shards: int = 1):
        """The rows as a ``datasets.IterableDataset`` in ``shards`` contiguous shards (``datasets`` hands
        them to its DataLoader workers and, with ``split_dataset_by_node``, to ranks), its features the
        manifest's columns: a row comes as the hf format's rows come, lists of Python ints, so collators
        written for ``datasets`` (TRL's) take it as it is."""
        import datasets

        def generate(ranks):
            for rank in ranks:
                for row in self.shard(rank, shards).iterate(0):
                    yield {name: value.tolist() for name, value in row.items()}

        ranks = {"ranks": list(range(shards))}
        return datasets.IterableDataset.from_generator(generate, features=self.features(), gen_kwargs=ranks)

    def features(self):
        """The rows' ``datasets.Features``: the manifest's columns, as the hf format's shards declare them."""
        import datasets

        from ..formats._arrow_columns import arrow_schema
        from ..formats.base import column_specs

        return datasets.Features.from_arrow_schema(arrow_schema(column_specs(self.manifest)))

    def __getstate__(self) -> dict:  # to DataLoader workers: no lock, no cache, the plan opened again there
        streams = self._streams and StreamShards(self.folder, self.manifest)
        return {**self.__dict__, "_lock": None, "_cached": None, "_plan_rows": None, "_streams": streams}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def state(self, next_row: int) -> dict:
        """What ``resume`` needs to go on at ``next_row`` of this view: small, JSON-safe."""
        return {"version": STATE_VERSION, **self._identity(), "next_row": int(next_row)}

    def _identity(self) -> dict:
        """The rows a state is of: the run (its manifest's sha256), the split and this view's range."""
        return {
            "manifest_sha256": self._pin.sha256,
            "rows": int(self.starts[-1]),
            "split": self.split,
            "range": [self.start, self.stop],
        }

    def resume(self, state: dict) -> Iterator[dict[str, np.ndarray]]:
        """The rows after a saved ``state``, refused in one line when it was saved over other rows."""
        return self.iterate(self.resumed_row(state))

    def resumed_row(self, state: dict) -> int:
        """A saved state's next row, checked: saved by this reader's run, split and view, within it."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ObjcliError(
                f"{self.folder}: the saved state is not one this objcli saves (version "
                f"{state.get('version') if isinstance(state, dict) else None!r}, this one {STATE_VERSION}); "
                "start the epoch again, or resume with the objcli that saved it"
            )
        if {k: state.get(k) for k in self._identity()} != self._identity():
            raise ObjcliError(
                f"{self.folder}: the saved state is of other rows (another run of the output, split or shard); "
                "resume with the reader it was saved from"
            )
        row = state.get("next_row")
        if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row <= len(self):
            raise ObjcliError(
                f"{self.folder}: the saved state's next_row {row!r} is not a row of its view (0 to {len(self)}); "
                "resume with the state as it was saved"
            )
        return row

    def _row(self, position: int) -> dict[str, np.ndarray]:
        if self._order is not None:  # a shuffled plan: its rows in the order the same run writes them
            position = self._order.natural(position)
        where = int(np.searchsorted(self.starts, position, side="right")) - 1
        local = position - int(self.starts[where])
        with self._lock:
            key, first, columns = self._block(where, local)
        row = local - first
        return {name: _take(column, row) for name, column in columns.items()}

    def _checked(self, read):
        """What a file read gave, once the manifest this reader opened is still in place (one run's rows)."""
        self._pin.check()
        return read

    def _block(self, shard: int, local: int) -> tuple:
        """The cached rows holding ``local`` of ``shard``: a plan's batch of rows, or a written shard."""
        record = self.shards[shard]
        if self._plan:
            cached = self._cached
            if cached is None or cached[0][0] != shard or not cached[1] <= local < cached[1] + cached[0][1]:
                # Reading on from the rows in hand: a window of rows; a row at random: that row alone.
                onward = cached is not None and cached[0][0] == shard and local == cached[1] + cached[0][1]
                first, rows = self._made(self._opened_plan(), record, local, WINDOW if onward or local == 0 else 1)
                self._cached = self._checked(((shard, rows.num_rows), first, self._typed(rows.columns)))
            return self._cached
        if self._streams is not None:  # Arrow streams: a record batch at a time, memory-mapped
            cached = self._cached
            if cached is None or cached[0][0] != shard or not cached[1] <= local < cached[1] + cached[0][1]:
                first, count, columns = self._streamed(record, local)
                self._cached = self._checked(((shard, count), first, self._typed(columns)))
            return self._cached
        key = (shard, record.rows)
        if self._cached is None or self._cached[0] != key:
            from .shards import shard_columns

            try:
                read = shard_columns(self.folder, self.manifest, record, self.tokenizer)
            except ObjcliError:
                self._pin.check()  # files of another run: said as such
                raise
            columns = {
                n: (c.values if self.kinds[n] in ("scalar", "value") else Ragged(c.values, c.offsets))
                for n, c in read.items()
            }
            self._cached = self._checked((key, 0, self._typed(columns)))
        return self._cached

    def _made(self, plan, record, row: int, ahead: int):
        """(first row, rows) of a plan made around ``row``; a damaged plan file is one line, as a damaged shard is."""
        from .shards import READ_ERRORS, unreadable

        try:
            return plan.block(record, row, ahead)
        except READ_ERRORS as error:
            self._pin.check()  # files of another run: said as such
            raise unreadable(self.folder, record.files[0], error) from None

    def _streamed(self, record, row: int):
        from .shards import READ_ERRORS, unreadable

        try:
            return self._streams.block(record, row)
        except READ_ERRORS as error:
            self._pin.check()
            raise unreadable(self.folder, record.files[0], error) from None

    def _opened_plan(self):
        """The plan, opened by this reader (its store checked then, each store shard when first read)."""
        if self._plan_rows is None:
            from .plan_rows import Plan

            self._plan_rows = Plan(self.folder, self.manifest, self.tokenizer)
        return self._plan_rows

    def _typed(self, columns: dict) -> dict:
        """The manifest's columns at the Arrow output's dtypes (fixed rows 2-D, ragged as Ragged)."""
        typed = {}
        missing = [name for name in self.columns if name not in columns]
        if missing:
            raise ObjcliError(
                f"{self.folder}/manifest.json: names column {missing[0]}, which its rows do not have (edited?); "
                "rebuild the output with --overwrite"
            )
        for name in self.columns:
            column, dtype = columns[name], self.dtypes[name]
            if isinstance(column, Ragged):
                values = column.values if dtype is None else column.values.astype(dtype, copy=False)
                if self.kinds[name] == "fixed" and len(column):
                    typed[name] = values.reshape(len(column), -1)
                else:
                    typed[name] = Ragged(values, column.offsets)
            else:
                typed[name] = np.asarray(column) if dtype is None else np.asarray(column).astype(dtype, copy=False)
        return typed


def _take(column, row: int):
    if isinstance(column, Ragged):
        return column.values[column.offsets[row] : column.offsets[row + 1]]
    return column[row]


def _shuffled_order(manifest: Manifest, shards: list):
    """A plan written with --shuffle-rows: the order its rows are read in (``shuffled.py``); else None."""
    if not manifest.config.get("shuffle_rows"):
        return None
    from .shuffled import ShuffledOrder

    return ShuffledOrder(shards, int(manifest.config.get("seed", 0)))


def _local_folder(folder: str | Path) -> Path:
    """An output folder here; one in object storage copied once into the user's cache (its manifest and
    the files it lists, keyed by their versions: a replaced object is fetched again)."""
    from ..storage.remote import filesystem, is_url

    if not is_url(str(folder)):
        if Path(folder).is_file():
            raise ObjcliError(
                f"{folder}: a file, not an output folder; give the folder objcli transform or tokenize wrote"
            )
        return Path(folder)
    from ..storage.copies import local_copy

    fs, inner = filesystem(str(folder))
    root = inner.rstrip("/")
    manifest = read_manifest(local_copy(str(folder), [f"{root}/manifest.json"], root))
    names = [f"{root}/{name}" for shard in manifest.shards for name in shard.files]
    return local_copy(str(folder), [f"{root}/manifest.json", *names], root)
