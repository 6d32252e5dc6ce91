"""What merge and reshard share: an output built from finished outputs, in a work folder under
the output's lock, published with the manifest last."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from ..errors import ObjcliError
from ..storage.files import write_json_atomically
from ..storage.manifest import MANIFEST_NAME, Manifest
from ..storage.stores import LocalStore

WORK = ".objcli-tmp"


def refuse_urls(command: str, locations: list[str]) -> None:
    from ..storage.remote import is_url

    remote = next((where for where in locations if is_url(where)), None)
    if remote:
        raise ObjcliError(f"{command}: {remote} is on object storage, which {command} does not read or write yet; "
                          "copy the outputs to local folders first")


@contextmanager
def building(out: Path, overwrite: bool):
    """The output's lock and a clean work folder (``OUT/.objcli-tmp``), for merge and reshard."""
    out.mkdir(parents=True, exist_ok=True)
    store = LocalStore(out)
    store.lock()
    try:
        refuse_or_clear(out, overwrite)
        work = out / WORK
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        yield work
    finally:
        store.unlock()


def publish(out: Path, work: Path, renames: list[tuple[str, str]], manifest: dict) -> None:
    """Shards to their final names, the format's own files, then the manifest, last."""
    for old, new in renames:
        os.replace(work / old, out / new)
    from ..storage.format_files import format_files  # imports the writers: only once there is something to publish

    records = read_manifest_from(manifest)
    for name, text in format_files(records.format, records.shards, records.columns, records.config_sha256).items():
        (out / name).write_text(text, encoding="utf-8")
    write_json_atomically(out / MANIFEST_NAME, manifest)
    shutil.rmtree(work, ignore_errors=True)


def read_manifest_from(data: dict) -> Manifest:
    from ..storage.manifest import decode_manifest

    return decode_manifest(data, "merged manifest")


def refuse_or_clear(out: Path, overwrite: bool) -> None:
    """An empty folder, or what a killed merge left (shards and format files, no manifest), is
    (re)started; anything else needs --overwrite."""
    from ..storage.output import HF_FILES, is_shard_name

    held = [p for p in out.iterdir() if p.name not in (WORK, ".objcli-lock")]
    leftovers = all(is_shard_name(p.name) or p.name in HF_FILES or p.name.startswith("megatron") for p in held)
    if held and not overwrite and not (leftovers and not (out / MANIFEST_NAME).exists()):
        raise ObjcliError(f"merge: output {out} is not empty ({held[0].name}); pass --overwrite to replace it "
                          "or choose another folder")
    for path in held:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
