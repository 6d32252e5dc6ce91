"""``--shuffle-rows``: one global permutation of every row of a run, across partitions and shards,
in memory bounded by a chunk of rows, not by the corpus (an external two-pass shuffle).

Pass 1 is the run itself: each partition writes its rows, in order, to Arrow work files that also
carry each row's bookkeeping (tokens, padding, documents started). Pass 2, here, per split: row ``i`` of
the shuffled split is row ``permuted(i)`` of the split in order (``kernels/permutation.py``: a keyed
permutation computed an index at a time, keyed to (seed, split)), so a reader computes it too: a plan's
rows come out in the same order, made on read (``reading/shuffled.py``). The output is written a chunk of
about ``CHUNK_BYTES`` at a time: the chunk's rows are taken from the work files (memory-mapped only while
they are taken, each file's rows in ascending order), put in the chunk's order, and written through the
run's own writer into shards of ``--shard-size``.

Every draw is keyed to the data's position, so the result is the same bytes for any number of workers
and any executor. Memory: two chunks of rows (one written while the next is gathered) plus 8 bytes of
index per row of a chunk.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..formats import ShardSink, format_of
from ..formats._arrow_columns import list_parts, numpy_of
from ..formats.arrow import BOOKKEEPING
from ..formats.provenance import SPECS
from ..kernels.permutation import permutation_keys, permuted
from ..kernels.ragged import lengths_to_offsets
from ..kernels.rng import derive_rng
from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.faults import crash_point
from ..storage.shard_info import ShardRecord

CHUNK_BYTES = 32 * 2**20
SHUFFLED = -1  # the partition of a shuffled shard: its rows come from every partition
STREAM = "shuffle-rows"


def shuffle_rows(
    shards: list[ShardRecord],
    work: Path,
    columns: list[ColumnSpec],
    output_format: str,
    shard_limit,
    seed: int,
    publish=None,
    provenance: list[str] | None = None,
) -> list[ShardRecord]:
    """Replace the partitions' work shards (in partition order) by shuffled shards of the final
    format, split by split; returns the new shards, written to ``work`` (and handed to ``publish``
    as each is finished, when the output is in object storage)."""
    for stale in work.glob("shuffled-*"):  # what a killed pass 2 left
        stale.unlink()
    out: list[ShardRecord] = []
    for split in dict.fromkeys(s.split for s in shards):
        sink = ShardSink(
            work,
            SHUFFLED,
            format_of(output_format).writer,
            columns,
            shard_limit.rows,
            shard_limit.bytes,
            split=split,
            publish=publish,
            provenance=provenance,
        )
        held = columns + list(SPECS) if provenance is not None else columns  # what the work files hold
        for rows in _shuffled_buckets([s for s in shards if s.split == split], work, held, seed, split):
            sink.write(rows)
        out += sink.close()
    return out


def _chunk_count(shards: list[ShardRecord], work: Path) -> int:
    size = sum((work / s.files[0]).stat().st_size for s in shards)
    return max(1, -(-size // CHUNK_BYTES))


def _open_batches(shard: ShardRecord, work: Path, columns: list[ColumnSpec]) -> tuple[list[RowBatch], np.ndarray]:
    """A work shard's record batches as rows viewing its memory map (nothing copied), and where
    each batch starts among the shard's rows."""
    source = pa.memory_map(str(work / shard.files[0]))
    batches = [batch_rows(b, columns) for b in pa.ipc.open_stream(source)]
    return batches, lengths_to_offsets(np.array([b.num_rows for b in batches], dtype=np.int64))


def split_keys(seed: int, split: str) -> np.ndarray:
    """The keys of a split's permutation: the run's ``--shuffle-rows`` order, and a plan reader's."""
    return permutation_keys(derive_rng(seed, 0, 0, f"{STREAM}:{split}"))


def _shuffled_buckets(
    shards: list[ShardRecord], work: Path, columns: list[ColumnSpec], seed: int, split: str
) -> Iterator[RowBatch]:
    """The split's rows in its permutation's order, a chunk at a time. The next chunk is gathered on a
    second thread while the caller writes this one (NumPy's copies, sha256 and file writes all release
    the GIL), so memory holds two chunks."""
    total = sum(s.rows for s in shards)
    starts = lengths_to_offsets(np.array([s.rows for s in shards], dtype=np.int64))
    bounds = np.linspace(0, total, _chunk_count(shards, work) + 1).astype(np.int64)
    keys = split_keys(seed, split)

    def gather(chunk: int) -> RowBatch | None:
        natural = permuted(np.arange(bounds[chunk], bounds[chunk + 1]), total, keys)
        if not len(natural):
            return None
        order = np.argsort(natural, kind="stable")
        ascending = natural[order]
        owner = np.searchsorted(starts, ascending, side="right") - 1
        cuts = np.searchsorted(owner, np.arange(len(shards) + 1))
        pieces = [
            piece
            for k, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:]))
            for piece in _take(shards[k], ascending[lo:hi] - starts[k], work, columns)
        ]
        return RowBatch.concat(pieces).take(np.argsort(order, kind="stable"))  # back in the chunk's order

    chunks = len(bounds) - 1
    with ThreadPoolExecutor(1) as ahead:
        upcoming = ahead.submit(gather, 0)
        for chunk in range(chunks):
            rows = upcoming.result()
            if chunk + 1 < chunks:
                upcoming = ahead.submit(gather, chunk + 1)
            if rows is not None:
                yield rows
            crash_point("shuffle-bucket")


def _take(shard: ShardRecord, rows: np.ndarray, work: Path, columns: list[ColumnSpec]) -> list[RowBatch]:
    """Rows of a work shard (ascending), copied out of its record batches. The file is mapped
    only while they are taken: pages mapped for the whole pass would count as resident memory."""
    if not len(rows):
        return []
    batches, batch_starts = _open_batches(shard, work, columns)
    owner = np.searchsorted(batch_starts, rows, side="right") - 1
    cuts = np.searchsorted(owner, np.arange(len(batches) + 1))
    return [
        batches[b].take(rows[lo:hi] - batch_starts[b]) for b, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:])) if hi > lo
    ]


def batch_rows(batch: pa.RecordBatch, columns: list[ColumnSpec]) -> RowBatch:
    """Rows (and their bookkeeping) viewing a record batch written by ``RowsToShuffle``."""
    data = {}
    for spec in columns:
        column = batch.column(spec.name)
        if spec.kind == "scalar":
            data[spec.name] = numpy_of(column)
            continue
        if spec.kind == "value":  # strings and records: Python objects
            data[spec.name] = np.empty(len(column), dtype=object)
            data[spec.name][:] = column.to_pylist()
            continue
        values, offsets = list_parts(column)
        offsets = offsets.astype(np.int64)
        values = values[offsets[0] : offsets[-1]]
        offsets -= offsets[0]
        data[spec.name] = values.reshape(len(column), -1) if spec.kind == "fixed" else Ragged(values, offsets)
    tokens, padding, documents = (numpy_of(batch.column(name)) for name in BOOKKEEPING)
    return RowBatch(data, tokens, padding, documents)
