"""``objcli stats``: what the trainer will see in a finished output (REFERENCE §10).

Reads the manifest and the shards one at a time (never the whole output at once) and counts rows,
tokens, padding, supervised tokens (the tokens that carry loss) and examples per row, with the
length distribution of the examples and counts per category (e.g. UL2's denoisers).

Everything here works from the columns' *roles* and the objective's declared ``supervision`` in
the manifest, never from column or objective names:

- ``labels``: the labels that are not -100;
- ``next-token`` (causal LM, FIM): every token whose successor is in the same segment, L - 1 per segment;
- ``all-tokens`` (ELECTRA's discriminator): every token;
- ``example-labels`` (NSP/SOP without masking): no token carries loss, one class label per row.

A format that does not store segment ids (Megatron's) leaves examples per row "not known".
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from ..kernels import IGNORE
from ..order.mixture import manifest_blend
from ..reading.shards import read_shard_columns
from ..rows import Ragged
from ..run.progress import phase
from ..storage.manifest import Manifest, read_manifest

HISTOGRAM_BINS = 32


def _lengths(column) -> np.ndarray:
    return np.diff(column[1]) if isinstance(column, tuple) else np.full(len(column), column.shape[1])


def _row_figures(columns: dict, manifest: Manifest, tokens_name: str | None):
    if tokens_name is None:  # no token column (prompts in verl's layout): no row's tokens to count here
        rows = len(next(iter(columns.values())))
        none = np.zeros(rows, np.int64)
        return none, none, none, False
    """(tokens per row, example lengths, next-token targets per row, segments known) for one shard."""
    ids = columns[tokens_name]
    segments = manifest.columns_with_role("segment_ids", tokens_name)
    segment_ids = columns.get(segments[0].name) if segments else None
    if isinstance(segment_ids, np.ndarray) and segment_ids.ndim == 2:
        real = segment_ids > 0
        same_next = (segment_ids[:, 1:] == segment_ids[:, :-1]) & real[:, 1:]
        rows = len(segment_ids)
        example_lengths = np.concatenate([np.bincount(r[r > 0])[1:] for r in segment_ids]) if rows else np.zeros(0)
        return real.sum(axis=1), example_lengths, same_next.sum(axis=1), True
    starts = manifest.columns_with_role("sequence_starts")
    if starts:  # NVIDIA's packed SFT rows: each sequence runs from its start to the next
        values, offsets = columns[starts[0].name]
        row_tokens = _lengths(ids)
        ends = np.concatenate([values[1:], [0]])
        last = np.zeros(len(values), dtype=bool)
        last[offsets[1:][np.diff(offsets) > 0] - 1] = True
        ends[last] = np.repeat(row_tokens, np.diff(offsets))[last]
        return row_tokens, ends - values, np.maximum(row_tokens - np.diff(offsets), 0), True
    masks = manifest.columns_with_role("attention_mask")
    if masks:
        row_tokens = columns[masks[0].name].sum(axis=1)
        return row_tokens, row_tokens, np.maximum(row_tokens - 1, 0), True
    row_tokens = _lengths(ids)
    for labels in manifest.columns_with_role("labels"):  # encoder-decoder rows: targets of their own length
        if isinstance(columns.get(labels.name), tuple):
            row_tokens = row_tokens + _lengths(columns[labels.name])
    # No segment ids stored (Megatron's format keeps only tokens): a row is one example only when
    # nothing packed several into it.
    return row_tokens, _lengths(ids), np.maximum(_lengths(ids) - 1, 0), manifest.config.get("packing") == "none"


def _supervised(columns: dict, manifest: Manifest, supervision: str, row_tokens, next_token) -> np.ndarray:
    masks = manifest.columns_with_role("loss_mask")  # NVIDIA's packed SFT rows: the mask says it
    if masks:
        values, offsets = columns[masks[0].name]
        per_row = np.add.reduceat(values.astype(np.int64), offsets[:-1]) if len(values) else np.zeros(0, np.int64)
        return np.where(np.diff(offsets) > 0, per_row, 0)
    if supervision == "labels":
        labels = columns[manifest.columns_with_role("labels")[0].name]
        if isinstance(labels, tuple):
            values, offsets = labels
            per_row = (
                np.add.reduceat((values != IGNORE).astype(np.int64), offsets[:-1])
                if len(values)
                else np.zeros(len(offsets) - 1, np.int64)
            )
            return np.where(np.diff(offsets) > 0, per_row, 0)
        return (labels != IGNORE).sum(axis=1)
    if supervision == "all-tokens":
        return np.asarray(row_tokens)
    if supervision in ("example-labels", "pairs"):
        return np.zeros(len(row_tokens), dtype=np.int64)
    return next_token


def _count_categories(per_category: dict, categories: list, columns: dict, per_row, row_tokens) -> None:
    """Rows, tokens and supervised tokens of each category (e.g. UL2's denoisers) in one shard."""
    for spec in categories:
        for index, name in enumerate(spec.categories):
            members = columns[spec.name] == index
            counter = per_category.setdefault(name, Counter())
            counter["rows"] += int(members.sum())
            counter["supervised_tokens"] += int(per_row[members].sum())
            counter["tokens"] += int(np.asarray(row_tokens)[members].sum())


def _realised_mixture(per_source: dict[str, Counter], asked: dict[str, dict]) -> dict[str, dict]:
    """Each source's share of the tokens written, beside its requested share (or budget)."""
    total = sum(c["tokens"] for c in per_source.values()) or 1
    budgets = sum(a.get("budget", 0) for a in asked.values()) or 1
    return {
        name: {
            "tokens": c["tokens"],
            "rows": c["rows"],
            "share": c["tokens"] / total,
            "asked_share": asked.get(name, {}).get("share", asked.get(name, {}).get("budget", 0) / budgets),
        }
        for name, c in per_source.items()
    }


def sources_column(manifest: Manifest) -> bool:
    return any(c.name == "source" and c.kind == "scalar" for c in manifest.columns_with_role("category"))


def _sources_by_shard(manifest: Manifest) -> dict[str, Counter]:
    """A mixture whose format keeps no source column (Megatron's pairs, weighed by the blend file): each
    shard's source is its partition's, as the manifest records it."""
    source_of = {p["index"]: p.get("source", "") for p in manifest.partitions}
    per_source: dict[str, Counter] = {}
    for shard in manifest.shards:
        counter = per_source.setdefault(source_of.get(shard.partition, ""), Counter())
        counter["rows"] += shard.rows
        counter["tokens"] += shard.tokens
    return per_source


def _count_images(totals: Counter, columns: dict, manifest: Manifest) -> None:
    """Images and their image tokens: a span starts on its image token, and holds others between its
    image tokens (Idefics3's tile markers), which are not counted."""
    for spans_column in manifest.columns_with_role("image_spans"):
        ids = columns[spans_column.family]
        for row, spans in enumerate(columns[spans_column.name]):
            tokens = np.asarray(ids[row] if not isinstance(ids, Ragged) else ids.slice(row, row + 1).values)
            totals["images"] += len(spans)
            totals["image_tokens"] += sum(int((tokens[a:b] == tokens[a]).sum()) for a, b in spans)


def _targets_per_head(columns: dict, manifest: Manifest) -> np.ndarray:
    """Multi-token prediction: targets of head k (1..K) in one shard, where heads_with_target >= k."""
    depth = manifest.columns_with_role("target_depth")
    if not depth or depth[0].name not in columns:
        return np.zeros(0, dtype=np.int64)
    values = columns[depth[0].name]
    values = values[0] if isinstance(values, tuple) else np.asarray(values).reshape(-1)
    counts = np.bincount(values, minlength=depth[0].max_value + 1)
    return np.cumsum(counts[::-1])[::-1][1:]  # head k: positions with a value >= k


def compute_stats(folder: str | Path) -> dict:
    folder = Path(folder)
    manifest = read_manifest(folder)
    supervision = manifest.supervision or ("labels" if manifest.columns_with_role("labels") else "next-token")
    token_columns = manifest.columns_with_role("tokens")
    tokens_name = token_columns[0].name if token_columns else None  # None: rows of values (RL prompts)
    categories = [c for c in manifest.columns_with_role("category") if c.kind == "scalar"]
    sources, categories = [c for c in categories if c.name == "source"], [c for c in categories if c.name != "source"]
    per_source: dict[str, Counter] = {}
    totals = Counter()
    seq_len = manifest.config["seq_len"]
    edges = np.linspace(0, max(seq_len, 1), HISTOGRAM_BINS + 1)
    histogram = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    per_category: dict[str, Counter] = {}
    known = True
    per_head: Counter = Counter()
    supervised_rows = []  # supervised tokens of every row (8 bytes a row)
    shown = phase("stats", len(manifest.shards), "shards")
    for shard in manifest.shards:
        shown.update(1)
        columns = read_shard_columns(folder, manifest, shard)
        per_head.update(dict(enumerate(_targets_per_head(columns, manifest), start=1)))
        row_tokens, example_lengths, next_token, segments_known = _row_figures(columns, manifest, tokens_name)
        known &= segments_known
        per_row = _supervised(columns, manifest, supervision, row_tokens, next_token)
        totals["rows"] += len(row_tokens)
        totals["supervised_tokens"] += int(per_row.sum())
        supervised_rows.append(np.asarray(per_row, dtype=np.int64))
        totals["examples"] += len(example_lengths)
        histogram += np.histogram(np.minimum(example_lengths, seq_len), bins=edges)[0]
        totals["tokens"] += shard.tokens
        totals["padding_tokens"] += shard.padding_tokens
        _count_images(totals, columns, manifest)
        _count_categories(per_category, categories[:1], columns, per_row, row_tokens)
        _count_categories(per_source, sources, columns, per_row, row_tokens)
    if not sources_column(manifest) and manifest.config.get("source"):  # Megatron's: each source's own shards
        per_source = _sources_by_shard(manifest)
    stats = _figures(manifest, supervision, totals, known, edges, histogram)
    if manifest.columns_with_role("image_spans"):
        stats["images"], stats["image_tokens"] = totals["images"], totals["image_tokens"]
    if known and supervision == "labels" and supervised_rows:  # a mask gone wrong shows as rows with none
        stats["supervised_per_row"] = _distribution(np.concatenate(supervised_rows))
    return _with_breakdowns(stats, per_head, per_source, per_category, categories, manifest)


def _figures(manifest, supervision: str, totals: Counter, known: bool, edges, histogram) -> dict:
    """The output's figures; those that need every row's segments are None where a format did not
    keep them (``known`` False)."""
    tokens, padding, rows = totals["tokens"], totals["padding_tokens"], totals["rows"]
    positions = tokens + padding
    return {
        "objective": manifest.objective,
        "format": manifest.format,
        "supervision": supervision,
        "rows": rows,
        "tokens": tokens,
        "padding_tokens": padding,
        "padding_fraction": padding / positions if positions else 0.0,
        "supervised_tokens": totals["supervised_tokens"] if known else None,
        "supervised_fraction": (totals["supervised_tokens"] / positions if positions else 0.0) if known else None,
        "examples": totals["examples"] if known else None,
        "examples_per_row": (totals["examples"] / rows if rows else 0.0) if known else None,
        "documents_split": manifest.totals["documents_split"],
        "split_fraction": manifest.totals["split_fraction"],
        "example_length_histogram": {"edges": edges.tolist(), "counts": histogram.tolist()},
    }


def _with_breakdowns(stats: dict, per_head, per_source, per_category, categories, manifest) -> dict:
    if per_head:
        stats["targets_per_head"] = [int(per_head[k]) for k in sorted(per_head)]
    if per_source:
        stats["mixture"] = _realised_mixture(per_source, manifest.mixture)
        blend = {} if sources_column(manifest) else manifest_blend(manifest) or {}
        for name, share in blend.values():
            stats["mixture"][name]["blend_share"] = share  # what Megatron samples, whatever the files hold
    if per_category:
        stats["category_column"] = categories[0].name
        stats["categories"] = {
            name: {**c, "supervised_fraction": c["supervised_tokens"] / c["tokens"] if c["tokens"] else 0.0}
            for name, c in per_category.items()
        }
    return stats


def _distribution(values: np.ndarray) -> dict:
    """Supervised tokens per row: quantiles, and the rows with none (a mask gone wrong shows here)."""
    if not len(values):
        return {"min": 0, "p10": 0, "median": 0, "p90": 0, "max": 0, "rows_without": 0}
    p10, median, p90 = (int(v) for v in np.percentile(values, [10, 50, 90], method="lower"))
    return {
        "min": int(values.min()),
        "p10": p10,
        "median": median,
        "p90": p90,
        "max": int(values.max()),
        "rows_without": int(np.sum(values == 0)),
    }


def render_text(stats: dict) -> list[str]:
    lines = [
        f"objective            {stats['objective']} ({stats['format']})",
        f"rows                 {stats['rows']:,}",
        f"tokens               {stats['tokens']:,} (+ {stats['padding_tokens']:,} padding, "
        f"{100 * stats['padding_fraction']:.1f}%)",
        _supervised_line(stats),
        *_images_line(stats),
        "examples per row     "
        + (
            "not known (this format stores no segment ids)"
            if stats["examples_per_row"] is None
            else f"{stats['examples_per_row']:.2f}"
        ),
        f"documents split      {stats['documents_split']:,} ({100 * stats['split_fraction']:.1f}%)",
    ]
    if "supervised_per_row" in stats:
        d = stats["supervised_per_row"]
        lines.append(
            f"supervised per row   min {d['min']:,} · p10 {d['p10']:,} · median {d['median']:,} · "
            f"p90 {d['p90']:,} · max {d['max']:,}; {d['rows_without']:,} rows with none"
        )
    if "targets_per_head" in stats:
        lines.append(
            "targets per head     " + " · ".join(f"{k}: {n:,}" for k, n in enumerate(stats["targets_per_head"], 1))
        )
    for name, d in stats.get("categories", {}).items():
        lines.append(
            f"  {stats['category_column']} {name:12} {d['rows']:>8,} rows, "
            f"supervised {100 * d['supervised_fraction']:.1f}%"
        )
    for name, d in stats.get("mixture", {}).items():
        if "blend_share" in d:  # Megatron's: each source's shards whole, the blend file weighs them
            lines.append(
                f"  source {name:12} {d['rows']:>8,} rows, {d['tokens']:,} tokens in its shards "
                f"({100 * d['share']:.1f}% of them); the blend file gives it {100 * d['blend_share']:.1f}% of "
                "training's samples "
                f"(asked {100 * d['asked_share']:.1f}%)"
            )
            continue
        lines.append(
            f"  source {name:12} {d['rows']:>8,} rows, {d['tokens']:,} tokens: {100 * d['share']:.1f}% "
            f"of the tokens (asked {100 * d['asked_share']:.1f}%)"
        )
    return lines


def _images_line(stats: dict) -> list[str]:
    if "images" not in stats:
        return []
    images, tokens = stats["images"], stats["image_tokens"]
    return [f"images               {images:,} ({tokens:,} image tokens, {100 * tokens / max(stats['tokens'], 1):.1f}%)"]


def _supervised_line(stats: dict) -> str:
    if stats["supervision"] == "example-labels":
        return "supervised tokens    none (one class label per row, no token labels)"
    if stats["supervision"] == "pairs":
        return "supervised tokens    none (the loss compares pairs: contrastive views, or preferred completions)"
    if stats["supervised_tokens"] is None:
        return "supervised tokens    not known (this format stores no segment ids)"
    return (
        f"supervised tokens    {stats['supervised_tokens']:,} "
        f"({100 * stats['supervised_fraction']:.1f}% of all positions)"
    )
