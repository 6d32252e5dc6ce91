"""Files that come with a format's shards, written just before the manifest: what a trainer's loader
opens besides the shards themselves."""

from __future__ import annotations

import hashlib
import json

from .output import HF_DATASET_DICT, HF_FILES, data_args_name


def format_files(output_format: str, shards, columns, fingerprint: str) -> dict[str, str]:
    if output_format == "megatron":
        # One file per split (--train-data-path megatron.txt, --valid-data-path megatron-validation.txt).
        return {data_args_name(split): megatron_data_args([s for s in shards if s.split == split])
                for split in dict.fromkeys(s.split for s in shards)}
    if output_format == "hf":
        splits = list(dict.fromkeys(s.split for s in shards))
        if splits in ([], [""]):
            return dict(zip(HF_FILES, hf_saved_dataset(shards, columns, fingerprint)))
        return hf_saved_dataset_dict(splits, shards, columns, fingerprint)
    return {}


def hf_saved_dataset_dict(splits: list[str], shards, columns, fingerprint: str) -> dict[str, str]:
    """``DatasetDict.save_to_disk``'s layout over objcli's shards: ``dataset_dict.json`` naming the
    splits, and a folder per split holding its ``state.json`` and ``dataset_info.json``, whose data
    files are the split's shards beside the folder (``../train-00000-of-00002.arrow``: datasets joins
    the name to the split's folder), so ``load_from_disk(OUT)`` returns a ``DatasetDict``."""
    files = {HF_DATASET_DICT: json.dumps({"splits": splits}) + "\n"}
    for split in splits:
        state, info = hf_saved_dataset([s for s in shards if s.split == split], columns, fingerprint + split, "../")
        files[f"{split}/{HF_FILES[0]}"], files[f"{split}/{HF_FILES[1]}"] = state, info
    return files


def megatron_data_args(shards) -> str:
    """Megatron-LM's ``--data-args-path`` file: ``weight prefix`` per shard, weights in tokens (Megatron
    normalises them). Prefixes are relative to the output folder, so the output's bytes do not depend on
    where it was written; run Megatron from inside the folder, or prefix them (see the README)."""
    lines = [f"{shard.tokens} {shard.files[0].removesuffix('.bin')}" for shard in shards]
    return "\n".join(lines) + "\n"


def _feature(column) -> dict:
    value = {"dtype": "int32", "_type": "Value"}
    # "Sequence" is read by every datasets release (5.x reads it as List).
    return value if column.kind == "scalar" else {"feature": value, "_type": "Sequence"}


def hf_saved_dataset(shards, columns, fingerprint: str, folder: str = "") -> tuple[str, str]:
    """(state.json, dataset_info.json) as ``Dataset.save_to_disk`` writes them, over objcli's shards
    (``folder``: where the shards are from the state file's folder)."""
    files = [{"filename": folder + shard.files[0]} for shard in shards]
    state = {
        "_data_files": files,
        "_fingerprint": hashlib.sha256(fingerprint.encode()).hexdigest()[:16],
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    info = {"citation": "", "description": "written by objcli; see manifest.json",
            "features": {c.name: _feature(c) for c in columns}, "homepage": "", "license": ""}
    return json.dumps(state, indent=2) + "\n", json.dumps(info, indent=2) + "\n"
