"""``objcli reshard OUT --shard-size 1GB -o OUT2``: the same rows, in the same order, cut into
shards of another size, in any format; the manifest rewritten, ``verify`` passing on the result.

Arrow stream shards that grow are copied record batch by record batch, undecoded
(``reshard_stream.py``: no NumPy or Arrow is imported for it). Otherwise rows are read a source
shard at a time and written by the format's own writer (``reshard_rows.py``). The manifest keeps
the source's configuration, partitions and totals, with ``resharded_from`` (the source folder, its
shard count and the new ``--shard-size``). Work happens in ``OUT2/.objcli-tmp`` under the output's
lock, the manifest last: a reshard killed at any moment leaves no manifest, and the same command
again writes the same bytes. Without ``-o``, in place: see ``reshard_in_place``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..errors import ObjcliError
from ..formats import SIDE_FILES, format_of
from ..formats.sizes import ShardSize
from ..recipe import command_line
from ..storage.faults import crash_point
from ..storage.files import write_json_atomically
from ..storage.manifest import MANIFEST_NAME, PENDING_RESHARD, Manifest, read_manifest
from ..storage.output import final_names
from ..storage.places import LocalPlace
from ..storage.remote import is_url
from .rebuild import (
    WORK,
    building,
    check_source_files,
    fresh_work,
    on_any_storage,
    publish,
    refuse_blended,
    split_totals_of,
)
from .reshard_pending import read_pending
from .reshard_stream import reshard_streams


def reshard(
    source: str,
    output: str | None,
    shard_size: str | None,
    overwrite: bool = False,
    num_shards: int | None = None,
    output_format: str | None = None,
) -> dict:
    """The reshard (see the module), local or on object storage; in place when ``output`` is None.
    ``num_shards``: that many shards per split, rows balanced to within one (instead of ``shard_size``);
    ``output_format``: the rows written in another row format (a plan's rows made: ``reading/plan_rows.py``)."""
    limit, shard_size = _limit(shard_size, num_shards)
    if output is None:
        if output_format is not None:
            raise ObjcliError(
                f"reshard: --format {output_format} writes the rows anew; name the new folder with -o "
                "(the source stays as it is)"
            )
        if overwrite:
            raise ObjcliError(
                "reshard: --overwrite replaces what an -o folder holds; in place (no -o) the output is "
                "replaced anyway, atomically: leave out --overwrite, or name a folder with -o"
            )
        return reshard_in_place(source, limit, shard_size)
    label = source if is_url(source) else str(Path(source).resolve())
    return on_any_storage(
        "reshard",
        [source],
        output,
        overwrite,
        lambda local, out: _reshard_local(local[0], out, limit, shard_size, overwrite, label, output_format),
    )


def _limit(shard_size: str | None, num_shards: int | None) -> tuple[ShardSize, str]:
    if (shard_size is None) == (num_shards is None):
        raise ObjcliError(
            "reshard: give --shard-size (rows or bytes per shard) or --num-shards (shards per split), one of the two"
        )
    if num_shards is not None:
        if num_shards < 1:
            raise ObjcliError(f"--num-shards {num_shards}: give a positive number of shards")
        return ShardSize(count=num_shards), f"{num_shards} shards"
    return ShardSize.parse(shard_size), shard_size


def _new_shards(folder: Path, manifest: Manifest, work: Path, limit: ShardSize, target: str) -> list:
    """Whole record-batch messages copied where the format and sizes allow (``reshard_stream.py``),
    else every source shard's rows through the ``target`` format's writer."""
    for shard in manifest.shards:
        check_source_files("reshard", folder, shard)
    if manifest.config.get("token_store"):  # cut within its partitions, which derived runs read
        from .reshard_store import rewrite_store

        partitions = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))["partitions"]
        return rewrite_store(folder, manifest, partitions, work, limit)
    # Spans are cut with their rows; columns at older widths are converted, row by row (current_columns).
    same = target == manifest.format
    if same and limit.bytes and not manifest.config.get("provenance") and current_columns(manifest) is None:
        copied = reshard_streams(folder, manifest, work, limit.bytes)
        if copied is not None:
            return copied
    from .reshard_rows import rewrite_rows  # NumPy, Arrow and the writers: only on this path

    return rewrite_rows(folder, manifest, work, limit, target)


def current_columns(manifest: Manifest) -> list[dict] | None:
    """The columns as the format stores them today (each at the width its values need), where the
    output's differ (written before: int32 Arrow columns); None where they are the same."""
    from ..formats.base import column_specs

    now = [c.to_json() for c in format_of(manifest.format).recorded_columns(column_specs(manifest))]
    return now if now != [c.to_json() for c in manifest.columns] else None


def _resharded_manifest(
    folder: Path, manifest: Manifest, work: Path, limit: ShardSize, shard_size: str, label: str, target=None
) -> tuple[list, dict]:
    refuse_blended("reshard", label, manifest)  # local, in place or remote: every reshard comes here
    if not manifest.config.get("token_store"):
        from .reshard_rows import with_row_lengths

        manifest = with_row_lengths(folder, manifest)  # older fixed rows: to fixed-size lists
    target = _target_format(manifest, target, label)
    shards = _new_shards(folder, manifest, work, limit, target)
    renames = final_names(shards)
    raw = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    if manifest.config.get("token_store"):  # a store's partitions name their shards
        from .reshard_store import partitions_of

        raw["partitions"] = partitions_of(raw["partitions"], shards)
    converted = current_columns(manifest) if not manifest.config.get("token_store") else None
    if converted is not None:  # written at older widths: the rows were rewritten at the current ones
        raw["columns"] = converted
    if target != manifest.format:  # the rows in another format: its columns, no plan's store
        from ..formats.base import column_specs

        raw["columns"] = [c.to_json() for c in format_of(target).recorded_columns(column_specs(manifest))]
        raw["format"] = target
        raw["config"] = {**raw["config"], "output_format": target}
        raw["recipe"] = {**raw.get("recipe", {}), "format": target}
        raw["command"] = command_line(raw["recipe"])
        raw.pop("row_plan", None)
    raw.update(
        shards=[s.to_json() for s in shards],
        totals={**raw["totals"], "shards": len(shards)},
        resharded_from={"output": label, "shards": len(manifest.shards), "shard_size": shard_size},
        **split_totals_of("splits" in raw, shards),
    )
    return renames, raw


def _target_format(manifest: Manifest, target: str | None, label: str) -> str:
    """The format the rows are written in: the source's, or another row format that holds its columns."""
    source = format_of(manifest.format)
    if target is None and source.packs_positions:
        raise ObjcliError(
            f"reshard: {label} is a plan (its partitions' rows whole in each file, made on read); write its rows "
            "with --format arrow (or another row format)"
        )
    if source.packs_positions and manifest.config.get("shuffle_rows"):
        raise ObjcliError(
            f"reshard: {label} is a plan written with --shuffle-rows, its order made on read; write the rows "
            "in that order with the same command and --format arrow, or read them with objcli.reading.Rows"
        )
    if target is None or target == manifest.format:
        return manifest.format
    chosen = format_of(target)
    values = any(c.kind == "value" for c in manifest.columns)
    if chosen.packs_positions or chosen.whole_documents or (values and not chosen.stores_values):
        raise ObjcliError(
            f"reshard: --format {target} cannot hold {label}'s rows as they are; choose --format arrow, parquet or hf"
        )
    return target


def _reshard_local(
    source: str, output: str, limit: ShardSize, shard_size: str, overwrite: bool, label: str, target=None
) -> dict:
    folder, out = Path(source), Path(output)
    manifest = read_manifest(folder)
    with building("reshard", out, overwrite) as work:
        renames, raw = _resharded_manifest(folder, manifest, work, limit, shard_size, label, target)
        publish(out, work, renames, raw)
    return raw


def reshard_in_place(folder_name: str, limit: ShardSize, shard_size: str) -> dict:
    """``objcli reshard OUT --shard-size S`` without ``-o``. The new shards are built in
    ``OUT/.objcli-tmp`` while the old output stays valid; the commit point is one atomic write of
    ``OUT/.objcli-reshard.json`` (the new manifest and the renames); then the old manifest goes,
    the old shards go, the new ones move in and the new manifest is written, last. Killed before
    the commit point, the output is the old one; after it, the output has no manifest until the
    same command (or any reshard of it) finishes the commit, which every step of allows twice."""
    if is_url(folder_name):
        raise ObjcliError(
            f"reshard: {folder_name}: in place is for local folders (object storage has no rename); "
            "write the new shards to another prefix with -o"
        )
    out = Path(folder_name)
    place = LocalPlace(out)
    if not out.is_dir():
        raise ObjcliError(f"{out}: no {MANIFEST_NAME}; name a folder written by 'objcli transform' that finished")
    place.lock()
    try:
        pending = _finish_pending(out)
        if pending is not None and pending["resharded_from"]["shard_size"] == shard_size:
            return pending
        manifest = read_manifest(out)
        work = fresh_work(out)
        try:
            renames, raw = _resharded_manifest(out, manifest, work, limit, shard_size, str(out.resolve()))
            old = sorted({name for shard in manifest.shards for name in shard.files})
            write_json_atomically(out / PENDING_RESHARD, {"manifest": raw, "renames": renames, "old": old})
        except BaseException:
            if not (
                out / PENDING_RESHARD
            ).exists():  # not committed: the old output stands, the new shards' space is freed
                shutil.rmtree(work, ignore_errors=True)
            raise
        crash_point("reshard-committed")
        return _finish_pending(out)
    finally:
        place.unlock()


def _finish_pending(out: Path) -> dict | None:
    """Roll a committed in-place reshard forward (see ``reshard_in_place``); None when none is pending."""
    pending = read_pending(out)
    if pending is None:
        return None
    path = out / PENDING_RESHARD
    work, new = out / WORK, {final for _, final in pending["renames"]}
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    for name in pending["old"]:
        if name not in new:  # a name both had is replaced by the rename below, never deleted
            (out / name).unlink(missing_ok=True)
    SIDE_FILES.remove_folders(LocalPlace(out))
    for name in os.listdir(out):
        if SIDE_FILES.is_side_file(name):
            (out / name).unlink()
    for temp, final in pending["renames"]:
        if (work / temp).exists():
            os.replace(work / temp, out / final)
            crash_point("reshard-moved")
    publish(out, work, [], pending["manifest"])
    path.unlink()
    return pending["manifest"]
