"""An in-place reshard's commit record (``OUT/.objcli-reshard.json``: the new manifest, the renames and
the old shards' names), read only once it is proven the record a reshard wrote: anything edited,
foreign or damaged is one line, and no file is touched (a hostile record once deleted files beside
the output)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ObjcliError
from ..storage.files import WORK_FOLDER, file_sha256
from ..storage.manifest import PENDING_RESHARD, decode_manifest, is_plain_name
from ..storage.output import is_shard_name


class _Refused(Exception):
    """Why the record is not a reshard's (said by ``read_pending`` as one line)."""


def read_pending(out: Path) -> dict | None:
    """The record, checked before anything moves: an objcli manifest with its ``resharded_from``;
    renames from plain names in the work folder to that manifest's own files, each once; old names that
    are shard names of the folder; and every new shard where the commit left it, as the manifest
    records it (sha256): only then may the old ones go. None when no reshard is pending."""
    path = out / PENDING_RESHARD
    if not path.exists() and not path.is_symlink():
        return None
    try:
        pending = _record(path)
        shards = _manifest_shards(pending["manifest"], path)
        _check_names(pending, shards)
        _check_new_shards(out, pending["renames"], shards)
    except _Refused as why:
        raise ObjcliError(
            f"{path}: {why}, not the record an in-place reshard writes (edited or from elsewhere?); nothing was "
            "moved: remove it and rerun the reshard (or transform the output again)"
        ) from None
    return pending


def _record(path: Path) -> dict:
    if path.is_symlink() or not path.is_file():
        raise _Refused("a symbolic link or not a file")
    try:
        pending = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise _Refused(f"not readable JSON ({type(error).__name__})") from None
    if not isinstance(pending, dict) or set(pending) != {"manifest", "renames", "old"}:
        raise _Refused("not an object of manifest, renames and old")
    return pending


def _manifest_shards(manifest, path: Path) -> list:
    if not isinstance(manifest, dict) or not isinstance(manifest.get("resharded_from"), dict):
        raise _Refused("its manifest has no resharded_from")
    if not isinstance(manifest["resharded_from"].get("shard_size"), str):
        raise _Refused("its manifest's resharded_from names no shard size")
    try:
        return decode_manifest(manifest, str(path)).shards
    except ObjcliError:
        raise _Refused("its manifest is not an objcli manifest") from None


def _plain(name) -> bool:
    return isinstance(name, str) and is_plain_name(name)


def _check_names(pending: dict, shards: list) -> None:
    renames, old = pending["renames"], pending["old"]
    files = {n for shard in shards for n in shard.files}
    if not isinstance(renames, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(map(_plain, p)) for p in renames
    ):
        raise _Refused("its renames are not pairs of plain file names")
    if {final for _, final in renames} != files or len(renames) != len(files):
        raise _Refused("its renames do not give the new manifest's files, each once")
    if not isinstance(old, list) or not all(_plain(n) and is_shard_name(n) for n in old):
        raise _Refused("its old files are not shard names inside the output folder")


def _check_new_shards(out: Path, renames: list, shards: list) -> None:
    digests = {name: digest for shard in shards for name, digest in shard.sha256.items()}
    for temp, final in renames:
        where = out / WORK_FOLDER / temp if (out / WORK_FOLDER / temp).is_file() else out / final
        if not where.is_file() or where.is_symlink() or file_sha256(where) != digests.get(final):
            raise _Refused(f"its new shard {final} is not there as its manifest records it")
