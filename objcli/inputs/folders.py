"""Folders given as inputs: their files, walked recursively, less what a corpus folder holds that is
not corpus (an objcli output's own files, a model's JSON files, links that lead nowhere), each left
out in one warning."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ObjcliError


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


OBJCLI_KEYS = frozenset({"shards", "complete", "config", "token_store", "format", "totals"})


def damaged_output(folder: Path) -> str | None:
    """A shard of an objcli output in ``folder`` whose ``manifest.json`` is not objcli's (damaged, cut
    short, edited into other JSON), or None: such a folder is an output to rebuild, never a folder of text."""
    import json

    from ..storage.output import is_shard_name

    try:
        with open(folder / "manifest.json", "rb") as f:
            manifest = json.loads(f.read())
        if isinstance(manifest, dict) and ("objcli_version" in manifest or not OBJCLI_KEYS & set(manifest)):
            return None  # objcli's, or another tool's manifest (a corpus folder's own)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        pass
    try:
        shards = sorted(name for name in os.listdir(folder) if is_shard_name(name))
    except OSError:
        return None
    return shards[0] if shards else None


def refuse_damaged_output(folder: Path) -> None:
    shard = damaged_output(folder)
    if shard is not None:
        raise ObjcliError(
            f"input {folder}: an objcli output (it holds {shard}) whose manifest.json is damaged or not objcli's; "
            "rerun the objcli tokenize or transform that wrote it (with --overwrite)"
        )


def saved_dataset_files(folder: Path) -> set[str] | None:
    """The files of a ``datasets`` ``save_to_disk`` dataset saved in ``folder`` (its ``state.json``,
    ``dataset_info.json`` and the data files the state lists), or of a ``DatasetDict``'s top
    (``dataset_dict.json``: its splits are datasets of their own); None when there is none."""
    import json

    for name, key in (("state.json", "_data_files"), ("dataset_dict.json", "splits")):
        try:
            with open(folder / name, "rb") as f:
                saved = json.loads(f.read())
        except (OSError, ValueError):
            continue
        if isinstance(saved, dict) and isinstance(saved.get(key), list):
            entries = saved[key] if key == "_data_files" else []
            data = {e["filename"] for e in entries if isinstance(e, dict) and isinstance(e.get("filename"), str)}
            return {name, "dataset_info.json", *data}
    return None


def holds_more_than_a_saved_dataset(folder: str) -> bool:
    """Whether a ``save_to_disk`` folder holds data files beside the dataset (the user's, read as a folder
    of inputs then, the dataset left out with a warning), rather than being the dataset alone."""
    from .text_formats import format_from_name

    return bool(folder_files(folder, format_from_name))


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
    reached twice, as by a link loop, is walked once); every path with a hidden component (``.git/``),
    an objcli output's own files and a ``save_to_disk`` dataset's are skipped (any other file beside
    them is read); what was left out is named in a warning."""
    files, seen, left_out = [], set(), _LeftOut()
    for parent, folders, names in os.walk(folder, followlinks=True):
        real = os.stat(parent)
        if (real.st_dev, real.st_ino) in seen:
            folders[:] = []
            continue
        seen.add((real.st_dev, real.st_ino))
        own, own_folders = left_out.outputs_in(Path(parent))
        folders[:] = [d for d in folders if not d.startswith(".") and d not in own_folders]
        for name in names:
            path = os.path.join(parent, name)
            if name in own or name.startswith(".") or format_of_name(name) is None:
                continue  # an output's own file is never an input, whatever its name
            if name in MODEL_FILES:  # a tokenizer or model folder inside the corpus: never training text
                left_out.model_files.append(path)
            elif os.path.isfile(path):
                files.append(path)
            elif not os.path.exists(path):
                left_out.dangling.append(path)
    if warn:
        left_out.say(folder, warn)
    return sorted(files)


class _LeftOut:
    """What a folder walk left out, to be named in its warnings."""

    def __init__(self):
        self.outputs, self.datasets, self.dangling, self.model_files = [], [], [], []

    def outputs_in(self, folder: Path) -> tuple[set[str], set[str]]:
        """The files and subfolders of an output in ``folder`` (objcli's, or a ``save_to_disk`` dataset);
        a damaged objcli output is one line."""
        refuse_damaged_output(folder)
        output = objcli_output_files(folder)
        if output is not None:
            self.outputs.append(str(folder))
            return output
        dataset = saved_dataset_files(folder)
        if dataset is not None:
            self.datasets.append(str(folder))
        return dataset or set(), set()

    def say(self, folder: str, warn) -> None:
        _say_left_out(folder, self.outputs, self.dangling, self.model_files, warn)
        if self.datasets:
            warn(
                f"input {folder}: left out the datasets save_to_disk dataset in {self.datasets[0]} (its state.json, "
                "dataset_info.json and data files); name its folder as an input of its own to read its ids"
            )


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
