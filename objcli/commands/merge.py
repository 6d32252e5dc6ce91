"""``objcli merge A B … -o OUT``: finished outputs of the same tokenizer, objective, columns and
format become one output, without reading a row.

- Shards are hard-linked where the filesystem allows (copied otherwise, in 8 MiB blocks) under one
  numbering: every source's shards in the order given, each source's in its manifest's order;
  ``train``/``validation`` splits keep their names and are numbered apart.
- Megatron outputs become one ``.bin``/``.idx`` pair per split, as Megatron-LM's
  ``merge_datasets.py`` lays it out: the ``.bin`` files back to back, the index's sizes,
  pointers (shifted by the bytes before) and document boundaries (shifted by the sequences before),
  streamed one source at a time, so memory does not grow with the number of sources.
- One manifest: totals summed, per-source provenance (folder, configuration hash, run key, recipe,
  shards and rows) under ``merged_from``; the format's own files (``megatron.txt``, HF's
  ``state.json``) rewritten. ``verify`` passes on the result.
- Everything is written in ``OUT/.objcli-tmp`` and renamed at the end, manifest last, under the
  output's lock: a merge killed at any moment leaves no manifest, and a rerun starts it again.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..errors import ObjcliError
from ..formats import format_of
from ..formats.megatron import read_index_header
from ..formats.megatron_join import Piece, join
from ..run.progress import phase
from ..storage.identity import side_digests
from ..storage.manifest import (
    MANIFEST_NAME,
    Manifest,
    ShardRecord,
    final_prefix,
    read_manifest,
    reshard_command,
    reshard_converts,
)
from ..storage.remote import is_url
from .rebuild import (
    building,
    check_source_files,
    link_or_copy,
    on_any_storage,
    publish,
    refuse_blended,
    refuse_plans,
    refuse_stores,
    split_totals_of,
)


def _signature(manifest: Manifest) -> list[tuple[str, object]]:
    """What two outputs must share to be one dataset, in the order a difference is reported."""
    fixed = any(c.kind == "fixed" for c in manifest.columns)
    return [
        ("format", manifest.format),
        ("objective", manifest.objective),
        ("tokenizer sha256", manifest.tokenizer.sha256),
        # The files read beside it (tokenizer config, chat template): one rendering, one set of specials.
        ("files read beside the tokenizer (sha256)", side_digests(manifest.identity)),
        ("special tokens", (manifest.special_tokens.ids, manifest.special_tokens.added)),
        # Before the columns, whose fixed-size lists' types name their rows' length.
        ("seq_len", manifest.config.get("seq_len") if fixed else None),
        # The Arrow type too: the same width as a list or a fixed-size list is another layout on disk.
        ("columns", [(c.name, c.kind, c.disk_dtype, c.arrow_type, c.role) for c in manifest.columns]),
        ("--provenance", bool(manifest.config.get("provenance"))),  # every shard has its spans, or none
    ]


def check_compatible(sources: list[str], manifests: list[Manifest]) -> None:
    first = _signature(manifests[0])
    for source, manifest in zip(sources[1:], manifests[1:]):
        for (name, expected), (_, got) in zip(first, _signature(manifest)):
            if expected != got:
                shown = lambda v: str(v) if len(str(v)) < 80 else str(v)[:77] + "..."  # noqa: E731
                raise ObjcliError(
                    f"merge: {source} differs from {sources[0]} in its {name} ({shown(got)} vs "
                    f"{shown(expected)}); merge outputs of one tokenizer, objective, format and row length"
                    + (
                        _older((sources[0], manifests[0]), (source, manifest), expected, got)
                        if name == "columns"
                        else ""
                    )
                )


def _older(first: tuple, other: tuple, expected, got) -> str:
    """Where one of two outputs was written before columns took their current layout: the reshard that
    converts it, as a command to run."""
    if not (reshard_converts(expected, got) or reshard_converts(got, expected)):
        return ""
    folder, manifest = other if reshard_converts(got, expected) else first
    return (
        f" ({folder} was written before columns took their values' width: '{reshard_command(folder, manifest)}' first)"
    )


def train_when_split(manifests: list[Manifest]) -> list[Manifest]:
    """Where some sources were split (``train``, ``validation``) and others not, an unsplit source's
    rows are training rows: its shards join ``train``, so that a loader reading ``train-*`` (or
    Megatron's ``megatron.txt``, one file for both) sees them; otherwise they stay as they are."""
    if not any(shard.split for manifest in manifests for shard in manifest.shards):
        return manifests
    return [
        msgspec.structs.replace(m, shards=[msgspec.structs.replace(s, split=s.split or "train") for s in m.shards])
        for m in manifests
    ]


@dataclass
class MergeSources:
    sources: list[str]
    manifests: list[Manifest]
    shards: list[ShardRecord] = field(default_factory=list)

    @property
    def first(self) -> Manifest:
        return self.manifests[0]


def _copy_shards(merged: MergeSources, work: Path) -> list[ShardRecord]:
    """Every source shard under its merged name, in one numbering per split."""
    entries = [(Path(src), shard) for src, m in zip(merged.sources, merged.manifests) for shard in m.shards]
    counts: dict[str, int] = {}
    for _, shard in entries:
        counts[shard.split] = counts.get(shard.split, 0) + 1
    numbers: dict[str, int] = {}
    merged = []
    for folder, shard in entries:
        check_source_files("merge", folder, shard)
    shown = phase("merge", len(entries), "shards")
    for index, (folder, shard) in enumerate(entries):
        shown.update(1)
        number = numbers.get(shard.split, 0)
        numbers[shard.split] = number + 1
        prefix = f"{shard.split or 'part'}-{number:05d}-of-{counts[shard.split]:05d}"
        old = final_prefix(shard.files[0])
        rename = {name: prefix + name[len(old) :] for name in shard.files}
        for name, new in rename.items():
            link_or_copy(folder / name, work / new)
        merged.append(shard.renamed(rename, partition=index, ordinal=0))
    return merged


def _read_index_header(path: Path) -> tuple[int, int, int]:
    try:
        return read_index_header(path)
    except ValueError:
        raise ObjcliError(f"merge: {path}: not a Megatron MMIDIDX index") from None


def _merge_megatron_split(shards: list[tuple[Path, ShardRecord]], work: Path, prefix: str) -> ShardRecord:
    """One ``.bin``/``.idx`` pair from many, in three streaming passes over the indexes."""
    for folder, shard in shards:
        check_source_files("merge", folder, shard)
    for folder, shard in shards:
        _read_index_header(folder / shard.files[1])
    try:
        return join([Piece(folder, shard) for folder, shard in shards], work, prefix, 0, 0)
    except ValueError:
        raise ObjcliError(
            "merge: the Megatron shards store tokens in different dtypes (uint16 and int32); "
            "rerun the smaller-vocabulary transforms with the same tokenizer"
        ) from None


def _merge_megatron(merged: MergeSources, work: Path) -> list[ShardRecord]:
    by_split: dict[str, list] = {}
    for src, manifest in zip(merged.sources, merged.manifests):
        for shard in manifest.shards:
            by_split.setdefault(shard.split, []).append((Path(src), shard))
    return [
        _merge_megatron_split(shards, work, f"{split or 'part'}-00000-of-00001") for split, shards in by_split.items()
    ]


def _raw(folder: str) -> dict:
    import json

    return json.loads((Path(folder) / MANIFEST_NAME).read_text(encoding="utf-8"))


def _totals(raws: list[dict], shards: list[ShardRecord]) -> dict:
    """Counts summed over the sources; what follows from the shards, from the merged shards."""
    totals: dict = {}
    for raw in raws:
        for key, value in raw["totals"].items():
            if key == "skipped_by_reason":
                merged = totals.setdefault(key, {})
                for reason, n in value.items():
                    merged[reason] = merged.get(reason, 0) + n
            elif isinstance(value, int) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    rows, tokens = sum(s.rows for s in shards), sum(s.tokens for s in shards)
    padding = sum(s.padding_tokens for s in shards)
    totals.update(
        rows=rows,
        shards=len(shards),
        tokens=tokens,
        padding_tokens=padding,
        padding_fraction=padding / (tokens + padding) if tokens + padding else 0.0,
        mean_segments_per_row=sum(s.segments for s in shards) / rows if rows else 0.0,
        split_fraction=totals.get("documents_split", 0) / totals["documents_written"]
        if totals.get("documents_written")
        else 0.0,
    )
    return dict(sorted(totals.items()))


def merged_manifest(
    merged: MergeSources, shards: list[ShardRecord], shuffle_seed: int | None = None, labels: list[str] | None = None
) -> dict:
    import msgspec

    raws = [_raw(src) for src in merged.sources]
    first = raws[0]
    digest = hashlib.sha256("".join(r["config_sha256"] for r in raws).encode()).hexdigest()
    labels = labels or [str(Path(src).resolve()) for src in merged.sources]
    provenance = [
        {
            "output": label,
            "config_sha256": r["config_sha256"],
            "run_key": r.get("run_key", ""),
            "recipe": r.get("recipe", {}),
            "shards": len(r["shards"]),
            "rows": r["totals"]["rows"],
        }
        for label, r in zip(labels, raws)
    ]
    return {
        **first,
        "config_sha256": digest,
        "run_key": "",
        "recipe": {},
        "config": {**first["config"], "inputs": [i for r in raws for i in r["config"].get("inputs", [])]},
        "inputs": [i for r in raws for i in r.get("inputs", [])],
        "partitions": [
            {**p, "merged_from": k, **({"shards": []} if shuffle_seed is not None else {})}
            for k, r in enumerate(raws)
            for p in r.get("partitions", [])
        ],
        **({"shuffled": {"seed": shuffle_seed}} if shuffle_seed is not None else {}),
        "shards": msgspec.to_builtins(shards),
        "totals": _totals(raws, shards),
        "merged_from": provenance,
        **split_totals_of(any("splits" in r for r in raws), shards),
    }


def repeated_shards(sources: list[str], manifests: list[Manifest]) -> list[str]:
    """What a merge would write twice: shard files of one source byte-identical (by the sha256 the
    manifests record) to files of an earlier one, as a copy of an output, or an output and the
    output it was appended to, would be."""
    first_holder: dict[str, str] = {}
    found = []
    for source, manifest in zip(sources, manifests):
        digests = [digest for shard in manifest.shards for digest in shard.sha256.values()]
        for other, count in Counter(first_holder[d] for d in digests if d in first_holder).items():
            found.append(
                f"{count:,} of the {len(digests):,} shard files of {source} are byte-identical to files of "
                f"{other}: their rows appear twice in the merged output"
            )
        for digest in digests:
            first_holder.setdefault(digest, source)
    return found


def merge(sources: list[str], output: str, overwrite: bool = False, shuffle_seed: int | None = None, warn=None) -> dict:
    """The merge (see the module), local or on object storage; ``shuffle_seed``: one permutation of
    all the merged rows, keyed to it; ``warn``: told of rows that the merge writes twice."""
    if not sources:
        raise ObjcliError("merge: name the outputs to merge, then -o OUT")
    labels = [source if is_url(source) else str(Path(source).resolve()) for source in sources]
    return on_any_storage(
        "merge",
        sources,
        output,
        overwrite,
        lambda local, out: _merge_local(local, out, overwrite, shuffle_seed, labels, warn),
    )


def _merge_local(
    sources: list[str], output: str, overwrite: bool, shuffle_seed: int | None, labels: list[str], warn=None
) -> dict:
    out = Path(output)
    manifests = train_when_split([read_manifest(source) for source in sources])
    for source, manifest in zip(sources, manifests):
        refuse_blended("merge", source, manifest)
        refuse_stores("merge", source, manifest)
        refuse_plans("merge", source, manifest)
    check_compatible(sources, manifests)
    for message in repeated_shards(labels, manifests) if warn else ():
        warn(message)
    merged = MergeSources(sources, manifests)
    with building("merge", out, overwrite) as work:
        if shuffle_seed is not None:
            from ..storage.output import final_names
            from .reshard_rows import shuffled_merge

            shuffled = shuffled_merge(sources, manifests, work, shuffle_seed)
            renames = final_names(shuffled)
            shards = [ShardRecord(**s.to_json()) for s in shuffled]
        elif format_of(merged.first.format).merge_joins_shards:
            shards = _merge_megatron(merged, work)
        else:
            shards = _copy_shards(merged, work)
        if shuffle_seed is None:
            renames = [(name, name) for shard in shards for name in shard.files]
        manifest = merged_manifest(merged, shards, shuffle_seed, labels)
        publish(out, work, renames, manifest)
    return manifest
