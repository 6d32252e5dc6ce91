"""Sizes as a user writes them: bytes (``64MiB``, ``4MB``) and shard sizes (rows, or bytes of token data)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ObjcliError

SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_bytes(text: str | int, name: str) -> int:
    """``"64MiB"`` -> 67108864; a plain number is bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in SIZE_UNITS or int(match.group(1)) <= 0:
        raise ObjcliError(f"{name} {text}: give a positive size such as 64MiB or 4MB")
    return int(match.group(1)) * SIZE_UNITS[unit]


@dataclass(frozen=True)
class ShardSize:
    """Shards close after ``rows`` rows, or after about ``bytes`` bytes of token data."""

    rows: int | None = None
    bytes: int | None = None
    count: int | None = None  # reshard --num-shards: this many shards per split, rows balanced to within one

    def row_counts(self, rows: int) -> tuple[int, ...]:
        """Each shard's rows when ``count`` shards share ``rows`` (the first ``rows % count`` get one more)."""
        count = min(self.count, max(rows, 1))
        return tuple(rows // count + (i < rows % count) for i in range(count))

    @classmethod
    def parse(cls, text: str | int) -> ShardSize:
        """``"100000"`` -> 100,000 rows; ``"256MB"`` / ``"1GiB"`` -> bytes."""
        match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
        if not match or int(match.group(1)) <= 0:
            raise ObjcliError(f"--shard-size {text}: give a positive row count (10000) or a size (256MB)")
        number, unit = int(match.group(1)), match.group(2).lower()
        if unit in ("", "rows"):
            return cls(rows=number)
        if unit not in SIZE_UNITS:
            raise ObjcliError(f"--shard-size {text}: unknown unit '{unit}'; use rows, KB, MB, GB, KiB, MiB or GiB")
        return cls(bytes=number * SIZE_UNITS[unit])

    def __str__(self) -> str:
        if self.count:
            return f"{self.count} shards"
        return f"{self.rows} rows" if self.rows else f"{self.bytes} bytes"
