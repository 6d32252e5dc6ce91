"""Folders given as inputs: their files, walked recursively, less what a corpus folder holds that is
not corpus (an objcli output's own files, a model's JSON files, links that lead nowhere), each left
out in one warning."""

from __future__ import annotations

import os
from pathlib import Path


def objcli_output_files(folder: Path) -> tuple[set[str], set[str]] | None:
    """The files and subfolders of an objcli output written (or being written) in ``folder``: its
    manifest, the shards and files it lists, its formats' side files and split folders, and for a run
    still going the names its shards take. None when the folder holds no objcli output: any other
    file in it is the user's (a corpus kept beside an output is read)."""
    import json

    from ..formats import SIDE_FILES
    from ..storage.output import is_shard_name

    running = (folder / ".objcli-tmp").exists()
    try:
        with open(folder / "manifest.json", "rb") as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError):
        manifest = None
    if not isinstance(manifest, dict) or "objcli_version" not in manifest:
        manifest = None
    if manifest is None and not running:
        return None
    files = {"manifest.json", "README.md"}
    for shard in manifest.get("shards", []) if manifest else []:
        if isinstance(shard, dict) and isinstance(shard.get("files"), list):
            files.update(str(name) for name in shard["files"])
    names = os.listdir(folder)
    files.update(n for n in names if SIDE_FILES.is_side_file(n) or (running and is_shard_name(n)))
    splits = {split for split in names if os.path.isfile(os.path.join(folder, split, "state.json"))}
    return files, splits if "dataset_dict.json" in files else set()


# The JSON files of a Hugging Face tokenizer or model folder: a folder walk leaves them out (a corpus
# folder with the tokenizer beside it is common); named as an input, such a file is read.
MODEL_FILES = frozenset(
    {
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "config.json",
        "generation_config.json",
        "vocab.json",
        "preprocessor_config.json",
    }
)


def folder_files(folder: str, format_of_name, warn=None) -> list[str]:
    """Data files under a folder, sorted. Symbolic links are followed as ``find -L`` does (a folder
    reached twice, as by a link loop, is walked once); every path with a hidden component (``.git/``)
    and an objcli output's own files are skipped (any other file beside them is read); dangling links
    are named in a warning."""
    files, dangling, seen, model_files, outputs = [], [], set(), [], []
    for parent, folders, names in os.walk(folder, followlinks=True):
        real = os.stat(parent)
        if (real.st_dev, real.st_ino) in seen:
            folders[:] = []
            continue
        seen.add((real.st_dev, real.st_ino))
        output = objcli_output_files(Path(parent))
        own, own_folders = output or (set(), set())
        if output is not None:
            outputs.append(parent)
        folders[:] = [d for d in folders if not d.startswith(".") and d not in own_folders]
        for name in names:
            if name in own:  # an objcli output's own file: never an input, whatever its name
                continue
            path = os.path.join(parent, name)
            if name.startswith(".") or format_of_name(name) is None:
                continue
            if name in MODEL_FILES:  # a tokenizer or model folder inside the corpus: never training text
                model_files.append(path)
                continue
            if os.path.isfile(path):
                files.append(path)
            elif not os.path.exists(path):
                dangling.append(path)
    if warn:
        _say_left_out(folder, outputs, dangling, model_files, warn)
    return sorted(files)


def _say_left_out(folder: str, outputs: list[str], dangling: list[str], model_files: list[str], warn) -> None:
    if outputs:
        warn(f"input {folder}: left out the objcli output in {outputs[0]} (its manifest, shards and format files)")
    if dangling:
        warn(f"input {folder}: skipped {len(dangling)} dangling symbolic link(s), e.g. {sorted(dangling)[0]}")
    if model_files:
        warn(
            f"input {folder}: skipped {len(model_files)} tokenizer or model file(s), e.g. {sorted(model_files)[0]}; "
            "name a file to read it as data"
        )
