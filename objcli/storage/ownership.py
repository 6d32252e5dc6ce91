"""Which files of an output folder are objcli's: what ``--overwrite`` removes, what a run refuses to
replace, and what it never touches (an input of the run, a file behind a link, a user's file named
like a shard). objcli's own are the manifest, the files it lists, the names a run that stopped while
finishing was giving its files (``finishing.json`` in the work folder), and the formats' side files by
their exact names; anything else is the user's."""

from __future__ import annotations

import os

from ..errors import ObjcliError
from .manifest import MANIFEST_NAME

FINISHING = "finishing.json"  # in the work folder: the final names a run is giving its files


def listed_files(manifest: dict | None) -> set[str]:
    """The files a manifest names as its shards' (plain names in the output folder only)."""
    names = set()
    for shard in (manifest or {}).get("shards", []) if isinstance(manifest, dict) else []:
        files = shard.get("files") if isinstance(shard, dict) else None
        names.update(n for n in files or [] if isinstance(n, str) and n and "/" not in n and n not in (".", ".."))
    return names


def own_files(place, side_files, work_place=None) -> set[str]:
    """The files in an output that objcli put there, what --overwrite removes: its manifest, the files
    the manifest lists, those a run that stopped while finishing was naming (its work folder's
    ``finishing.json``), and the formats' side files by their exact names. A file of any other name
    is the user's, however much it looks like a shard (``data-00000-of-00001.csv``)."""
    names = set(place.names())
    owned = {MANIFEST_NAME, MANIFEST_NAME + ".tmp"} | listed_files(place.read_json(MANIFEST_NAME))
    if work_place is not None:
        owned |= listed_files({"shards": [work_place.read_json(FINISHING) or {}]})
    return {n for n in names if n in owned or side_files.is_side_file(n)}


def is_input(place, name: str, inputs: list[str]) -> bool:
    """Whether ``name`` in the output is one of the run's input files."""
    if place.remote:
        return any(i.rstrip("/") == f"{place.url}/{name}" for i in inputs)
    path = os.path.realpath(place.path / name)
    return any(os.path.realpath(i) == path for i in inputs if "://" not in i)


def delete_own(place, inputs: list[str], names) -> None:
    """Remove files objcli wrote here, never an input of this run (one line instead, before any goes)."""
    names = sorted(names)
    for name in names:
        if is_input(place, name, inputs):
            raise ObjcliError(
                f"output {place.where}: {name} is an input of this run and a file of the output there; "
                "choose another folder with -o (or move the input out of it)"
            )
    for name in names:
        place.delete(name)


def check_split_folders(place, names: list[str]) -> None:
    """A split's folder (``--format hf --split``) is a real folder inside the output: objcli never
    writes, nor removes, through a symbolic link to somewhere else."""
    for folder in sorted({n.rpartition("/")[0] for n in names if "/" in n}):
        path = None if place.remote else place.path / folder
        if path is not None and path.is_symlink():
            raise ObjcliError(
                f"output {place.where}: {folder} is a symbolic link, where this run writes the {folder} "
                "split's files; remove the link or choose another folder with -o"
            )
        if path is not None and path.exists() and not path.is_dir():
            raise ObjcliError(
                f"output {place.where}: {folder} is a file, where this run writes the {folder} split's "
                "folder; move it or choose another folder with -o"
            )


def side_files_present(place, names: list[str]) -> set[str]:
    """The split folders' side files a run writes that a file already holds: the user's or an
    earlier run's, refused or removed as a top-level side file is."""
    return {n for n in names if place.read_text(n) is not None}


def refuse_foreign_targets(place, work_place, names: list[str], owned: set[str]) -> None:
    """A file of the user's where a run's shard or side file goes (a ``part-00000-of-00001.arrow``
    no manifest of objcli's lists) is never replaced: the run stops before its renames, its
    partitions kept, so the same command finishes it once the file is moved."""
    present = set(place.names())
    finishing = listed_files({"shards": [work_place.read_json(FINISHING) or {}]})
    for name in names:
        if name in present and name not in owned and name != "README.md" and name not in finishing:
            raise ObjcliError(
                f"output {place.where}: {name} is a file objcli did not write, where this run puts one of "
                "its own; move it away and rerun the same command (finished partitions are kept)"
            )
