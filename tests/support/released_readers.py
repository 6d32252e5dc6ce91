"""The released packed-SFT readers' own code, run as written: ``GPTSFTPackedDataset`` of Megatron-Bridge 0.3.1
(``megatron/bridge/data/datasets/sft.py``) and of NeMo 2.4.0 (``nemo/collections/llm/gpt/data/core.py``), read
from the wheels ``make test`` downloads into ``.venv/released-readers`` (the packages themselves need
megatron-core's and transformer-engine's CUDA builds to import). The methods a trainer's data path calls
(``_load_dataset``, ``__getitem__``, ``_build_loss_mask``, ``collate_fn`` and the helpers they use) are taken
from the source's syntax tree, unchanged, into a class of their own; the attributes ``__init__`` would set
are set as a trainer's defaults set them."""

from __future__ import annotations

import ast
import json
import logging
import math
import zipfile
from pathlib import Path

import numpy as np
from paths import ROOT

WHEELS = ROOT / ".venv" / "released-readers"
RELEASES = {
    "megatron-bridge 0.3.1": ("megatron_bridge-0.3.1-py3-none-any.whl", "megatron/bridge/data/datasets/sft.py"),
    "nemo 2.4.0": ("nemo_toolkit-2.4.0-py3-none-any.whl", "nemo/collections/llm/gpt/data/core.py"),
}
METHODS = {
    "_load_dataset",
    "__getitem__",
    "_build_loss_mask",
    "_maybe_cast_to_list",
    "collate_fn",
    "_collate_item",
    "_ceil_to_nearest",
}


class _NoMultiStorage:
    @staticmethod
    def is_enabled() -> bool:
        return False


class _Tokenizer:
    def __init__(self, eos_id: int):
        self.eos_id = eos_id


def _source(release: str, member: str | None = None) -> tuple[str, str]:
    wheel, reader = RELEASES[release]
    member = member or reader
    path = WHEELS / wheel
    if not path.exists():
        raise FileNotFoundError(f"{path}: make test downloads it (pip download --no-deps)")
    with zipfile.ZipFile(path) as archive:
        return archive.read(member).decode(), f"{wheel}/{member}"


def released_dataset(
    release: str,
    file_path: Path,
    eos_id: int,
    max_seq_length: int,
    metadata_path: Path | None = None,
    pad_to_max_length: bool = False,
    pad_seq_to_mult: int = 1,
):
    """A ``GPTSFTPackedDataset`` of ``release`` over ``file_path`` (answer-only loss, as their SFT recipes
    run it), its ``pack_metadata`` read as its ``__init__`` reads it."""
    import torch

    text, name = _source(release)
    tree = ast.parse(text)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    methods = {}
    for cls in ("GPTSFTDataset", "GPTSFTPackedDataset"):  # the packed class's own override the base's
        for node in classes[cls].body:
            if isinstance(node, ast.FunctionDef) and node.name in METHODS:
                methods[node.name] = node
    released = ast.ClassDef(name="Released", bases=[], keywords=[], body=list(methods.values()), decorator_list=[])
    module = ast.fix_missing_locations(ast.Module(body=[released], type_ignores=[]))
    namespace = {
        "np": np,
        "torch": torch,
        "json": json,
        "math": math,
        "logging": logging,
        "logger": logging.getLogger("released-reader"),
        "MultiStorageClientFeature": _NoMultiStorage,
    }
    exec(compile(module, name, "exec"), namespace)  # noqa: S102 - the released reader's own methods
    dataset = namespace["Released"].__new__(namespace["Released"])
    dataset.__dict__.update(
        file_path=str(file_path),
        tokenizer=_Tokenizer(eos_id),
        max_seq_length=max_seq_length,
        answer_only_loss=True,
        pad_to_max_length=pad_to_max_length,
        pad_seq_length_to_mult=16,
        ceil_to_power_2=False,
        _pad_seq_to_mult=pad_seq_to_mult,
        pad_cu_seqlens=pad_to_max_length and metadata_path is not None,
        return_cu_seqlen=True,
        samples_mapping=None,
        virtual_tokens=0,
        pack_metadata=json.load(open(metadata_path)) if metadata_path else None,
    )
    dataset._load_dataset()
    return dataset


def bridge_pre_pad(sequence: list[int], multiple: int, max_seq_length: int, pad_id: int) -> list[int]:
    """One tokenized sequence as Megatron-Bridge 0.3.1's ``tokenize_dataset`` pads it for
    ``pad_seq_to_mult`` (``megatron/bridge/data/datasets/packed_sequence.py``): its nested
    ``pre_pad_dataset`` and ``ceil_to_nearest``, taken from the source unchanged and run here."""
    text, name = _source("megatron-bridge 0.3.1", "megatron/bridge/data/datasets/packed_sequence.py")
    tokenize = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "tokenize_dataset")
    wanted = [
        node
        for node in ast.walk(tokenize)
        if (isinstance(node, ast.FunctionDef) and node.name == "pre_pad_dataset")
        or (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "ceil_to_nearest" for t in node.targets))
    ]
    module = ast.fix_missing_locations(ast.Module(body=wanted, type_ignores=[]))
    namespace = {"logging": logging}
    exec(compile(module, name, "exec"), namespace)  # noqa: S102 - the released preparation's own code
    data = {"input_ids": list(sequence)}
    # As tokenize_dataset's loop over the dataset calls it:
    max_length_to_pad = min(max_seq_length, namespace["ceil_to_nearest"](len(data["input_ids"]), multiple))
    namespace["pre_pad_dataset"](data, max_seq_length, max_length_to_pad, pad_id)
    return data["input_ids"]
