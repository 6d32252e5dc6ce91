"""A finished shard's record (what the manifest lists) and the names shards have while they are
written: what the writers, the output folder and merge/reshard share. No NumPy or Arrow here (msgspec only), so a
command that only moves finished shards (a reshard by record batches) starts without importing them."""

from __future__ import annotations

import msgspec

TEMP_SUFFIX = ".tmp"


def work_prefix(partition: int, split: str, ordinal: int) -> str:
    """A shard's name in the work folder: ``p00003-s00001``, or ``p00003-validation-s00001``; a shard
    of ``--shuffle-rows`` (partition -1, rows from every partition): ``shuffled-s00001``; shards joined
    from several partitions' (a negative ordinal, ``run/finish.join_prefixes``): ``p00003-j00001``."""
    owner = "shuffled" if partition < 0 else f"p{partition:05d}"
    number = f"s{ordinal:05d}" if ordinal >= 0 else f"j{-ordinal:05d}"
    return f"{owner}-{split}-{number}" if split else f"{owner}-{number}"


def work_place(name: str) -> tuple[int, str] | None:
    """(partition, split) a work name (``work_prefix``'s) gives, or None for rows of several partitions."""
    import re

    found = re.match(r"^p(\d{5,})-(?:(.+)-)?[sj]\d{5}", name)  # five digits, more past 99,999
    return (int(found.group(1)), found.group(2) or "") if found else None


class ShardRecord(msgspec.Struct):
    """One shard: what its sink counted while writing it, and what the manifest lists."""

    partition: int
    ordinal: int
    files: list[str]  # file names (in the folder the sink wrote to)
    sha256: dict[str, str]
    rows: int = 0
    tokens: int = 0
    padding_tokens: int = 0
    documents: int = 0  # documents whose first token is in this shard
    segments: int = 0  # examples in this shard (packed segments, or rows)
    split: str = ""  # with --split: train, validation, ...
    bytes: dict[str, int] = {}  # each file's size (how object storage checks it; manifests before it lack it)

    def to_json(self) -> dict:
        return msgspec.to_builtins(self)

    def renamed(self, rename: dict[str, str], **changes) -> ShardRecord:
        """The same shard with its files renamed (``rename``: old name -> new) and ``changes`` made."""
        files = [rename[n] for n in self.files]
        sha256 = {rename[n]: d for n, d in self.sha256.items()}
        sizes = {rename[n]: b for n, b in self.bytes.items()}
        return msgspec.structs.replace(self, files=files, sha256=sha256, bytes=sizes, **changes)

    @classmethod
    def from_json(cls, data: dict) -> ShardRecord:
        return msgspec.convert(data, cls)

    @classmethod
    def joined(cls, records: list, partition: int, ordinal: int, sha256: dict, sizes: dict) -> ShardRecord:
        """A shard joined from ``records``' rows (their counts summed), its files those of ``sha256``."""
        return cls(
            partition=partition,
            ordinal=ordinal,
            files=list(sha256),
            sha256=dict(sha256),
            rows=sum(s.rows for s in records),
            tokens=sum(s.tokens for s in records),
            padding_tokens=sum(s.padding_tokens for s in records),
            documents=sum(s.documents for s in records),
            segments=sum(s.segments for s in records),
            split=records[0].split,
            bytes=dict(sizes),
        )
