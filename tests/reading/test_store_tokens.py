"""A plan's ids gathered from its store (reading/store_tokens.py): a partition's record batches one after
another, each read over the blocks its positions lie in (and only those: each is checked when first read),
against NumPy's own gather over the ids joined and the blocks as a set of each position's."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.reading.store_tokens import PartitionIds, _Chunk


class _Source:
    """A shard's bytes with the blocks a read asked for recorded (a ``_Mapped`` without its checks)."""

    def __init__(self, data: bytes, block: int):
        self.data = np.frombuffer(data, np.uint8)
        self.blocks = type("Blocks", (), {"block": block})()
        self.touched: list[int] = []

    def read(self, start: int, stop: int, touched: np.ndarray) -> np.ndarray:
        self.touched += touched.tolist()
        return self.data[start:stop]


@st.composite
def partitions(draw):
    """Record batches' ids in one shard (after a header of some bytes), the block size, and positions."""
    dtype = np.dtype(draw(st.sampled_from([np.uint16, np.uint32])))
    counts = draw(st.lists(st.integers(0, 40), min_size=1, max_size=5))
    header = draw(st.integers(0, 9)) * dtype.itemsize
    ids = np.arange(sum(counts), dtype=dtype) * 7 % 1000
    data = bytes(header) + ids.tobytes()
    block = draw(st.sampled_from([2, 4, 8, 16, 64]))
    positions = draw(st.lists(st.integers(0, max(len(ids) - 1, 0)), max_size=60)) if len(ids) else []
    order = draw(st.sampled_from(["any", "sorted", "increasing"]))  # increasing: a concat row's, read as a stretch
    positions = {"any": positions, "sorted": sorted(positions), "increasing": sorted(set(positions))}[order]
    positions = np.array(positions, np.int64)
    return dtype, counts, header, ids, data, block, positions


@settings(max_examples=300, deadline=None)
@given(partitions())
def test_ids_are_those_at_the_positions_and_only_their_blocks_are_read(case):
    dtype, counts, header, ids, data, block, positions = case
    source = _Source(data, block)
    starts = header + np.concatenate([[0], np.cumsum(counts)[:-1]]) * dtype.itemsize
    chunks = [_Chunk(source, int(start), count, dtype) for start, count in zip(starts, counts)]
    taken = PartitionIds(chunks).take(positions)
    assert taken.dtype == dtype and taken.tolist() == ids[positions].tolist()
    expected = {(header + int(p) * dtype.itemsize) // block for p in positions}
    assert set(source.touched) == expected  # each block a position lies in, none other
    assert source.touched == sorted(source.touched) or len(counts) > 1  # a chunk's blocks in order
