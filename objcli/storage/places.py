"""Where an output lives: a local folder, or a prefix in object storage, behind one small interface.

The output protocol (output.py) is the same on both: shards are written to a work folder under
names of their own, promoted to their final names once every partition is done, and
``manifest.json``, written last, marks the run complete. What differs is only how each step is
made safe:

==================  ===================================  ===========================================
step                local folder                         object storage
==================  ===================================  ===========================================
write a shard       temp file, fsync, rename             written on local disk (a staging folder on
                                                         whatever machine runs the partition), then
                                                         uploaded (multipart when large): an object
                                                         exists only once its upload completed
promote a shard     rename                               server-side copy from the work prefix
one writer          ``flock`` on ``.objcli-lock``        a ``.objcli-lock`` object created only if
                                                         absent (S3's conditional put), removed at
                                                         the end; a dead run's lock on this host is
                                                         taken over
check a kept file   sha256 of its bytes                  its size (reading it back would cost a
                                                         download of the whole output)
==================  ===================================  ===========================================
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import socket
from pathlib import Path

from ..errors import ObjcliError
from .faults import crash_point
from .files import LOCK_NAME, WORK_FOLDER, file_sha256, write_json_atomically
from .remote import is_url
from .remote_place import RemotePlace


def open_place(location: str | Path) -> LocalPlace | RemotePlace:
    return RemotePlace(str(location)) if is_url(str(location)) else LocalPlace(Path(location))


class LocalPlace:
    """A folder on this machine."""

    remote = False
    took_over = False  # the lock file named a writer: a run killed before it could unlock

    def __init__(self, path: Path):
        self.path = path
        self.where = str(path)

    def child(self, folder: str) -> LocalPlace:
        return LocalPlace(self.path / folder)

    def staging(self) -> Path:
        """Where writers put this store's files: the folder itself."""
        self.path.mkdir(parents=True, exist_ok=True)
        return self.path

    def names(self, prefix: str = "") -> list[str]:
        """Names of the files directly in the folder (those starting with ``prefix``)."""
        if not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.glob(f"{glob.escape(prefix)}*") if p.is_file())

    def read_text(self, name: str) -> str | None:
        try:
            return (self.path / name).read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def read_json(self, name: str) -> dict | None:
        try:
            with open(self.path / name, encoding="utf-8") as f:
                data = json.load(f)
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def write_json(self, name: str, data: dict) -> None:
        write_json_atomically(self.path / name, data)

    def _through_link(self, name: str) -> bool:
        """Whether a name's folder part (a split's folder) is a symbolic link: out of the folder."""
        parent = (self.path / name).parent
        return parent != self.path and parent.is_symlink()

    def write_text(self, name: str, text: str) -> None:
        if self._through_link(name):
            raise ObjcliError(f"output {self.path}: {Path(name).parent} is a symbolic link; remove it and rerun")
        temp = self.path / (name + ".tmp")
        temp.parent.mkdir(exist_ok=True)  # a split's folder (--format hf --split)
        try:
            temp.write_text(text, encoding="utf-8")
            crash_point("format-file")
            os.replace(temp, self.path / name)
        finally:
            temp.unlink(missing_ok=True)

    def delete(self, name: str) -> None:
        if not self._through_link(name):  # never a file outside the folder
            (self.path / name).unlink(missing_ok=True)

    def remove_empty_folder(self, name: str) -> None:
        if (self.path / name).is_symlink():
            return
        try:
            (self.path / name).rmdir()
        except OSError:  # missing, or holding files of the user's own
            pass

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def matches(self, name: str, sha256: str, size: int | None) -> bool | None:
        """Whether the file holds what was recorded; None if it is missing."""
        path = self.path / name
        return file_sha256(path) == sha256 if path.exists() else None

    def publish(self, path: Path) -> None:
        """A finished file in ``staging()`` is already in place."""

    def fetch(self, name: str, folder: Path) -> None:
        """A file of this place into ``folder`` (the staging folder: already there)."""

    def promote(self, work: LocalPlace, renames: list[tuple[str, str]]) -> list[str]:
        """Move work files to their final names here; returns the work names found nowhere (a file
        already moved by an earlier try is where it belongs)."""
        missing = []
        for old, new in renames:
            if (work.path / old).exists():
                os.replace(work.path / old, self.path / new)
                crash_point("rename")
            elif not (self.path / new).exists():
                missing.append(old)
        return missing

    def flush(self) -> None:
        """Files are in place as soon as they are written."""

    def stamp(self, name: str) -> None:
        os.utime(self.path / name)

    def lock(self) -> None:
        """An exclusive ``flock`` on ``.objcli-lock``, held until ``unlock`` (or the process ends:
        the kernel drops a dead run's lock)."""
        self.check_own_paths()
        try:
            self._lock_file = open(self.path / LOCK_NAME, "a+")  # noqa: SIM115 - closed in unlock()
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.seek(0)
            holder = self._lock_file.read().strip() or "another process"
            self._lock_file.close()
            self._lock_file = None
            raise ObjcliError(
                f"output {self.path}: another run ({holder}) is writing it; wait for it to finish or choose another -o"
            ) from None
        self._lock_file.seek(0)
        self.took_over = bool(self._lock_file.read().strip())  # a writer's pid left behind: that run was killed
        self._lock_file.truncate(0)
        self._lock_file.write(f"pid {os.getpid()} on {socket.gethostname()}")
        self._lock_file.flush()

    def check_own_paths(self) -> None:
        """The lock file and the work folder are objcli's, inside the output: one that is a symbolic
        link (to scratch space, say) would have a run clear stale files and write there, outside."""
        for name in (LOCK_NAME, WORK_FOLDER):
            if (self.path / name).is_symlink():
                raise ObjcliError(
                    f"output {self.path}: {name} is a symbolic link (to {os.readlink(self.path / name)}), where objcli "
                    "keeps its own work files; remove the link and rerun (to put a run's files on scratch space, "
                    "give -o a folder there)"
                )

    def unlock(self) -> None:
        if getattr(self, "_lock_file", None) is not None:
            self._lock_file.truncate(0)  # an empty lock file: no writer (the same bytes after every run)
            self._lock_file.close()  # releases the lock
            self._lock_file = None

    def close(self) -> None:
        """Nothing staged elsewhere."""
