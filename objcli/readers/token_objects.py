"""Tokenized inputs in object storage (``s3://bucket/tokens/corpus_text_document``, ``gs://…/train.bin``,
a ``save_to_disk`` prefix): detected from their objects' names and first bytes as local files are
from theirs, then copied once per machine into the user's cache (``token-inputs/``) and read from
there, memory-mapped like any local token file. The copy is keyed by the objects' URLs, sizes and
versions (ETags), so a replaced object is fetched again and an unchanged one never; it is made in
a folder of its own and renamed into place whole, so a worker that dies while fetching leaves no
half copy, and several workers on one machine share it. The run, the manifest and provenance name
the URL; a Dask worker on another machine fetches into its own cache.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct

from ..errors import ObjcliError
from ..storage.remote import filesystem, is_url, public_url, storage_error, storage_errors, version_of
from ..tokenizers.user_cache import cache_folder
from .token_formats import LLMC_MAGIC, TOKEN_FORMATS, input_files


def remote_kind(url: str, requested: str) -> str | None:
    """The token format of an input URL (None: text), from which objects exist beside it."""
    if requested != "auto" and requested not in TOKEN_FORMATS:
        return None
    fs, inner = filesystem(url)
    base = inner.removesuffix(".bin").removesuffix(".idx")
    try:
        pair = [fs.isfile(base + ".idx"), fs.isfile(base + ".bin")] if requested in ("auto", "megatron") else []
        if all(pair) and pair:
            return "megatron"
        if any(pair) and (pair[0] or base.endswith("_document")):  # Megatron names its pairs PREFIX_text_document
            missing = public_url(filesystem(url)[0].unstrip_protocol(base + (".bin" if pair[0] else ".idx")))
            raise ObjcliError(
                f"input {public_url(url)}: a Megatron indexed dataset without {missing}; upload it beside"
            )
        if requested in ("auto", "datatrove") and inner.endswith(".ds") and fs.isfile(inner + ".index"):
            return "datatrove"
        if requested in ("auto", "input-ids") and fs.isfile(inner.rstrip("/") + "/state.json"):
            return "input-ids"
        if requested != "auto":
            return requested
        if inner.endswith(".bin") and fs.isfile(inner):
            head = fs.cat_file(inner, start=0, end=4)
            return "llmc" if len(head) == 4 and struct.unpack("<i", head)[0] in LLMC_MAGIC else "nanogpt"
    except storage_errors() as error:
        raise storage_error(error, url, "looking at its objects") from None
    return None


def readable_path(path: str, fmt: str) -> str:
    """Where a token input's files can be read here: the path itself, or the URL's local copy."""
    return fetched(path, fmt) if is_url(path) else path


def fetched(url: str, fmt: str) -> str:
    """The local copy of a token input in object storage (made on first use on this machine)."""
    fs, inner = filesystem(url)
    try:
        objects = _objects(fs, inner, fmt)
        infos = {name: fs.info(name) for name in objects}
    except storage_errors() as error:
        raise storage_error(error, url, "listing its objects") from None
    except FileNotFoundError as error:
        raise ObjcliError(f"input {public_url(url)}: no object {error}; check the URL") from None
    stamp = "|".join(f"{public_url(fs.unstrip_protocol(n))}|{i.get('size')}|{version_of(i)}" for n, i in infos.items())
    folder = cache_folder("token-inputs") / hashlib.sha256(stamp.encode()).hexdigest()[:32]
    root = _root(inner, fmt)
    sizes = {folder / name[len(root) :].lstrip("/"): info.get("size") for name, info in infos.items()}
    if folder.is_dir() and not _intact(sizes):  # a copy cut or emptied since: fetched again, never read
        shutil.rmtree(folder, ignore_errors=True)
    if not folder.is_dir():
        _fetch(fs, objects, root, folder, url)
    local = str(folder / inner[len(root) :].lstrip("/")).rstrip("/")
    return local


def _intact(sizes: dict) -> bool:
    """Whether every file of a cached copy is there with its object's size."""
    try:
        return all(size is None or path.stat().st_size == size for path, size in sizes.items())
    except OSError:
        return False


def _root(inner: str, fmt: str) -> str:
    """The prefix the objects are named relative to in the copy (a folder keeps its layout)."""
    return (
        inner.rstrip("/")
        if fmt == "input-ids" and not inner.endswith((".parquet", ".arrow"))
        else inner.rsplit("/", 1)[0]
    )


def _objects(fs, inner: str, fmt: str) -> list[str]:
    """The objects the input consists of (``token_digests.input_files``, asked of the bucket)."""
    names = input_files(inner, fmt, fs.isfile, lambda name: fs.cat_file(name).decode("utf-8"))
    if names == [inner] and not fs.isfile(inner):
        raise FileNotFoundError(inner)
    return names


def _fetch(fs, objects: list[str], root: str, folder, url: str) -> None:
    """The objects downloaded into a folder of this process's own, renamed to ``folder`` whole."""
    temporary = folder.with_name(f".{folder.name}.{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        for name in objects:
            target = temporary / name[len(root) :].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(name, str(target))
        try:
            os.rename(temporary, folder)
        except OSError:  # another worker's copy came first: the same objects
            shutil.rmtree(temporary, ignore_errors=True)
    except storage_errors() as error:
        shutil.rmtree(temporary, ignore_errors=True)
        raise storage_error(error, url, "downloading it") from None
