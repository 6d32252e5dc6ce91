"""``verify``'s invariants that follow from the columns' *roles*, whatever the objective: segment ids
count up from 1 with padding (0) only at the end and positions restart at every segment; sentinels in
order in labels (and inputs, encoder-decoder); labels -100 on every prefix; sentence pairs framed by
[CLS] and [SEP] with their attention mask; multi-token prediction's target depths; packed preference
pairs (``verify_pairs.py``) and NVIDIA's packed rows (``verify_packed.py``)."""

from __future__ import annotations

import numpy as np

from ..formats import Column
from ..kernels import IGNORE
from ..storage.manifest import Manifest
from .verify_images import check_image_spans
from .verify_packed import check_packed_sequences
from .verify_padding import check_padded_sequences, check_sequence_padding
from .verify_pairs import check_pair_sides

# The roles whose invariants are checked (the rest: ranges and lengths only).
CHECKED = ("tokens", "labels", "segment_ids", "positions", "prefix_length", "attention_mask", "token_type_ids")
CHECKED += ("target_depth", "pair_side", "loss_mask", "sequence_starts", "cu_seqlens", "cu_seqlens_padded")
CHECKED += ("images", "image_spans")


def check_by_role(manifest: Manifest, specs: dict, columns: dict[str, Column]) -> list[str]:
    """Invariants that follow from the columns' roles, whatever the objective."""
    problems = []
    named = {role: [s.name for s in specs.values() if s.role == role and s.name in columns] for role in CHECKED}
    for segments in named["segment_ids"]:
        family = specs[segments].family
        positions = next((p for p in named["positions"] if specs[p].family == family), None)
        problems += _check_segments(segments, columns[segments], columns.get(positions), positions or "positions")
    special = manifest.special_tokens
    tokens, labels = (named["tokens"] or [None])[0], (named["labels"] or [None])[0]
    if special.sentinels and tokens and labels:
        own_length = specs[labels].family == "labels"  # encoder-decoder: the same spans on both sides
        problems += _check_sentinels(columns[tokens], columns[labels], np.array(special.sentinels), own_length)
    if named["prefix_length"] and labels:
        segments = next((s for s in named["segment_ids"] if specs[s].family == "input_ids"), None)
        problems += _check_prefixes(
            columns[labels],
            columns[named["prefix_length"][0]],
            columns.get(segments),
            columns.get(named["positions"][0]) if named["positions"] else None,
        )
    for spans in named["image_spans"]:
        family, listed = specs[spans].family, named["images"]
        segments = next((s for s in named["segment_ids"] if specs[s].family == family), None)
        problems += check_image_spans(columns[family], columns[spans], columns[listed[0]] if listed else None,
                                      columns.get(labels), columns.get(segments))  # fmt: skip
    if tokens and labels and _labels_are_inputs(manifest.objective):
        values, label_values = columns[tokens].values, columns[labels].values
        if values.shape == label_values.shape and np.any((label_values != IGNORE) & (label_values != values)):
            problems.append("labels hold a value that is neither -100 nor the token at its position")
    if named["attention_mask"] and named["token_type_ids"] and "cls" in special.ids:
        problems += _check_pairs(
            columns[tokens], columns[named["attention_mask"][0]], columns[named["token_type_ids"][0]], special.ids
        )
    if named["pair_side"] and tokens and labels and named["segment_ids"]:
        segments = columns[named["segment_ids"][0]]
        problems += check_pair_sides(columns[tokens], columns[labels], segments, columns[named["pair_side"][0]])
    if tokens and named["loss_mask"] and named["sequence_starts"]:  # NVIDIA's packed SFT rows
        problems += check_packed_sequences(
            columns[tokens], *(columns[named[r][0]] for r in ("loss_mask", "sequence_starts"))
        )
    problems += _check_padding(manifest, named, columns)
    if named["target_depth"] and named["segment_ids"]:
        depth = named["target_depth"][0]
        problems += _check_target_depth(columns[depth], columns[named["segment_ids"][0]], specs[depth].max_value)
    return problems


def _check_padding(manifest: Manifest, named: dict, columns: dict[str, Column]) -> list[str]:
    """Rows written with --pad-to-multiple (``verify_padding.py``)."""
    multiple = manifest.recipe.get("pad-to-multiple", 1)
    if multiple == 1:
        return []
    if named["cu_seqlens"] and named["cu_seqlens_padded"] and named["segment_ids"]:
        labels = columns[named["labels"][0]] if named["labels"] else None
        real, padded, segments = (columns[named[r][0]] for r in ("cu_seqlens", "cu_seqlens_padded", "segment_ids"))
        return check_sequence_padding(multiple, segments, real, padded, labels)
    if named["tokens"] and named["sequence_starts"]:
        return check_padded_sequences(multiple, columns[named["tokens"][0]], columns[named["sequence_starts"][0]])
    return ["the manifest records --pad-to-multiple, and the shard has no sequence bounds to check it by"]


def _labels_are_inputs(objective: str) -> bool:
    from ..objectives import REGISTRY

    return objective in REGISTRY and REGISTRY.named(objective).labels_are_inputs


def _check_target_depth(depth: Column, segments: Column, heads: int) -> list[str]:
    """Multi-token prediction, checked as a recurrence: 0 on padding and on a segment's last token in
    a row, else one more than the next token's, capped at K."""
    seg, values = segments.values, depth.values.astype(np.int64)
    same_next = np.zeros(len(seg), dtype=bool)
    same_next[:-1] = (seg[1:] == seg[:-1]) & (seg[:-1] > 0)
    same_next[segments.offsets[1:][segments.lengths > 0] - 1] = False  # rows end segments
    following = np.append(values[1:], 0)
    expected = np.where(same_next, np.minimum(following + 1, heads), 0)
    if not np.array_equal(values, expected):
        return ["heads_with_target is not min(K, tokens left in the segment) at every position"]
    return []


def _check_prefixes(
    labels: Column, prefixes: Column, segment_ids: Column | None, positions: Column | None
) -> list[str]:
    """Labels are -100 on the prefix: positions < prefix length, given per row or, in packed rows
    (with segment ids), per segment."""
    if segment_ids is not None and positions is not None:
        positions = positions.values
        valid = segment_ids.values > 0
        starts = valid & (positions == 0)
        row_of_token = np.repeat(np.arange(len(segment_ids.lengths)), segment_ids.lengths)
        if not np.array_equal(np.bincount(row_of_token[starts], minlength=len(segment_ids.lengths)), prefixes.lengths):
            return ["prefix_lengths does not hold one value per segment"]
        segment = np.maximum(np.cumsum(starts) - 1, 0)  # each token's segment, in row order
        on_prefix = valid & (positions < prefixes.values[segment]) if len(prefixes.values) else valid
    else:
        index = np.arange(len(labels.values)) - np.repeat(labels.offsets[:-1], labels.lengths)
        on_prefix = index < np.repeat(prefixes.values, labels.lengths)
    if np.any(labels.values[on_prefix] != IGNORE):
        return ["labels are not -100 on the prefix (positions < prefix_lengths)"]
    return []


def _check_segments(name: str, segments: Column, positions: Column | None, positions_name: str) -> list[str]:
    seg = segments.values.astype(np.int64)
    row_start = np.zeros(len(seg), dtype=bool)
    row_start[segments.offsets[:-1][segments.lengths > 0]] = True
    previous = np.concatenate([[0], seg[:-1]])
    previous[row_start] = 0
    counts_up = (seg == previous) | (seg == previous + 1)
    after_padding = (seg != 0) & (previous == 0) & ~row_start
    if np.any((seg != 0) & ~counts_up) or np.any(after_padding):
        return [f"{name} do not count up from 1 with padding (0) only at the end of a row"]
    if positions is None:
        return []
    index = np.arange(len(seg))
    new_segment = row_start | (seg != previous)
    start = np.maximum.accumulate(np.where(new_segment, index, 0))
    inside = seg != 0
    if not np.array_equal(positions.values[inside], (index - start)[inside]):
        return [f"{positions_name} do not restart at 0 with every segment"]
    return []


def _sentinel_sequences(column: Column, sentinels: np.ndarray) -> list[np.ndarray]:
    is_sentinel = np.isin(column.values, sentinels)
    rows = np.repeat(np.arange(len(column.lengths)), column.lengths)
    found = column.values[is_sentinel]
    return np.split(found, np.searchsorted(rows[is_sentinel], np.arange(1, len(column.lengths))))


def _check_sentinels(tokens: Column, labels: Column, sentinels: np.ndarray, own_length: bool) -> list[str]:
    """Each row's labels hold sentinels 0, 1, 2, ... in order; an encoder-decoder row's inputs
    (labels of their own length) hold the same sequence."""
    problems = []
    label_rows = _sentinel_sequences(labels, sentinels)
    if any(not np.array_equal(r, sentinels[: len(r)]) for r in label_rows):
        problems.append("labels hold sentinels out of order (expected <extra_id_0>, <extra_id_1>, ...)")
    if own_length:
        input_rows = _sentinel_sequences(tokens, sentinels)
        if any(not np.array_equal(a, b) for a, b in zip(input_rows, label_rows)):
            problems.append("input_ids and labels hold different sentinel sequences")
    return problems


def _check_pairs(tokens: Column, mask: Column, token_types: Column, ids: dict[str, int]) -> list[str]:
    problems = []
    if np.any(tokens.values[tokens.offsets[:-1][tokens.lengths > 0]] != ids["cls"]):
        problems.append("a row does not start with [CLS]")
    is_sep = (tokens.values == ids["sep"]) & (mask.values == 1)
    rows = np.repeat(np.arange(len(tokens.lengths)), tokens.lengths)
    separators = np.bincount(rows[is_sep], minlength=len(tokens.lengths))
    # One [SEP] closes segment A, one closes segment B (ELECTRA rows may hold segment A only).
    has_b = np.bincount(rows, weights=(token_types.values == 1) & (mask.values == 1), minlength=len(tokens.lengths)) > 0
    if np.any(separators != 1 + has_b):
        problems.append("a row does not close each of its segments with one [SEP]")
    previous = np.concatenate([[1], mask.values[:-1]])
    previous[tokens.offsets[:-1][tokens.lengths > 0]] = 1
    if np.any((mask.values == 1) & (previous == 0)):
        problems.append("attention_mask is not ones followed by zeros")
    return problems
