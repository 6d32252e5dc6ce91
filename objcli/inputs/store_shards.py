"""A token store's shards checked before a token of them is used: each block against its digest
(``storage/blocks.py``), or a store's made before block digests, its whole sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import NoReturn

import numpy as np

from ..errors import ObjcliError
from ..storage.files import file_sha256
from ..storage.remote import filesystem, is_url, storage_error, storage_errors


def shard_blocks(path: Path, recorded: dict[str, str], name: str):
    """The shard's block digests (``storage/blocks.py``), their file read (object storage: into memory) and
    checked by its sha256; None for a store made before they were kept (its shards are checked whole)."""
    from ..storage.blocks import SUFFIX, ShardBlocks

    blocks = path.name + SUFFIX
    if blocks not in recorded:
        return None
    data = _object_bytes(name + SUFFIX)
    try:
        if hashlib.sha256(data).hexdigest() == recorded[blocks]:
            return ShardBlocks(path, data)
    except ValueError:
        pass
    refuse_shard(name + SUFFIX)


def _object_bytes(where: str) -> bytes:
    """A small file's bytes, here or in object storage (b"" where there is none)."""
    if not is_url(where):
        try:
            return Path(where).read_bytes()
        except OSError:
            return b""
    fs, inner = filesystem(where)
    try:
        return fs.cat_file(inner)
    except FileNotFoundError:
        return b""
    except storage_errors() as error:
        raise storage_error(error, where, "reading it") from None


def check_shard(path: Path, recorded: dict[str, str], name: str, ids: bool = True) -> None:
    """A shard edited or damaged since the store was made is refused before a token of it is used: its
    blocks against their digests (XXH3, 11x sha256's speed; without ``ids``, only the blocks that hold
    more than ids: a plan's reader checks those it reads), or a store's made before, its sha256."""
    blocks = shard_blocks(path, recorded, name)
    if blocks is not None:
        data = np.memmap(path, np.uint8, "r") if path.stat().st_size else b""
        if blocks.check_all(data) if ids else blocks.check_all_but_ids(data):
            return
    elif file_sha256(path) == recorded.get(path.name):
        return
    refuse_shard(name)


def refuse_shard(name: str) -> NoReturn:
    raise ObjcliError(
        f"input {name}: does not match the digests the token store's manifest records (edited or damaged); "
        f"run 'objcli verify {name.rsplit('/', 1)[0]}' and tokenize the text again"
    )
