"""Local copies of objects in object storage, the one cache of them (``remote-copies/`` in the user's
cache): a tokenizer's files, a tokenized input's. A copy is keyed by the objects' URLs, sizes and
versions (ETags), so a replaced object is fetched again and an unchanged one never; it is made in a
folder of its own and renamed into place whole, so a worker that dies while fetching leaves no half
copy, and several workers on one machine share it. A copy cut or emptied since is fetched again,
never read."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from ..errors import ObjcliError
from .remote import filesystem, public_url, storage_error, storage_errors, version_of
from .user_cache import cache_folder

# The most bytes the copies may hold (``OBJCLI_REMOTE_COPIES_BYTES``, default 8 GiB): past it, the copies used
# longest ago are removed; one used in the last ``IDLE_SECONDS`` never is (a reader may still open its files).
DEFAULT_LIMIT_BYTES = 8 << 30
IDLE_SECONDS = 600


def local_file_copy(url: str) -> Path:
    """A local copy of one object (a tokenizer), so that every worker loads it from disk; a folder URL
    yields the folder's ``tokenizer.json``."""
    fs, inner = filesystem(url)
    try:
        if fs.isdir(inner):
            inner = inner.rstrip("/") + "/tokenizer.json"
    except storage_errors() as error:
        raise storage_error(error, url, "downloading it") from None
    root, name = inner.rstrip("/").rsplit("/", 1)
    return local_copy(url, [inner], root) / name


def local_copy(url: str, objects: list[str], root: str) -> Path:
    """The local folder holding ``objects`` (paths on ``url``'s filesystem), each at its path below
    ``root``; made on first use on this machine."""
    fs, _ = filesystem(url)
    try:
        infos = {name: fs.info(name) for name in objects}
    except storage_errors() as error:
        raise storage_error(error, url, "listing its objects") from None
    except FileNotFoundError as error:
        raise ObjcliError(f"{public_url(url)}: no object {error}; check the URL") from None
    stamp = "|".join(f"{public_url(fs.unstrip_protocol(n))}|{i.get('size')}|{version_of(i)}" for n, i in infos.items())
    folder = cache_folder("remote-copies") / hashlib.sha256(stamp.encode()).hexdigest()[:32]
    sizes = {folder / _below(name, root): info.get("size") for name, info in infos.items()}
    if folder.is_dir() and not _intact(sizes):
        shutil.rmtree(folder, ignore_errors=True)
    if not folder.is_dir():
        _fetch(fs, objects, root, folder, url)
        _bound(folder.parent, folder)
    try:
        os.utime(folder)  # used now: the last a bounded cache removes
    except OSError:
        pass
    return folder


def _limit() -> int:
    try:
        return max(0, int(os.environ.get("OBJCLI_REMOTE_COPIES_BYTES", DEFAULT_LIMIT_BYTES)))
    except ValueError:
        return DEFAULT_LIMIT_BYTES


def _bound(root: Path, new: Path) -> None:
    """The copies used longest ago removed until the cache is within its limit (never ``new``, nor one used
    in the last ``IDLE_SECONDS``); a cache that cannot be measured or trimmed is left as it is."""
    import time

    try:
        copies = [(folder.stat().st_mtime, _size(folder), folder) for folder in root.iterdir() if folder.name[0] != "."]
    except OSError:
        return
    total, now = sum(size for _, size, _ in copies), time.time()
    for used, size, folder in sorted(copies, key=lambda c: c[0]):
        if total <= _limit():
            break
        if folder != new and now - used >= IDLE_SECONDS:
            shutil.rmtree(folder, ignore_errors=True)
            total -= size


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _below(name: str, root: str) -> str:
    return name[len(root) :].lstrip("/")


def _intact(sizes: dict) -> bool:
    """Whether every file of a cached copy is there with its object's size."""
    try:
        return all(size is None or path.stat().st_size == size for path, size in sizes.items())
    except OSError:
        return False


def _fetch(fs, objects: list[str], root: str, folder: Path, url: str) -> None:
    """The objects downloaded into a folder of this process's own, renamed to ``folder`` whole."""
    temporary = folder.with_name(f".{folder.name}.{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        for name in objects:
            target = temporary / _below(name, root)
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(name, str(target))
        try:
            os.rename(temporary, folder)
        except OSError:  # another worker's copy came first: the same objects
            shutil.rmtree(temporary, ignore_errors=True)
    except storage_errors() as error:
        shutil.rmtree(temporary, ignore_errors=True)
        raise storage_error(error, url, "downloading it") from None
