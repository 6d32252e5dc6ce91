"""What merge and reshard share: an output built from finished outputs, in a work folder under
the output's lock, published with the manifest last."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from ..errors import ObjcliError
from ..formats.dataset_card import CARD_NAME, is_ours
from ..storage.faults import crash_point
from ..storage.files import LOCK_NAME, write_json_atomically
from ..storage.files import WORK_FOLDER as WORK
from ..storage.manifest import MANIFEST_NAME, decode_manifest
from ..storage.places import LocalPlace

BLOCK = 8 << 20  # bytes per read where a file is copied through user space


def _where(location: str) -> str:
    from ..storage.remote import is_url

    return location.rstrip("/") if is_url(location) else os.path.realpath(location)


def check_locations(command: str, sources: list[str], output: str) -> None:
    """No source named twice (its rows would be written twice), the output not one of them."""
    seen = set()
    for source in sources:
        if _where(source) in seen:
            raise ObjcliError(f"{command}: {source} is named twice; each output's rows would be written twice")
        seen.add(_where(source))
    if _where(output) in seen:
        in_place = "; leave out -o to reshard in place" if command == "reshard" else ""
        raise ObjcliError(f"{command}: -o {output} is one of the sources; write to a new folder{in_place}")


def split_totals_of(had_splits: bool, shards) -> dict:
    """The manifest's per-split totals (rows, tokens, shards, documents) recounted over the new shards:
    a rebuilt output keeps its splits, not its source's shard counts."""
    if not had_splits and not any(shard.split for shard in shards):
        return {}
    from ..storage.manifest import split_totals

    return {"splits": split_totals(shards)}


def link_or_copy(source: Path, target: Path, point: str = "merge-file") -> str:
    """Hard link (no bytes copied) or a copy: the file's sha256 stays the source's (its size is
    checked by ``check_source_files``; ``objcli verify`` on the result compares the sha256, so a
    source changed in place is caught there, not hidden under a new digest)."""
    crash_point(point)  # the reliability tests kill a merge or a reshard here
    try:
        os.link(source, target)
    except OSError:
        with open(source, "rb") as f, open(target, "wb") as g:
            shutil.copyfileobj(f, g, BLOCK)
            g.flush()
            os.fsync(g.fileno())
    return target.name


def refuse_blended(command: str, source: str, manifest) -> None:
    """A mixture written for a trainer that blends its sources (Megatron's megatron.txt) keeps each
    source's shards apart, weighted by source: joined or recut, the blend would be lost."""
    from ..formats import format_of

    if manifest.config.get("source") and format_of(manifest.format).blends_sources:
        raise ObjcliError(
            f"{command}: {source} is a mixture for {manifest.format} (each source's shards and the blend file "
            "that weighs them); rerun the transform with the options you want instead"
        )


def refuse_stores(command: str, source: str, manifest) -> None:
    """A token store's partitions are its text run's (a derived run reads each one's documents in the
    text run's batches): stores joined would be no one text run's."""
    if manifest.config.get("token_store"):
        raise ObjcliError(
            f"{command}: {source} is a token store, whose partitions are its text run's; give the stores as "
            "--source of one transform, or tokenize the inputs together (or add to a store with objcli "
            "tokenize NEW -o STORE --append)"
        )


def refuse_plans(command: str, source: str, manifest) -> None:
    """A plan's rows are made from its stores, a partition's rows a file (formats/row_plan.py): joined
    with another output's, its files would be no run's plan."""
    from ..formats import format_of

    if format_of(manifest.format).packs_positions:
        stores = manifest.row_plan.get("stores") or [manifest.row_plan]
        named = ", ".join(str(s.get("store")) if isinstance(s, dict) else "?" for s in stores)
        raise ObjcliError(
            f"{command}: {source} is a plan over {named}; write its rows first "
            f"(objcli reshard {source} --format arrow -o ROWS/), or plan the runs you want together as one"
        )


def check_source_files(command: str, folder: Path, shard) -> None:
    """Every file of a source shard is there with the size its manifest records (a cheap check;
    ``objcli verify`` compares every sha256: reading every byte twice would halve a merge's speed)."""
    for name in shard.files:
        path = folder / name
        if not path.is_file():
            raise ObjcliError(f"{command}: {path} is listed in its manifest but missing; run 'objcli verify {folder}'")
        expected = shard.bytes.get(name)
        if expected is not None and path.stat().st_size != expected:
            raise ObjcliError(
                f"{command}: {path} is {path.stat().st_size:,} bytes, its manifest says {expected:,} "
                f"(changed since it was written); run 'objcli verify {folder}'"
            )


def on_any_storage(command: str, sources: list[str], output: str, overwrite: bool, build) -> dict:
    """``build(local sources, local output)`` where the sources and the output may be on object
    storage: sources are read from local copies, and a remote output is built in a local folder,
    then uploaded, its manifest last (a run killed before that leaves no manifest there)."""
    import tempfile
    from contextlib import ExitStack

    from ..storage.remote import is_url, readable_output

    check_locations(command, sources, output)
    if is_url(output) and not overwrite:  # refused before the sources are fetched (checked again under the lock)
        _refuse_filled(command, output, _held(output))
    with ExitStack() as stack:
        local = [stack.enter_context(readable_output(source)) for source in sources]
        if not is_url(output):
            return build(local, output)
        staging = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"objcli-{command}-"))) / "out"
        manifest = build(local, str(staging))
        upload_output(command, staging, output, overwrite, manifest)
        return manifest


def _held(url: str, place=None) -> list[str]:
    """objcli's files at an output on object storage (storage.output.own_files): its manifest first,
    if any, then the files it lists and the format files."""
    from ..formats import SIDE_FILES
    from ..storage.ownership import own_files
    from ..storage.places import open_place

    names = own_files(place or open_place(url), SIDE_FILES)
    return sorted(names, key=lambda n: (n != MANIFEST_NAME, n))


def _refuse_filled(command: str, url: str, held: list[str]) -> None:
    if MANIFEST_NAME in held:
        raise ObjcliError(
            f"{command}: output {url} is not empty ({held[0]}); pass --overwrite to replace it or choose another prefix"
        )


def upload_output(command: str, folder: Path, url: str, overwrite: bool, manifest: dict) -> None:
    from ..storage.places import open_place

    place = open_place(url)
    place.lock()
    try:
        held = _held(url, place)
        if not overwrite:
            _refuse_filled(command, url, held)
        for name in held:  # the old manifest first
            place.delete(name)
        keep_card = not is_ours(place.read_text(CARD_NAME))  # a README.md of the user's own at the prefix
        for path in sorted(folder.iterdir()):
            if (
                path.is_file()
                and path.name not in (MANIFEST_NAME, ".objcli-lock")
                and not (keep_card and path.name == CARD_NAME)
            ):
                place.upload(path, path.name)
        place.write_json(MANIFEST_NAME, manifest)
    finally:
        place.unlock()


@contextmanager
def building(command: str, out: Path, overwrite: bool):
    """The output's lock and a clean work folder (``OUT/.objcli-tmp``), for merge and reshard. A refused
    or failed build into a folder it made leaves no folder behind (not even its lock file)."""
    made = next((p for p in [*reversed(out.absolute().parents), out.absolute()] if not p.exists()), None)
    out.mkdir(parents=True, exist_ok=True)
    place = LocalPlace(out)
    place.lock()
    failed = True
    try:
        refuse_or_clear(command, out, overwrite)
        work = fresh_work(out)
        try:
            yield work
            failed = False
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)  # a failed build (a full disk) gives its space back
            raise
    finally:
        place.unlock()
        if made is not None and failed:
            _remove_if_only_the_lock(out.absolute(), made)


def _remove_if_only_the_lock(out: Path, made: Path) -> None:
    """``out`` and the folders above it up to ``made`` (the first this build made), where they hold only
    the lock file and the work folder."""
    try:
        if {p.name for p in out.iterdir()} <= {LOCK_NAME, WORK}:
            shutil.rmtree(out / WORK, ignore_errors=True)
            (out / LOCK_NAME).unlink(missing_ok=True)
            for folder in [out, *out.parents]:
                folder.rmdir()
                if folder == made:
                    break
    except OSError:  # another process put something there meanwhile: left as it is
        pass


def fresh_work(out: Path) -> Path:
    """``OUT/.objcli-tmp``, emptied of what a killed run left there."""
    work = out / WORK
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    return work


def publish(out: Path, work: Path, renames: list[tuple[str, str]], manifest: dict) -> None:
    """Shards to their final names, the format's own files, then the manifest, last."""
    for old, new in renames:
        os.replace(work / old, out / new)
    from ..formats import format_of
    from ..formats.dataset_card import card_files

    records = decode_manifest(manifest, MANIFEST_NAME)
    files = format_of(records.format).side_files(records.shards, records.columns, records.config_sha256)
    for name, text in {**files, **card_files(LocalPlace(out), manifest)}.items():
        (out / name).parent.mkdir(exist_ok=True)  # a split's folder (hf with splits)
        (out / name).write_text(text, encoding="utf-8")
    write_json_atomically(out / MANIFEST_NAME, manifest)
    shutil.rmtree(work, ignore_errors=True)


def refuse_or_clear(command: str, out: Path, overwrite: bool) -> None:
    """One rule for what an output folder already holds, as ``transform`` applies it: objcli's own
    files (manifest, shards, format files) of another output are refused without --overwrite, which
    removes exactly those; what a killed merge or reshard left (its work folder, no manifest) is
    cleared and the build restarted; any other file (notes, a README, a source kept inside the
    output) is the user's, kept, and never blocks."""
    from ..formats import SIDE_FILES
    from ..storage.ownership import own_files

    held = [out / name for name in sorted(own_files(LocalPlace(out), SIDE_FILES))]
    killed = (out / WORK).exists() and not (out / MANIFEST_NAME).exists()
    if held and not overwrite and not killed:
        raise ObjcliError(
            f"{command}: output {out} is not empty: it holds another output's files ({held[0].name}); "
            "pass --overwrite to replace them or choose another folder"
        )
    SIDE_FILES.remove_folders(LocalPlace(out))
    for path in held:
        path.unlink()
