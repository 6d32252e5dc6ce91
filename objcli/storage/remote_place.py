"""An output in object storage (S3, GCS, ``hf://``, any fsspec filesystem): shards written on local
disk and uploaded, promoted by server-side copies, one writer by a lock object created only if
absent. ``places.py`` gives the table of how each step is made safe here and in a local folder."""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..errors import ObjcliError
from .faults import crash_point
from .files import LOCK_NAME
from .remote import check_url_path, filesystem, join, public_url, storage_error, storage_errors
from .staging import STAGING_PREFIX, process_alive, remove_dead_staging

UPLOADS_AHEAD = 2  # finished shards waiting for their upload, per partition
COPIES_AT_ONCE = 16  # server-side copies in flight when shards get their final names


class RemotePlace:
    """A prefix in object storage (or any fsspec filesystem)."""

    remote = True
    took_over = False  # the lock was a dead run's

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.where = public_url(self.url)
        check_url_path(url, "output")  # '.', '..' or an empty part would name other keys than written
        self.fs, self.root = filesystem(self.url)
        self._staging: Path | None = None
        self._uploader: ThreadPoolExecutor | None = None
        self._uploads: list[Future] = []

    def child(self, folder: str) -> RemotePlace:
        return RemotePlace(join(self.url, folder))

    def key(self, name: str) -> str:
        """The object key of a name in this prefix; a name that would leave it is refused."""
        if not name or name.startswith("/") or any(part in ("", ".", "..") for part in name.split("/")):
            raise ObjcliError(
                f"output {self.where}: the name {name!r} would escape the output prefix; "
                "the manifest or marker naming it is not objcli's, so pass --overwrite"
            )
        return f"{self.root}/{name}"

    def _call(self, action: str, name: str, function, *args, **kwargs):
        try:
            return function(*args, **kwargs)
        except storage_errors() as error:
            raise storage_error(error, join(self.url, name) if name else self.url, action) from None

    def staging(self) -> Path:
        """A local folder of this run's own for the files on their way up (removed by ``close``)."""
        if self._staging is None:
            remove_dead_staging()
            self._staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-"))
        return self._staging

    def close(self) -> None:
        if self._uploader is not None:
            self._uploader.shutdown(wait=True, cancel_futures=True)
            self._uploader, self._uploads = None, []
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None

    def names(self, prefix: str = "") -> list[str]:
        """Names of the objects directly under the prefix (those starting with ``prefix``: one
        listing of just those keys)."""
        self.fs.invalidate_cache(self.root)  # listings are cached by the client; a resume needs them fresh
        try:
            if prefix:
                entries = self.fs.glob(f"{self.root}/{glob.escape(prefix)}*", detail=True).values()
            else:
                entries = self.fs.ls(self.root, detail=True)
        except FileNotFoundError:
            return []
        except storage_errors() as error:
            raise storage_error(error, self.url, "listing it") from None
        return sorted(e["name"].rsplit("/", 1)[-1] for e in entries if e.get("type") == "file")

    def read_text(self, name: str) -> str | None:
        try:
            return self.fs.cat_file(self.key(name)).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return None
        except storage_errors() as error:
            raise storage_error(error, join(self.url, name), "reading it") from None

    def read_json(self, name: str) -> dict | None:
        try:
            data = json.loads(self.fs.cat_file(self.key(name)))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        except storage_errors() as error:
            raise storage_error(error, join(self.url, name), "reading it") from None
        return data if isinstance(data, dict) else None

    def write_json(self, name: str, data: dict) -> None:
        crash_point(name)  # the resume tests kill a run here: one PUT, so the object is whole or absent
        self.write_bytes(name, (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode())

    def write_bytes(self, name: str, data: bytes) -> None:
        self._call("writing it", name, self.fs.pipe_file, self.key(name), data)

    def remove_empty_folder(self, name: str) -> None:
        """Object storage has no folders: nothing to remove."""

    def delete(self, name: str) -> None:
        try:
            self.fs.rm_file(self.key(name))
        except FileNotFoundError:
            pass
        except storage_errors() as error:
            raise storage_error(error, join(self.url, name), "deleting it") from None

    def remove(self) -> None:
        """Delete every object directly under the prefix (S3 deletes up to 1,000 in one request)."""
        names = self.names()
        if names:
            self._call("deleting it", "", self.fs.rm, [self.key(name) for name in names])

    def matches(self, name: str, sha256: str, size: int | None) -> bool | None:
        try:
            info = self.fs.info(self.key(name))
        except FileNotFoundError:
            return None
        except storage_errors() as error:
            raise storage_error(error, join(self.url, name), "checking it") from None
        return info.get("size") == size

    def publish(self, path: Path) -> None:
        """Upload a finished file from the staging folder on a thread of its own, so the partition
        goes on meanwhile; at most ``UPLOADS_AHEAD`` wait, which bounds the staging folder's size."""
        if self._uploader is None:
            self._uploader = ThreadPoolExecutor(1, thread_name_prefix="objcli-upload")
        if len(self._uploads) >= UPLOADS_AHEAD:
            self._uploads.pop(0).result()
        self._uploads.append(self._uploader.submit(self._upload, path))

    def _upload(self, path: Path) -> None:
        self.upload(path, path.name)
        crash_point("upload")
        path.unlink()

    def upload(self, path: Path, name: str) -> str:
        """Upload a local file as ``name`` (s3fs uploads a large file in parts and completes the
        upload last: the object appears whole); returns its URL."""
        self._call("uploading it", name, self.fs.put_file, str(path), self.key(name))
        return join(self.url, name)

    def flush(self) -> None:
        """Wait for every upload; the first failure is raised here."""
        while self._uploads:
            self._uploads.pop(0).result()

    def fetch(self, name: str, folder: Path) -> None:
        if not (folder / name).exists():
            temp = folder / (name + ".download")
            self._call("downloading it", name, self.fs.get_file, self.key(name), str(temp))
            os.replace(temp, folder / name)

    def promote(self, work: RemotePlace, renames: list[tuple[str, str]]) -> list[str]:
        """Copy work objects to their final keys, server-side and many at a time (the work prefix
        is removed only after the manifest, so a finish that died halfway copies again); returns
        the work names found nowhere."""
        present = set(work.names())
        todo = [(old, new) for old, new in renames if old in present]
        missing = [old for old, new in renames if old not in present and not self.exists(new)]
        for start in range(0, len(todo), COPIES_AT_ONCE):
            chunk = todo[start : start + COPIES_AT_ONCE]
            self._call(
                "copying it into place",
                chunk[0][1],
                self.fs.copy,
                [work.key(old) for old, _ in chunk],
                [self.key(new) for _, new in chunk],
            )
            for _ in chunk:
                crash_point("rename")
        return missing

    def exists(self, name: str) -> bool:
        return self.matches(name, "", None) is not None

    def stamp(self, name: str) -> None:
        """Objects keep the time they were written; Make targets are local files anyway."""

    def lock(self) -> None:
        """Create ``.objcli-lock`` only if absent. A lock left by a dead run on this host is taken over;
        one from another host is named, with how to remove it if that run is gone."""
        body = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}).encode()
        for attempt in range(3):
            try:
                self.fs.pipe_file(self.key(LOCK_NAME), body, **self._if_absent())
                return
            except FileExistsError:
                holder = self.read_json(LOCK_NAME) or {}
                if not holder.get("pid") and attempt < 2:
                    time.sleep(0.2)  # the winner of a race is still writing its lock: read it again
                    continue
                if (
                    holder.get("host") != socket.gethostname()
                    or process_alive(holder.get("pid"))
                    or not holder.get("pid")
                ):
                    who = f"pid {holder['pid']} on {holder.get('host')}" if holder.get("pid") else "another process"
                    raise ObjcliError(
                        f"output {self.where}: another run ({who}) is writing it; wait for it to finish, or if that "
                        f"run is gone, delete {self.where}/{LOCK_NAME}"
                    ) from None
                self.delete(LOCK_NAME)
                self.took_over = True  # a dead run of this host: its lock is taken over
            except storage_errors() as error:
                raise storage_error(error, self.url, "taking the output's lock") from None
        raise ObjcliError(
            f"output {self.where}: another run keeps taking the lock; wait for it to finish or choose another -o"
        )

    def _if_absent(self) -> dict:
        """S3's conditional put; other filesystems check first (a narrow race, said in the README)."""
        if "s3" in self.fs.protocol:
            return {"IfNoneMatch": "*"}
        if self.fs.exists(self.key(LOCK_NAME)):
            raise FileExistsError(LOCK_NAME)
        return {}

    def unlock(self) -> None:
        self.delete(LOCK_NAME)
