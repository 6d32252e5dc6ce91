"""``-o -``: the run's rows as one Arrow IPC stream on standard output, partitions in order."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa

from ..formats._arrow_columns import arrow_schema
from ..storage.partitions import PartitionResult


class StdoutStream:
    """Streams finished partitions to standard output in partition order."""

    def __init__(self, columns, work: Path):
        self.work = work
        self.writer = pa.ipc.new_stream(pa.PythonFile(sys.stdout.buffer, mode="w"), arrow_schema(columns))
        self.next_index = 0
        self.waiting: dict[int, PartitionResult] = {}

    def add(self, result: PartitionResult) -> None:
        self.waiting[result.index] = result
        while self.next_index in self.waiting:
            for shard in self.waiting.pop(self.next_index).shards:
                for name in shard.files:
                    with pa.ipc.open_stream(pa.memory_map(str(self.work / name))) as reader:
                        for batch in reader:
                            self.writer.write_batch(batch)
                    (self.work / name).unlink()
            self.next_index += 1

    def close(self) -> None:
        self.writer.close()
        sys.stdout.buffer.flush()
