"""Megatron shards joined into one ``.bin``/``.idx`` pair, as Megatron-LM's ``merge_datasets.py`` lays
it out: the ``.bin`` files back to back (copied by the kernel), the index's sizes, pointers (shifted by
the bytes before) and document boundaries (shifted by the sequences before), streamed one index at a
time. ``merge`` joins each split's shards; a run joins its partitions' shards into prefixes as large
as ``--shard-size`` (``join_shards``), so Megatron's builder gets as few, large prefixes as asked."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np

from ..storage.files import HashingFile
from ..storage.shard_info import ShardRecord
from .megatron import DOCUMENT_SUFFIX, index_array, index_header, read_index_header
from .provenance import join_provenance, provenance_file

BLOCK = 8 << 20  # bytes per read where a file is copied through user space


def sha256_of(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            while block := f.read(BLOCK):
                digest.update(block)  # releases the GIL on large blocks
    return digest.hexdigest()


def concatenate(paths: list[Path], target: Path) -> tuple[str, int]:
    """The files back to back in ``target``: copied by the kernel (``copy_file_range``, no bytes
    through Python) while a second thread hashes the same bytes from the sources (the page cache),
    so the copy and sha256 run on two cores. Returns (sha256, size)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        digest = pool.submit(sha256_of, paths)
        with open(target, "wb") as out:
            for path in paths:
                with open(path, "rb") as f:
                    copy_all(f, out, path.stat().st_size)
            out.flush()
            os.fsync(out.fileno())
            size = out.tell()
        return digest.result(), size


def copy_all(source, target, size: int) -> None:
    try:
        while size > 0:
            copied = os.copy_file_range(source.fileno(), target.fileno(), min(size, 1 << 30))
            if copied == 0:
                break
            size -= copied
        target.seek(0, os.SEEK_END)
    except (OSError, AttributeError):  # a filesystem or kernel without it
        shutil.copyfileobj(source, target, BLOCK)


def joined_index(idxs: list[Path], bins: list[Path], headers, code: int, path: Path) -> HashingFile:
    """The ``.idx`` of the joined ``.bin``: sizes, pointers shifted by the bins before, document
    boundaries shifted by the sequences before (each index read a part at a time)."""
    out_idx = HashingFile(path)
    out_idx.write(index_header(code, sum(h[1] for h in headers), sum(h[2] - 1 for h in headers) + 1))
    for idx, (_, n, d) in zip(idxs, headers):
        out_idx.write(index_array(idx, n, d, "sizes"))
    shift = 0
    for idx, bin_path, (_, n, d) in zip(idxs, bins, headers):
        out_idx.write(index_array(idx, n, d, "pointers") + shift)
        shift += bin_path.stat().st_size
    out_idx.write(np.zeros(1, "<i8"))
    sequences = 0
    for idx, (_, n, d) in zip(idxs, headers):
        out_idx.write(index_array(idx, n, d, "documents")[1:] + sequences)
        sequences += n
    return out_idx


def join(shards: list[tuple[Path, ShardRecord]], work: Path, prefix: str, partition: int, ordinal: int) -> ShardRecord:
    """One ``.bin``/``.idx`` pair (and provenance sidecar) in ``work`` named ``prefix`` from the shards,
    each in its folder, in order; its record sums theirs. ``ValueError`` when their dtypes differ."""
    name = prefix + DOCUMENT_SUFFIX
    bins = [folder / s.files[0] for folder, s in shards]
    idxs = [folder / s.files[1] for folder, s in shards]
    headers = [read_index_header(p) for p in idxs]
    codes = {h[0] for h in headers}
    if len(codes) != 1:
        raise ValueError("the Megatron shards store tokens in different dtypes (uint16 and int32)")
    bin_digest, bin_size = concatenate(bins, work / (name + ".bin"))
    out_idx = joined_index(idxs, bins, headers, codes.pop(), work / (name + ".idx"))
    files = [name + ".bin", name + ".idx"]
    out_idx.close()
    digests = [bin_digest, out_idx.digest.hexdigest()]
    records = [s for _, s in shards]
    sizes = {files[0]: bin_size, files[1]: out_idx.path.stat().st_size}
    if all(provenance_file(s) for s in records):  # --provenance: the spans joined as the rows are
        sidecars = [folder / provenance_file(s) for folder, s in shards]
        path, digest = join_provenance(sidecars, [s.rows for s in records], work / prefix)
        files.append(path.name)
        digests.append(digest)
        sizes[path.name] = path.stat().st_size
    return ShardRecord(
        partition=partition,
        ordinal=ordinal,
        files=files,
        sha256=dict(zip(files, digests)),
        rows=sum(s.rows for s in records),
        tokens=sum(s.tokens for s in records),
        padding_tokens=sum(s.padding_tokens for s in records),
        documents=sum(s.documents for s in records),
        segments=sum(s.segments for s in records),
        split=records[0].split,
        bytes=sizes,
    )
