"""A plan written with ``--shuffle-rows`` gives its rows in the shuffled order, made on read: row ``i`` of a
split is row ``permuted(i)`` of the split in order, the permutation the same command writes its Arrow shards
in (``order/shuffle.py``), computed an index at a time in constant memory. A reader of every split reads
them one split after another, in the order the run wrote them, as a shuffled output lists its shards."""

from __future__ import annotations

import numpy as np

from ..kernels.permutation import permuted
from ..kernels.ragged import lengths_to_offsets


class ShuffledOrder:
    """Positions of a shuffled reader (over ``shards``: the plan's, in the manifest's order, one split's or
    every split's) to positions of the rows in order (what ``Rows.starts`` counts)."""

    def __init__(self, shards: list, seed: int):
        from ..order.shuffle import split_keys

        starts = lengths_to_offsets(np.array([s.rows for s in shards], dtype=np.int64))
        self.splits = []  # (first shuffled position, rows, keys, its shards' positions in order, their rows)
        first = 0
        for split in dict.fromkeys(s.split for s in shards):
            mine = [k for k, s in enumerate(shards) if s.split == split]
            counts = np.array([shards[k].rows for k in mine], dtype=np.int64)
            total = int(counts.sum())
            self.splits.append((first, total, split_keys(seed, split), starts[mine], lengths_to_offsets(counts)))
            first += total
        self.firsts = np.array([s[0] for s in self.splits] + [first], dtype=np.int64)

    def natural(self, position: int) -> int:
        split = int(np.searchsorted(self.firsts, position, side="right")) - 1
        first, total, keys, shard_starts, split_starts = self.splits[split]
        within = int(permuted(np.array([position - first]), total, keys)[0])
        shard = int(np.searchsorted(split_starts, within, side="right")) - 1
        return int(shard_starts[shard]) + within - int(split_starts[shard])
