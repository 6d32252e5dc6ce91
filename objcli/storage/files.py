"""Small file helpers shared by the output folder, the manifest and the readers of a finished run."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from .faults import crash_point

LOCK_NAME = ".objcli-lock"  # hidden: never an input, never a shard
WORK_FOLDER = ".objcli-tmp"  # a run's work files, inside the output folder (never through a link)


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json_atomically(path: Path, data: dict) -> None:
    temp = path.with_name(path.name + ".tmp")
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    try:
        with open(temp, "w", encoding="utf-8") as f:
            half = len(text) // 2
            f.write(text[:half])
            f.flush()
            crash_point(path.name)  # the resume tests kill a run halfway through writing this file
            f.write(text[half:])
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except OSError:
        temp.unlink(missing_ok=True)  # a full disk leaves no half file behind
        raise


OVERLAP_BYTES = 1 << 20  # a write this large is hashed on another thread while it is written
WRITEBACK_BYTES = 16 << 20  # a shard's writeback is started every this many bytes (see HashingFile)
_HASHER: ThreadPoolExecutor | None = None


def _hasher() -> ThreadPoolExecutor:
    global _HASHER
    if _HASHER is None:
        _HASHER = ThreadPoolExecutor(2, thread_name_prefix="objcli-sha256")
    return _HASHER


def _several_cores() -> bool:
    """Whether the calling thread may run on more than one core: a worker pinned to a core of its own
    (``run/affinity.py``) hashes in its own thread, as a second thread could only share its core
    (measured: 2-5 % less wall than handing the hash over)."""
    return not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) > 1


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Have the kernel start writing ``length`` bytes of a file being written (DONTNEED starts the
    writeback of dirty pages without waiting for it, and drops what is already clean), so that the
    fsync at its end waits for the last part only, not for the whole file. Not on macOS (no fadvise)."""
    if hasattr(os, "posix_fadvise"):
        with contextlib.suppress(OSError):  # a hint: a filesystem (or sandbox) that refuses it loses nothing
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


class HashingFile(io.RawIOBase):
    """A write-only file that feeds sha256 as it writes, so a shard is never read back to hash it.
    A large write is hashed on a thread while the file takes it (both release the GIL), unless the
    caller is pinned to one core; the call returns only when both are done, since a caller may reuse
    its buffer afterwards."""

    def __init__(self, path: Path):
        self.path = path
        self.file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.digest = hashlib.sha256()
        self.written = self.on_disk = 0  # bytes written; bytes whose writeback has been started

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if len(memoryview(data)) >= OVERLAP_BYTES and _several_cores():
            hashed: Future = _hasher().submit(self.digest.update, data)
            written = self.file.write(data)
            hashed.result()
        else:
            self.digest.update(data)
            written = self.file.write(data)
        self.written += written
        if self.written - self.on_disk >= WRITEBACK_BYTES:
            self.file.flush()
            start_writeback(self.file.fileno(), self.on_disk, self.written - self.on_disk)
            self.on_disk = self.written
        crash_point("shard-write")
        return written

    def close(self) -> None:
        if not self.file.closed:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
        super().close()
