"""``--shuffle-rows``: one global permutation of every row of a run, across partitions and shards,
in memory bounded by a bucket, not by the corpus (an external two-pass shuffle).

Pass 1 is the run itself: each partition writes its rows, in order, to Arrow work files that also
carry each row's bookkeeping (tokens, padding, documents started). Pass 2, here, per split:

1. every row gets a bucket in ``[0, B)``, drawn uniformly by a generator keyed to (seed, partition,
   split); ``B`` is the rows' size over ``BUCKET_BYTES``, so a bucket holds about that much;
2. bucket by bucket, its rows are gathered from the work files (memory-mapped, only while the
   bucket is gathered), permuted by a generator keyed to (seed, split, bucket), and written through
   the run's own writer into shards of ``--shard-size``.

Why this is a uniform permutation: the bucket sizes are a multinomial draw that does not depend on
which row is which; given the sizes, each row is equally likely in each bucket and each bucket's
order is uniform, so every arrangement of the rows is equally likely (the usual scatter-then-shuffle
argument). Every draw is keyed to the data's position, so the result is the same bytes for any
number of workers and for any executor. Memory: two buckets of rows (one written while the next
is gathered; a few copies of each while it is gathered and permuted) plus 4 bytes of index per
row of the split.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..formats import ShardSink, format_of
from ..formats.arrow import BOOKKEEPING
from ..formats.arrow_columns import list_parts, numpy_of
from ..formats.provenance import SPECS
from ..kernels.ragged import lengths_to_offsets
from ..kernels.rng import derive_rng
from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.faults import crash_point
from ..storage.shard_info import ShardRecord

BUCKET_BYTES = 32 * 2**20
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


def _bucket_count(shards: list[ShardRecord], work: Path) -> int:
    size = sum((work / s.files[0]).stat().st_size for s in shards)
    return max(1, -(-size // BUCKET_BYTES))


def _open_batches(shard: ShardRecord, work: Path, columns: list[ColumnSpec]) -> tuple[list[RowBatch], np.ndarray]:
    """A work shard's record batches as rows viewing its memory map (nothing copied), and where
    each batch starts among the shard's rows."""
    source = pa.memory_map(str(work / shard.files[0]))
    batches = [batch_rows(b, columns) for b in pa.ipc.open_stream(source)]
    return batches, lengths_to_offsets(np.array([b.num_rows for b in batches], dtype=np.int64))


def _bucket_index(
    shards: list[ShardRecord], buckets: int, seed: int, split: str
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per work shard: (its rows sorted by bucket, where each bucket starts among them)."""
    draws: dict[int, np.ndarray] = {}
    for partition in dict.fromkeys(s.partition for s in shards):
        count = sum(s.rows for s in shards if s.partition == partition)
        draws[partition] = derive_rng(seed, partition, 0, f"{STREAM}:{split}").integers(buckets, size=count)
    index, used = [], dict.fromkeys(draws, 0)
    for shard in shards:
        start = used[shard.partition]
        bucket = draws[shard.partition][start : start + shard.rows]
        used[shard.partition] += shard.rows
        order = np.argsort(bucket, kind="stable").astype(np.int32)
        index.append((order, np.searchsorted(bucket[order], np.arange(buckets + 1))))
    return index


def _shuffled_buckets(
    shards: list[ShardRecord], work: Path, columns: list[ColumnSpec], seed: int, split: str
) -> Iterator[RowBatch]:
    """Each bucket's rows, permuted. The next bucket is gathered on a second thread while the
    caller writes this one (NumPy's copies, sha256 and file writes all release the GIL), so memory
    holds two buckets."""
    buckets = _bucket_count(shards, work)
    index = _bucket_index(shards, buckets, seed, split)

    def gather(bucket: int) -> RowBatch | None:
        pieces = [
            piece
            for shard, (order, starts) in zip(shards, index)
            for piece in _take(shard, order[starts[bucket] : starts[bucket + 1]], work, columns)
        ]
        if not pieces:
            return None
        gathered = RowBatch.concat(pieces)
        return gathered.take(derive_rng(seed, 0, bucket, f"{STREAM}-order:{split}").permutation(gathered.num_rows))

    with ThreadPoolExecutor(1) as ahead:
        upcoming = ahead.submit(gather, 0)
        for bucket in range(buckets):
            rows = upcoming.result()
            if bucket + 1 < buckets:
                upcoming = ahead.submit(gather, bucket + 1)
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
