"""``objcli stats``: what the trainer will see in a finished output (REFERENCE §10).

Reads the manifest and the shards one at a time (never the whole output at once) and counts rows,
tokens, padding, supervised tokens (the tokens that carry loss) and examples per row, with the
length distribution of the examples and, for mixtures, counts per denoiser.

Supervised tokens: where a ``labels`` column exists, the labels that are not -100 (the ELECTRA
discriminator is the exception: it takes loss on every token); otherwise (causal LM, FIM) every
token whose successor is in the same segment, i.e. L - 1 per segment.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from .kernels import IGNORE
from .manifest import read_manifest
from .shards import read_shard_columns

HISTOGRAM_BINS = 32


def _lengths(column) -> np.ndarray:
    return np.diff(column[1]) if isinstance(column, tuple) else np.full(len(column), column.shape[1])


def _values(column) -> np.ndarray:
    return column[0] if isinstance(column, tuple) else np.asarray(column).ravel()


def compute_stats(folder: str | Path) -> dict:
    folder = Path(folder)
    manifest = read_manifest(folder)
    objective = manifest["objective"]
    denoisers = [d["name"] for d in manifest["config"]["objective_options"].get("denoisers", [])]
    totals = Counter()
    histogram = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    seq_len = manifest["config"]["seq_len"]
    edges = np.linspace(0, max(seq_len, 1), HISTOGRAM_BINS + 1)
    per_denoiser: dict[str, Counter] = {}
    for shard in manifest["shards"]:
        columns = read_shard_columns(folder, manifest, shard)
        ids = columns["input_ids"]
        rows = len(_lengths(ids))
        totals["rows"] += rows
        segment_ids = columns.get("segment_ids")
        if isinstance(segment_ids, np.ndarray) and segment_ids.ndim == 2:
            real = segment_ids > 0
            same_next = (segment_ids[:, 1:] == segment_ids[:, :-1]) & real[:, 1:]
            example_lengths = np.concatenate([np.bincount(r[r > 0])[1:] for r in segment_ids]) if rows else np.zeros(0)
            next_token_targets = same_next.sum(axis=1)
            row_tokens = real.sum(axis=1)
        elif "attention_mask" in columns:
            row_tokens = columns["attention_mask"].sum(axis=1)
            example_lengths = row_tokens
            next_token_targets = np.maximum(row_tokens - 1, 0)
        else:
            row_tokens = _lengths(ids) + (_lengths(columns["labels"]) if "labels" in columns and isinstance(columns["labels"], tuple) else 0)
            example_lengths = _lengths(ids)
            next_token_targets = np.maximum(_lengths(ids) - 1, 0)
        if "labels" in columns and objective != "electra":
            labels = columns["labels"]
            if isinstance(labels, tuple):
                values, offsets = labels
                per_row = np.add.reduceat((values != IGNORE).astype(np.int64), offsets[:-1]) if len(values) else np.zeros(rows, np.int64)
                per_row = np.where(np.diff(offsets) > 0, per_row, 0)
            else:
                per_row = (labels != IGNORE).sum(axis=1)
        else:
            per_row = row_tokens if objective == "electra" else next_token_targets
        totals["supervised_tokens"] += int(per_row.sum())
        totals["examples"] += len(example_lengths)
        histogram += np.histogram(np.minimum(example_lengths, seq_len), bins=edges)[0]
        totals["tokens"] += shard["tokens"]
        totals["padding_tokens"] += shard["padding_tokens"]
        if "denoiser" in columns and denoisers:
            for index, name in enumerate(denoisers):
                members = columns["denoiser"] == index
                counter = per_denoiser.setdefault(name, Counter())
                counter["rows"] += int(members.sum())
                counter["supervised_tokens"] += int(per_row[members].sum())
                counter["tokens"] += int(np.asarray(row_tokens)[members].sum()) if np.ndim(row_tokens) else 0
    tokens, padding = totals["tokens"], totals["padding_tokens"]
    stats = {
        "objective": objective,
        "format": manifest["format"],
        "rows": totals["rows"],
        "tokens": tokens,
        "padding_tokens": padding,
        "padding_fraction": padding / (tokens + padding) if tokens + padding else 0.0,
        "supervised_tokens": totals["supervised_tokens"],
        "supervised_fraction": totals["supervised_tokens"] / (tokens + padding) if tokens + padding else 0.0,
        "examples": totals["examples"],
        "examples_per_row": totals["examples"] / totals["rows"] if totals["rows"] else 0.0,
        "documents_split": manifest["totals"]["documents_split"],
        "split_fraction": manifest["totals"]["split_fraction"],
        "example_length_histogram": {"edges": edges.tolist(), "counts": histogram.tolist()},
    }
    if per_denoiser:
        stats["denoisers"] = {
            name: {**c, "supervised_fraction": c["supervised_tokens"] / c["tokens"] if c["tokens"] else 0.0}
            for name, c in per_denoiser.items()
        }
    return stats


def render_text(stats: dict) -> list[str]:
    lines = [
        f"objective            {stats['objective']} ({stats['format']})",
        f"rows                 {stats['rows']:,}",
        f"tokens               {stats['tokens']:,} (+ {stats['padding_tokens']:,} padding, {100 * stats['padding_fraction']:.1f}%)",
        f"supervised tokens    {stats['supervised_tokens']:,} ({100 * stats['supervised_fraction']:.1f}% of all positions)",
        f"examples per row     {stats['examples_per_row']:.2f}",
        f"documents split      {stats['documents_split']:,} ({100 * stats['split_fraction']:.1f}%)",
    ]
    for name, d in stats.get("denoisers", {}).items():
        lines.append(f"  denoiser {name:12} {d['rows']:>8,} rows, supervised {100 * d['supervised_fraction']:.1f}%")
    return lines


def plot(stats: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (lengths, fractions) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [2, 1]})
    histogram = stats["example_length_histogram"]
    edges = np.array(histogram["edges"])
    lengths.bar(edges[:-1], histogram["counts"], width=np.diff(edges), align="edge", color="#4878a8")
    lengths.set(title=f"Example lengths ({stats['objective']})", xlabel="tokens", ylabel="examples")
    names = ["supervised", "padding"]
    values = [stats["supervised_fraction"], stats["padding_fraction"]]
    for name, d in stats.get("denoisers", {}).items():
        names.append(f"sup. {name}")
        values.append(d["supervised_fraction"])
    fractions.barh(names, values, color=["#58a05a", "#c0504d"] + ["#8064a2"] * (len(names) - 2))
    fractions.set(xlim=(0, 1), title="Fraction of positions")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
