"""The resolved configuration of one ``transform`` run, validated before any work starts."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import ObjcliError
from .readers.inputs import FORMATS, TEXT_UNITS

OUTPUT_FORMATS = ("arrow", "parquet", "npy", "megatron")
SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_bytes(text: str | int, option: str) -> int:
    """``"64MiB"`` -> 67108864; a plain number is bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in SIZE_UNITS or int(match.group(1)) <= 0:
        raise ObjcliError(f"{option} {text}: give a positive size such as 64MiB or 4MB")
    return int(match.group(1)) * SIZE_UNITS[unit]


@dataclass(frozen=True)
class ShardSize:
    """Shards close after ``rows`` rows, or after about ``bytes`` bytes of token data."""

    rows: int | None = None
    bytes: int | None = None

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
        return f"{self.rows} rows" if self.rows else f"{self.bytes} bytes"


@dataclass(frozen=True)
class TransformConfig:
    inputs: tuple[str, ...]
    tokenizer: str
    objective: str
    objective_options: Any
    output: str
    seq_len: int = 2048
    output_format: str = "arrow"
    shard_size: ShardSize = ShardSize(bytes=256 * 10**6)
    input_format: str = "auto"
    text_key: str = "text"
    text_unit: str = "line"
    strict: bool = False
    bos: bool = False
    eos: bool | None = None  # None: the objective's default (EOS between documents for clm)
    seed: int = 0
    bos_token: str | None = None  # override the tokenizer's own BOS / EOS piece
    eos_token: str | None = None
    partition_bytes: int = 64 * 2**20
    batch_bytes: int = 2**20
    max_document_chars: int = 10_000_000  # longer records become several documents (0: never)

    def __post_init__(self):
        if self.eos is None:
            from .objectives import REGISTRY

            object.__setattr__(self, "eos", REGISTRY.get(self.objective).default_eos)
        if self.seq_len < 2:
            raise ObjcliError(f"--seq-len {self.seq_len}: must be at least 2")
        if self.output_format not in OUTPUT_FORMATS:
            raise ObjcliError(f"--format {self.output_format}: choose one of {', '.join(OUTPUT_FORMATS)}")
        if self.input_format not in FORMATS:
            raise ObjcliError(f"--input-format {self.input_format}: choose one of {', '.join(FORMATS)}")
        if self.text_unit not in TEXT_UNITS:
            raise ObjcliError(f"--text-unit {self.text_unit}: choose one of {', '.join(TEXT_UNITS)}")
        if self.output == "-" and self.output_format != "arrow":
            raise ObjcliError("-o - writes an Arrow IPC stream; use --format arrow or write to a folder")
        if self.max_document_chars < 0:
            raise ObjcliError(f"--max-document-chars {self.max_document_chars}: give a positive number, or 0 to never cut")
        if self.partition_bytes < 1 or self.batch_bytes < 1:
            raise ObjcliError("--partition-size and --batch-size must be positive")
        if self.seed < 0:
            raise ObjcliError(f"--seed {self.seed}: must be a non-negative integer")

    def to_json(self) -> dict:
        """Every setting that shapes the output (not where it goes or how many workers run)."""
        data = dataclasses.asdict(self)
        data["objective_options"] = dataclasses.asdict(self.objective_options)
        data["shard_size"] = {"rows": self.shard_size.rows, "bytes": self.shard_size.bytes}
        data["inputs"] = list(self.inputs)
        del data["output"]
        return data

    def fingerprint(self, tokenizer_sha256: str) -> str:
        """sha256 of the configuration and tokenizer: two runs with equal fingerprints write the same bytes."""
        payload = json.dumps({"config": self.to_json(), "tokenizer": tokenizer_sha256}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()
