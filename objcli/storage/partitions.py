"""A finished partition: what it read, skipped and wrote (``PartitionResult``), and the marker that
says it is done (``pNNNNN.done.json`` in the work folder), written after its shards, so a rerun keeps
exactly the partitions whose marker and shards are there."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .faults import crash_point
from .places import LocalPlace, RemotePlace
from .shard_info import ShardRecord


@dataclass
class PartitionResult:
    index: int
    documents_read: int
    skipped: dict[str, int]
    first_examples: dict[str, str]
    counters: dict[str, int]
    shards: list[ShardRecord]
    text_bytes: int
    seconds: float

    @property
    def documents_skipped(self) -> int:
        return sum(self.skipped.values())

    @property
    def documents_written(self) -> int:
        return self.documents_read - self.documents_skipped

    def to_json(self) -> dict:
        return {
            **{k: getattr(self, k) for k in self.__dataclass_fields__},
            "shards": [s.to_json() for s in self.shards],
        }

    @classmethod
    def from_json(cls, data: dict) -> PartitionResult:
        return cls(**{**data, "shards": [ShardRecord.from_json(s) for s in data["shards"]]})


def marker_name(partition: int) -> str:
    return f"p{partition:05d}.done.json"


def _partition_of(name: str) -> int | None:
    """The partition a work file belongs to (``pNNNNN.*``, ``pNNNNN-*``: five digits, more past 99,999)."""
    found = re.match(r"p(\d{5,})[.-]", name)
    return int(found.group(1)) if found else None


def partitions_with_files(work: LocalPlace | RemotePlace) -> set[int]:
    """The partitions an earlier attempt left files of, from one listing: a run asks once, so a partition
    that left none starts without listing a work folder of thousands of partitions' files (a listing a
    partition made the run quadratic in its partitions)."""
    return {index for index in map(_partition_of, work.names("p")) if index is not None}


def clear_partition(work: LocalPlace | RemotePlace, partition: int) -> None:
    """Remove whatever an earlier attempt at this partition left (shards, temp files, marker)."""
    for name in work.names(f"p{partition:05d}"):
        if _partition_of(name) == partition:
            work.delete(name)


def write_marker(work: LocalPlace | RemotePlace, result: PartitionResult, config_sha256: str, run_key: str) -> None:
    marker = {"config_sha256": config_sha256, "run_key": run_key, "result": result.to_json()}
    work.write_json(marker_name(result.index), marker)
    crash_point("partition-done")
