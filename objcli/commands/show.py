"""``objcli inspect``: rows decoded back to text, as the trainer will see them.

Segments alternate colours on a terminal and are numbered ``[1] … [2] …`` otherwise; padding is
shown as ``[pad ×N]``; special tokens appear by name (``</s>``) instead of vanishing in decode.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import click
import msgspec
import numpy as np

from ..errors import ObjcliError
from ..storage.manifest import ColumnInfo, Manifest
from ..tokenizers import SpecialTokens, Tokenizer, open_tokenizer

SEGMENT_COLOURS = ("cyan", "yellow", "green", "magenta")


def load_output_tokenizer(manifest: Manifest, override: str | None) -> Tokenizer:
    path = override or manifest.tokenizer.path
    if not Path(path).exists():  # a file, or a folder holding tokenizer.json
        raise ObjcliError(f"tokenizer {path} (from the manifest) is gone; pass its new path with --tokenizer")
    tokenizer = open_tokenizer(path)
    if tokenizer.sha256 != manifest.tokenizer.sha256:  # the kind's own digest (tiktoken: with its side file)
        raise ObjcliError(f"tokenizer {path}: sha256 differs from the manifest's; pass the model used with --tokenizer")
    tokenizer.adopt(SpecialTokens(**msgspec.structs.asdict(manifest.special_tokens)))
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


def render_row(row: dict[str, np.ndarray], roles: dict[str, str], tokenizer: Tokenizer, colour: bool) -> str:
    """The tokens column of a row, one run per segment (from the segment ids, or for sentence
    pairs from the token types under the attention mask: [1] = A, [2] = B, 0 = padding)."""
    ids = np.asarray(row[roles["tokens"]])
    if roles.get("segment_ids") in row:  # formats without segment ids (Megatron) show one run
        segments = np.asarray(row[roles["segment_ids"]])
    elif roles.get("attention_mask") in row and roles.get("token_type_ids") in row:
        segments = np.where(
            np.asarray(row[roles["attention_mask"]]) > 0, np.asarray(row[roles["token_type_ids"]]) + 1, 0
        )
    else:
        segments = np.ones(len(ids), dtype=np.int32)
    parts = []
    for segment, start, stop in _runs(segments):
        if segment == 0:
            text = f"[pad ×{stop - start}]"
            parts.append(click.style(text, dim=True) if colour else text)
            continue
        text = _decoded(ids, start, stop, row.get(roles.get("image_spans")) or (), tokenizer)
        if colour:
            parts.append(click.style(text, fg=SEGMENT_COLOURS[(segment - 1) % len(SEGMENT_COLOURS)]))
        else:
            parts.append(f"[{segment}] {text}")
    return ("" if colour else " ").join(parts)


def _decoded(ids: np.ndarray, start: int, stop: int, image_spans, tokenizer: Tokenizer) -> str:
    """Tokens ``start:stop`` decoded, each image's span in it shown as ``[image ×N]`` (N: its image tokens)."""
    parts, at = [], start
    for first, end in (span for span in image_spans if start <= span[0] < stop):
        parts += [tokenizer.decode(ids[at:first]), f"[image ×{int(np.sum(ids[first:end] == ids[first]))}]"]
        at = end
    return "".join([*parts, tokenizer.decode(ids[at:stop])])


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


def _details(row: dict, columns: list[ColumnInfo], roles: dict[str, str]) -> list[str]:
    """The per-row values worth a glance: prefix lengths, class labels, categories, per-segment values."""
    details = [f"{len(row[roles['tokens']])} tokens"] if "tokens" in roles else []
    for column in columns:
        name, role = column.name, column.role
        if role == "images":  # shown where their tokens are (render_row); the references one a line below
            details.append(f"{len(row.get(name) or [])} images")
            continue
        if role == "image_spans":
            continue
        if column.kind == "value" and "tokens" in roles:  # a value beside tokens (a reward pair's margin)
            details.append(f"{name} {json.dumps(row.get(name), ensure_ascii=False)}")
            continue
        values = np.atleast_1d(row[name]).tolist() if name in row else []
        if role == "prefix_length":
            details.append(f"prefix {', '.join(map(str, values))}")
        elif role in ("example_label", "per_segment"):
            details.append(f"{name} {', '.join(map(str, values))}")
        elif role == "target_depth":  # multi-token prediction: how many targets each head has here
            depth = np.asarray(values)
            details.append(
                "targets per head " + " · ".join(str(int(np.sum(depth >= k))) for k in range(1, column.max_value + 1))
            )
        elif role == "category":
            details.append(f"{name} {', '.join(column.categories[v] for v in values)}")
    return details


def inspect_output(
    folder: str, rows: int, tokenizer_path: str | None, colour: bool, split: str | None = None, start: int = 0
) -> Iterator[str]:
    """``rows`` rows from row ``start`` (of ``split``'s rows, numbered within it, where given), decoded."""
    from ..reading.reader import Rows

    reader = Rows(folder, split, tokenizer=tokenizer_path)
    if start > len(reader):
        raise ObjcliError(
            f"--start {start}: {folder} has {len(reader):,} rows{f' in its {split} split' if split else ''}; "
            "give a start below that"
        )
    manifest = reader.manifest
    tokenizer = load_output_tokenizer(manifest, tokenizer_path)
    columns = manifest.columns
    roles = {}
    for column in columns:  # the first column of each role in the input_ids family
        if column.family == "input_ids" or column.role == "tokens":
            roles.setdefault(column.role, column.name)
    labels = next((c.name for c in columns if c.role == "labels"), None)
    for number, row in enumerate(islice(reader.iterate(start), rows), start=start):
        shard = reader.file_of(number)
        header = " · ".join([f"── {split + ' ' if split else ''}row {number}", shard, *_details(row, columns, roles)])
        yield click.style(header, bold=True) if colour else header
        if "tokens" not in roles:  # rows of values (RL prompts): each as its JSON
            yield from (
                f"{c.name}: {json.dumps(row[c.name], ensure_ascii=False)}" for c in columns if c.kind == "value"
            )
            continue
        if labels and labels in row:
            yield "input_ids: " + render_row(row, roles, tokenizer, colour)
            yield "labels:    " + render_labels(row[labels], tokenizer, colour)
        else:
            views = sum(c.role == "tokens" for c in columns) > 1  # a contrastive row: name each view
            yield (f"{roles['tokens']}: " if views else "") + render_row(row, roles, tokenizer, colour)
        yield from _other_views(row, columns, roles["tokens"], tokenizer)
        yield from (f"image {k + 1}: {reference}" for k, reference in enumerate(row.get(roles.get("images")) or ()))


def _other_views(row: dict, columns: list[ColumnInfo], first: str, tokenizer: Tokenizer) -> Iterator[str]:
    """Token columns beyond the first (a contrastive row's positive and negatives), one line each,
    cut to their mask when the views are padded."""
    masks = {c.family: c.name for c in columns if c.role == "attention_mask"}
    for column in columns:
        if column.role != "tokens" or column.name == first or column.name not in row:
            continue
        ids = np.asarray(row[column.name])
        if masks.get(column.name) in row:
            ids = ids[np.asarray(row[masks[column.name]]) > 0]
        yield f"{column.name}: {tokenizer.decode(ids)}"
