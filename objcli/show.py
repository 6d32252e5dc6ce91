"""``objcli inspect``: rows decoded back to text, as the trainer will see them.

Segments alternate colours on a terminal and are numbered ``[1] … [2] …`` otherwise; padding is
shown as ``[pad ×N]``; special tokens appear by name (``</s>``) instead of vanishing in decode.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import click
import numpy as np

from .errors import ObjcliError
from .files import file_sha256
from .manifest import read_manifest
from .shards import iter_rows
from .tokenizers import SpecialTokens, Tokenizer, open_tokenizer

SEGMENT_COLOURS = ("cyan", "yellow", "green", "magenta")


def load_output_tokenizer(manifest: dict, override: str | None) -> Tokenizer:
    path = override or manifest["tokenizer"]["path"]
    if not Path(path).is_file():
        raise ObjcliError(f"tokenizer {path} (from the manifest) is gone; pass its new path with --tokenizer")
    if file_sha256(path) != manifest["tokenizer"]["sha256"]:
        raise ObjcliError(f"tokenizer {path}: sha256 differs from the manifest's; pass the model used with --tokenizer")
    tokenizer = open_tokenizer(path)
    tokenizer.adopt(SpecialTokens(**manifest["special_tokens"]))
    return tokenizer


def _runs(segment_ids: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(segment id, start, stop) for each run of equal segment ids."""
    if len(segment_ids) == 0:
        return
    cuts = np.flatnonzero(np.diff(segment_ids)) + 1
    starts = np.concatenate([[0], cuts])
    stops = np.concatenate([cuts, [len(segment_ids)]])
    for start, stop in zip(starts, stops):
        yield int(segment_ids[start]), int(start), int(stop)


def render_row(row: dict[str, np.ndarray], tokenizer: Tokenizer, colour: bool) -> str:
    ids = np.asarray(row["input_ids"])
    if "segment_ids" in row:
        segments = np.asarray(row["segment_ids"])
    elif "attention_mask" in row:  # sentence pairs: [1] = [CLS] A [SEP], [2] = B [SEP], 0 = padding
        segments = np.where(np.asarray(row["attention_mask"]) > 0, np.asarray(row["token_type_ids"]) + 1, 0)
    else:
        segments = np.ones(len(ids), dtype=np.int32)
    parts = []
    for segment, start, stop in _runs(segments):
        if segment == 0:
            text = f"[pad ×{stop - start}]"
            parts.append(click.style(text, dim=True) if colour else text)
            continue
        text = tokenizer.decode(ids[start:stop])
        if colour:
            parts.append(click.style(text, fg=SEGMENT_COLOURS[(segment - 1) % len(SEGMENT_COLOURS)]))
        else:
            parts.append(f"[{segment}] {text}")
    return ("" if colour else " ").join(parts)


def render_labels(labels: np.ndarray, tokenizer: Tokenizer, colour: bool) -> str:
    """Labels with each run of -100 (no loss) shown as ``[-100 ×N]``."""
    parts = []
    for ignored, start, stop in _runs((np.asarray(labels) < 0).astype(np.int8)):
        if ignored:
            text = f"[-100 ×{stop - start}]"
            parts.append(click.style(text, dim=True) if colour else text)
        else:
            parts.append(tokenizer.decode(np.asarray(labels)[start:stop]))
    return " ".join(parts)


def inspect_output(folder: str, rows: int, tokenizer_path: str | None, colour: bool) -> Iterator[str]:
    manifest = read_manifest(folder)
    tokenizer = load_output_tokenizer(manifest, tokenizer_path)
    denoisers = manifest["config"]["objective_options"].get("denoisers", [])
    for number, (shard, row) in enumerate(islice(iter_rows(folder, manifest), rows)):
        details = [f"{len(row['input_ids'])} tokens"]
        if "prefix_lengths" in row:
            prefixes = np.atleast_1d(row["prefix_lengths"]).tolist()  # one per row, or one per segment
            details.append(f"prefix {', '.join(map(str, prefixes))}")
        for label in ("next_sentence_label", "sentence_order_label"):
            if label in row:
                details.append(f"{label} {int(row[label])}")
        if "denoiser" in row and denoisers:
            details.append(f"denoiser {denoisers[int(row['denoiser'])]['name']}")
        header = f"── row {number} · {shard} · {' · '.join(details)}"
        yield click.style(header, bold=True) if colour else header
        if "labels" in row:
            yield "input_ids: " + render_row(row, tokenizer, colour)
            yield "labels:    " + render_labels(row["labels"], tokenizer, colour)
        else:
            yield render_row(row, tokenizer, colour)
