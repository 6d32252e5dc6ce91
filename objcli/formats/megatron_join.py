"""Megatron shards joined into one ``.bin``/``.idx`` pair, as Megatron-LM's ``merge_datasets.py`` lays
it out: the ``.bin`` files back to back (copied by the kernel), the index's sizes, pointers (shifted by
the bytes before) and document boundaries (shifted by the sequences before), streamed one index at a
time. ``merge`` joins each split's shards; a run joins its partitions' shards into prefixes as large
as ``--shard-size`` (``join_shards``), so Megatron's builder gets as few, large prefixes as asked."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..storage.files import HashingFile
from ..storage.shard_info import ShardRecord
from .megatron_index import DOCUMENT_SUFFIX, MASK_SUFFIX, index_array, index_header, read_index_header
from .provenance import join_provenance, provenance_file

BLOCK = 8 << 20  # bytes per read where a file is copied through user space


def sha256_of(ranges: list[tuple[Path, int, int]]) -> str:
    digest = hashlib.sha256()
    for path, start, size in ranges:
        with open(path, "rb") as f:
            f.seek(start)
            while size > 0 and (block := f.read(min(BLOCK, size))):
                digest.update(block)  # releases the GIL on large blocks
                size -= len(block)
    return digest.hexdigest()


def concatenate(ranges: list[tuple[Path, int, int]], target: Path) -> tuple[str, int]:
    """The byte ranges (file, start, size) back to back in ``target``: copied by the kernel
    (``copy_file_range``, no bytes through Python) while a second thread hashes the same bytes from the
    sources (the page cache), so the copy and sha256 run on two cores. Returns (sha256, size)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        digest = pool.submit(sha256_of, ranges)
        with open(target, "wb") as out:
            for path, start, size in ranges:
                with open(path, "rb") as f:
                    f.seek(start)
                    copy_all(f, out, size)
            out.flush()
            os.fsync(out.fileno())
            size = out.tell()
        return digest.result(), size


def copy_all(source, target, size: int) -> None:
    """``size`` bytes from ``source``'s position to the end of ``target``."""
    start = source.tell()
    try:
        while size > 0:
            copied = os.copy_file_range(source.fileno(), target.fileno(), min(size, 1 << 30), start)
            if copied == 0:
                break
            size, start = size - copied, start + copied
        target.seek(0, os.SEEK_END)
    except (OSError, AttributeError):  # a filesystem or kernel without it
        source.seek(start)
        while size > 0 and (block := source.read(min(BLOCK, size))):
            target.write(block)
            size -= len(block)


class Piece:
    """Rows ``start:stop`` of a Megatron shard in ``folder`` (its index read once): its tokens' prefix, or
    the one named ``suffix`` (chat's loss mask)."""

    def __init__(self, folder: Path, shard: ShardRecord, start: int = 0, stop: int | None = None, suffix=""):
        self.folder, self.shard = folder, shard
        self.start, self.stop = start, shard.rows if stop is None else stop
        name = next(f for f in shard.files if f.endswith(suffix + ".bin")).removesuffix(".bin") if suffix else None
        self.bin, self.idx = (folder / f"{name}.bin", folder / f"{name}.idx") if name else (
            folder / shard.files[0], folder / shard.files[1])  # fmt: skip
        self.code, count, entries = read_index_header(self.idx)
        self.sizes = index_array(self.idx, count, entries, "sizes")
        self.pointers = index_array(self.idx, count, entries, "pointers")
        self.documents = index_array(self.idx, count, entries, "documents")
        if count != shard.rows or not 0 <= self.start <= self.stop <= count:
            raise ObjcliError(
                f"{self.idx}: holds {count:,} rows, where the manifest says {shard.rows:,}; rerun the transform"
            )

    @property
    def whole(self) -> bool:
        return (self.start, self.stop) == (0, self.shard.rows)

    def byte_range(self) -> tuple[Path, int, int]:
        end = int(self.pointers[self.stop]) if self.stop < len(self.pointers) else self.bin.stat().st_size
        first = int(self.pointers[self.start]) if self.start < len(self.pointers) else end
        return self.bin, first, end - first

    def boundaries(self) -> np.ndarray:
        """The document boundaries within the rows, from 0 to their count (a row range cuts between rows)."""
        inside = self.documents[(self.documents > self.start) & (self.documents < self.stop)] - self.start
        return np.concatenate([[0], inside, [self.stop - self.start]]).astype("<i8")

    def record(self) -> ShardRecord:
        """The record of the rows: the shard's own, or for a part of a shard of whole documents (one a row,
        no padding, which ``splits_into_rows`` checks) counted from its index."""
        if self.whole:
            return self.shard
        rows = self.stop - self.start
        tokens = int(self.sizes[self.start : self.stop].sum())
        return ShardRecord(self.shard.partition, self.shard.ordinal, [], {}, rows=rows, tokens=tokens,
                           documents=rows, segments=rows, split=self.shard.split)  # fmt: skip


def splits_into_rows(shard: ShardRecord) -> bool:
    """A shard whose rows are each one whole document with no padding (Megatron's default, ``--packing
    none``): any range of its rows is counted exactly from its index, so a join may cut it."""
    return shard.padding_tokens == 0 and shard.documents == shard.rows == shard.segments


def joined_index(pieces: list[Piece], path: Path) -> HashingFile:
    """The ``.idx`` of the joined ``.bin``: sizes, pointers shifted by the bytes before, document
    boundaries shifted by the sequences before."""
    out_idx = HashingFile(path)
    boundaries = [p.boundaries() for p in pieces]
    rows = sum(p.stop - p.start for p in pieces)
    out_idx.write(index_header(pieces[0].code, rows, sum(len(b) - 1 for b in boundaries) + 1))
    for piece in pieces:
        out_idx.write(piece.sizes[piece.start : piece.stop])
    shift = 0
    for piece in pieces:
        _, first, size = piece.byte_range()
        out_idx.write(piece.pointers[piece.start : piece.stop] - first + shift)
        shift += size
    out_idx.write(np.zeros(1, "<i8"))
    sequences = 0
    for piece, bounds in zip(pieces, boundaries):
        out_idx.write(bounds[1:] + sequences)
        sequences += piece.stop - piece.start
    return out_idx


def join(pieces: list[Piece], work: Path, prefix: str, partition: int, ordinal: int) -> ShardRecord:
    """One ``.bin``/``.idx`` pair (and provenance sidecar) in ``work`` named ``prefix`` from the pieces
    (whole shards, or row ranges of them), in order; its record sums theirs. ``ValueError`` when their
    dtypes differ."""
    if len({p.code for p in pieces}) != 1:
        raise ValueError("the Megatron shards store tokens in different dtypes (uint16 and int32)")
    files, digests, sizes = [], [], {}
    prefixes = [(DOCUMENT_SUFFIX, pieces)]
    if any(f.endswith(MASK_SUFFIX + ".bin") for f in pieces[0].shard.files):  # chat: its loss mask beside
        prefixes.append((MASK_SUFFIX, [Piece(p.folder, p.shard, p.start, p.stop, MASK_SUFFIX) for p in pieces]))
    for suffix, parts in prefixes:
        name = prefix + suffix
        bin_digest, bin_size = concatenate([p.byte_range() for p in parts], work / (name + ".bin"))
        out_idx = joined_index(parts, work / (name + ".idx"))
        out_idx.close()
        files += [name + ".bin", name + ".idx"]
        digests += [bin_digest, out_idx.digest.hexdigest()]
        sizes.update({name + ".bin": bin_size, name + ".idx": out_idx.path.stat().st_size})
    records = [p.record() for p in pieces]
    if all(provenance_file(p.shard) for p in pieces):  # --provenance: the spans joined as the rows are
        sidecars = [(p.folder / provenance_file(p.shard), p.start, p.stop) for p in pieces]
        path, digest = join_provenance(sidecars, work / prefix)
        files.append(path.name)
        digests.append(digest)
        sizes[path.name] = path.stat().st_size
    return ShardRecord.joined(records, partition, ordinal, dict(zip(files, digests)), sizes)
