"""Listing inputs named by URL (``s3://bucket/corpus/``, a glob of keys, one object) the way local
folders are listed: recursive, hidden names and objcli outputs skipped, sorted, so that a run over
a bucket and over a local copy of it cut the same partitions and write the same shards."""

from __future__ import annotations

import glob
from collections.abc import Callable

from ..errors import ObjcliError
from ..storage.remote import filesystem, public_url, storage_error, storage_errors
from .text_formats import suffix_list

OUTPUT_MARKERS = (".objcli-tmp", "manifest.json")


def list_objects(spec: str, is_data_name: Callable[[str], bool]) -> list[tuple[str, dict]]:
    """(URL, info) of every data object the spec names, sorted by key; each info also holds the
    object's first 8 bytes (``head``)."""
    fs, inner = filesystem(spec)
    try:
        if glob.has_magic(inner):
            found = {p: i for p, i in fs.glob(inner, detail=True).items() if i.get("type") == "file"}
            if not found:
                raise ObjcliError(f"input {public_url(spec)}: the pattern matches no object; check the glob")
        elif fs.isdir(inner):
            found = _folder_objects(fs, inner.rstrip("/"), is_data_name)
            if not found:
                raise ObjcliError(
                    f"input {public_url(spec)}: the prefix holds no {suffix_list()} object "
                    "(compressed or not); name the objects directly"
                )
        elif fs.isfile(inner):
            found = {inner: fs.info(inner)}
        else:
            raise FileNotFoundError(inner)
    except storage_errors() as error:
        raise storage_error(error, spec, "listing it") from None
    paths = sorted(found)
    try:
        # Every object's first bytes (its compression's magic) in one concurrent batch of ranged reads.
        heads = fs.cat_ranges(paths, [0] * len(paths), [8] * len(paths)) if paths else []
    except storage_errors() as error:
        raise storage_error(error, spec, "reading the first bytes of its objects") from None
    return [(fs.unstrip_protocol(path), {**found[path], "head": head}) for path, head in zip(paths, heads)]


def _folder_objects(fs, root: str, is_data_name) -> dict[str, dict]:
    """Data objects under a prefix: names with a hidden component (``.git/``) and everything under a
    prefix that holds an objcli output (its work folder, or its manifest) are left out."""
    found = fs.find(root, detail=True)
    outputs = set()
    for path in found:
        relative = path[len(root) :].lstrip("/")
        folder, _, name = relative.rpartition("/")
        if name == "manifest.json" and _is_objcli_manifest(fs, path):
            outputs.add(folder)
        elif "/.objcli-tmp/" in f"/{relative}":  # a run writing there now
            outputs.add(f"/{relative}".split("/.objcli-tmp/")[0].lstrip("/"))
    kept = {}
    for path, info in found.items():
        relative = path[len(root) :].lstrip("/")
        parts = relative.split("/")
        if any(part.startswith(".") for part in parts) or not is_data_name(parts[-1]):
            continue
        if any(o == "" or relative.startswith(o + "/") for o in outputs):
            continue
        kept[path] = info
    return kept


def _is_objcli_manifest(fs, path: str) -> bool:
    return b'"objcli_version"' in fs.cat_file(path, start=0, end=200)
