"""Resharding Arrow stream shards (``arrow``, ``hf``) without decoding a row: the fast path of
``objcli reshard`` when shards grow (every source shard fits the new ``--shard-size``).

An Arrow IPC stream file is its schema message, record batch messages, and an end-of-stream
marker. A new shard is the schema message, the record batch messages of consecutive source shards
copied as they are (``copy_file_range``: in the kernel, no pass through user space), and the
marker, so every row is byte-identical to the source's and its bookkeeping is the sum of whole
source shards' (exact per shard, not only in total). The sha256 of each new file is computed from
the source's memory-mapped bytes on another thread while the kernel copies them; new shards are
built two or more at a time (both calls release the GIL). Anything else (a shard larger than the
new size, a row count as the size, a stream holding other messages or another schema) goes through
the format's writer instead, row by row.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..formats import format_of
from ..run.progress import phase
from ..storage.faults import crash_point
from ..storage.files import start_writeback
from ..storage.shard_info import TEMP_SUFFIX, ShardRecord, work_prefix
from .rebuild import link_or_copy

END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"
SCHEMA, RECORD_BATCH = 1, 3  # MessageHeader, the union of format/Message.fbs


@dataclass(frozen=True)
class StreamLayout:
    """Where a stream file's record batches lie: ``[body_start, body_end)``, after its schema message."""

    path: Path
    schema: bytes
    body_start: int
    body_end: int

    @property
    def body_bytes(self) -> int:
        return self.body_end - self.body_start


def stream_layout(path: Path) -> StreamLayout | None:
    """The layout of an Arrow stream file, or None when it holds anything but one schema message,
    record batches and the end-of-stream marker, or cannot be read (then the writer's path takes
    it, and names what is wrong)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _layout(path, data)
    except (OSError, ValueError, IndexError, struct.error):  # mmap of an empty file is a ValueError
        return None


def _layout(path: Path, data) -> StreamLayout | None:
    kind, body_start = _message_at(data, 0) or (None, 0)
    if kind != SCHEMA:
        return None
    offset = body_start
    while (message := _message_at(data, offset)) is not None:
        kind, offset = message
        if kind != RECORD_BATCH:
            return None
    if len(data) != offset + len(END_OF_STREAM) or data[offset:] != END_OF_STREAM:
        return None
    return StreamLayout(path, bytes(data[:body_start]), body_start, offset)


def _message_at(data, offset: int) -> tuple[int, int] | None:
    """(header type, offset after the message) of the encapsulated message at ``offset``, or None at
    the end-of-stream marker (the Arrow columnar format's "Encapsulated message format": 0xFFFFFFFF,
    the metadata's int32 length, a flatbuffer ``Message``, then ``bodyLength`` bytes of body)."""
    if data[offset : offset + 4] != END_OF_STREAM[:4]:
        raise ValueError("no continuation marker: not a stream this version of the format writes")
    (length,) = struct.unpack_from("<i", data, offset + 4)
    if length == 0:
        return None
    start = offset + 8
    if length < 0 or start + length > len(data):
        raise ValueError("metadata past the end of the file")
    kind, body = _header_and_body_length(data, start, start + length)
    end = start + length + body
    if body < 0 or end > len(data):
        raise ValueError("body past the end of the file")
    return kind, end


def _header_and_body_length(data, start: int, stop: int) -> tuple[int, int]:
    """``header_type`` (field 1) and ``bodyLength`` (field 3) of the flatbuffer ``Message`` table
    (format/Message.fbs) in ``data[start:stop]``: the root offset, the table, its vtable."""
    (root,) = struct.unpack_from("<I", data, start)
    table = start + root
    vtable = table - struct.unpack_from("<i", data, table)[0]
    if not (start <= vtable < stop and start <= table < stop):
        raise ValueError("a Message table outside its metadata")
    (vtable_size,) = struct.unpack_from("<H", data, vtable)

    def field(index: int) -> int:  # the field's offset in the table, 0 when absent (its default)
        slot = 4 + 2 * index
        return struct.unpack_from("<H", data, vtable + slot)[0] if slot + 2 <= vtable_size else 0

    kind, body = field(1), field(3)
    return (data[table + kind] if kind else 0), (struct.unpack_from("<q", data, table + body)[0] if body else 0)


def plan_groups(layouts: list[StreamLayout], splits: list[str], limit: int) -> list[list[int]] | None:
    """Consecutive source shards of one split per new shard, as many as fit ``limit`` bytes of
    record batches (splits in the order they first appear, as the writer path orders them); None
    when a source shard alone is larger than ``limit``, or the schemas differ."""
    if any(layout.body_bytes > limit for layout in layouts) or len({layout.schema for layout in layouts}) > 1:
        return None
    groups: list[list[int]] = []
    for split in dict.fromkeys(splits):
        size = 0
        current: list[int] = []
        for index in (i for i, s in enumerate(splits) if s == split):
            if current and size + layouts[index].body_bytes > limit:
                groups.append(current)
                current, size = [], 0
            current.append(index)
            size += layouts[index].body_bytes
        groups.append(current)
    return groups


def _sha256_of(parts: list[StreamLayout], schema: bytes) -> str:
    digest = hashlib.sha256(schema)
    for part in parts:
        with open(part.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            with memoryview(mapped) as view:
                digest.update(view[part.body_start : part.body_end])
    digest.update(END_OF_STREAM)
    return digest.hexdigest()


def _copy_bodies(parts: list[StreamLayout], schema: bytes, temp: Path) -> None:
    with open(temp, "wb") as out:
        out.write(schema)
        out.flush()
        written = len(schema)
        for part in parts:
            with open(part.path, "rb") as source:
                offset, left = part.body_start, part.body_bytes
                while left:
                    copied = os.copy_file_range(source.fileno(), out.fileno(), left, offset)
                    if not copied:
                        raise OSError(f"{part.path}: shorter than its manifest says")
                    offset, left = offset + copied, left - copied
            start_writeback(out.fileno(), written, part.body_bytes)  # 1 GB: 0.79-1.26 s -> 0.56-0.78 s
            written += part.body_bytes
            crash_point("shard-write")
        out.write(END_OF_STREAM)
        out.flush()
        os.fsync(out.fileno())


def copy_group(work: Path, name: str, parts: list[StreamLayout]) -> None:
    """One new shard: the bodies of ``parts`` copied under the schema; a shard of one source shard is
    that file (hard-linked where the filesystem allows)."""
    if len(parts) == 1:
        link_or_copy(parts[0].path, work / name, "shard-write")
    else:
        temp = work / (name + TEMP_SUFFIX)
        _copy_bodies(parts, parts[0].schema, temp)
        os.replace(temp, work / name)
    crash_point("shard-committed")


def _shard_info(work: Path, ordinal: int, split: str, name: str, digest: str, records: list) -> ShardRecord:
    return ShardRecord(
        0,
        ordinal,
        [name],
        {name: digest},
        rows=sum(r.rows for r in records),
        tokens=sum(r.tokens for r in records),
        padding_tokens=sum(r.padding_tokens for r in records),
        documents=sum(r.documents for r in records),
        segments=sum(r.segments for r in records),
        split=split,
        bytes={name: (work / name).stat().st_size},
    )


def reshard_streams(folder: Path, manifest, work: Path, limit_bytes: int) -> list[ShardRecord] | None:
    """The new shards, or None when this path does not apply (see the module). Copies and hashes are
    queued apart, so that no copy waits for the hash of the shard before it: hashing (0.5 s of CPU
    per GB) is the longer of the two, and the copies then fill the cores' gaps."""
    if not format_of(manifest.format).arrow_stream or not hasattr(os, "copy_file_range"):
        return None
    if any(len(shard.files) != 1 for shard in manifest.shards):
        return None
    layouts = [stream_layout(folder / shard.files[0]) for shard in manifest.shards]
    if not layouts or any(layout is None for layout in layouts):
        return None
    groups = plan_groups(layouts, [s.split for s in manifest.shards], limit_bytes)
    if groups is None:
        return None
    ordinals: dict[str, int] = {}
    workers = max(2, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as hasher, ThreadPoolExecutor(workers) as copier:
        jobs = []
        for group in groups:
            parts, records = [layouts[i] for i in group], [manifest.shards[i] for i in group]
            split = records[0].split
            ordinal = ordinals[split] = ordinals.get(split, -1) + 1
            name = work_prefix(0, split, ordinal) + ".arrow"  # hf shards are Arrow streams too
            known = records[0].sha256[parts[0].path.name] if len(parts) == 1 else None  # a linked file's own
            digest = hasher.submit(str, known) if known else hasher.submit(_sha256_of, parts, parts[0].schema)
            jobs.append((copier.submit(copy_group, work, name, parts), digest, (ordinal, split, name, records)))
        shards = []
        shown = phase("reshard", len(jobs), "shards")
        for copied, digest, (ordinal, split, name, records) in jobs:
            shown.update(1)
            copied.result()
            shards.append(_shard_info(work, ordinal, split, name, digest.result(), records))
        return shards
