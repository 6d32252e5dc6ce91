"""The row-by-row path of ``objcli reshard`` and ``merge --shuffle-rows``: rows read a source shard at
a time (memory is one shard's columns) and written by the format's own writer, so every row is
byte-identical to the source's. A shard's bookkeeping is rebuilt from its rows: rows, and tokens and
padding from the columns' roles where they add up to what the source shard recorded; what cannot be
told apart row by row (the documents that start in a row, or an objective's own token count) is
counted at the first row of its source shard, so every total is exact and each shard's figure is
exact to within a source shard."""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np

from ..formats import ShardSink, format_of
from ..formats.base import column_specs
from ..formats.provenance import provenance_file, read_provenance
from ..formats.sizes import ShardSize
from ..reading.shards import read_shard_columns, shard_columns
from ..rows import Ragged, RowBatch
from ..run.progress import phase
from ..storage.manifest import Manifest


def rewrite_rows(folder: Path, manifest: Manifest, work: Path, limit: ShardSize, target: str | None = None) -> list:
    """Every source shard's rows through the ``target`` format's writer (the source's by default), one
    split's shards at a time."""
    specs, sinks, names = column_specs(manifest), {}, _provenance_names(manifest)
    split_rows: dict[str, int] = {}
    for shard in manifest.shards:
        split_rows[shard.split] = split_rows.get(shard.split, 0) + shard.rows
    shown = phase("reshard", len(manifest.shards), "shards")
    for shard in manifest.shards:
        shown.update(1)
        sink = sinks.get(shard.split)
        if sink is None:
            counts = limit.row_counts(split_rows[shard.split]) if limit.count else ()
            sink = sinks[shard.split] = ShardSink(
                work,
                0,
                format_of(target or manifest.format).writer,
                specs,
                limit.rows,
                limit.bytes,
                split=shard.split,
                row_counts=counts,
                provenance=names,
            )
        sink.write(_row_batch(folder, manifest, shard, names))
    return [s for sink in sinks.values() for s in sink.close()]


def with_row_lengths(folder: Path, manifest: Manifest) -> Manifest:
    """The manifest with the one length of each fixed column's rows where it records none (written
    before fixed-size lists: Arrow lists with offsets), read from the shards, so the rewrite holds them
    as fixed-size lists; a column whose rows are not all one length (no run makes one) keeps none."""
    unknown = {c.name for c in manifest.columns if c.kind == "fixed" and not c.length}
    if not unknown:
        return manifest
    seen: dict[str, set[int]] = {name: set() for name in unknown}
    for shard in manifest.shards:
        for name, column in shard_columns(folder, manifest, shard).items():
            if name in unknown and len(column.offsets) > 1:
                seen[name].update(np.unique(np.diff(column.offsets)).tolist())
    lengths = {name: found.pop() for name, found in seen.items() if len(found) == 1 and min(found) > 0}
    columns = [msgspec.structs.replace(c, length=lengths.get(c.name, c.length)) for c in manifest.columns]
    return msgspec.structs.replace(manifest, columns=columns)


def _bookkeeping(columns: dict, manifest: Manifest, shard, rows: int) -> tuple[np.ndarray, ...]:
    """(tokens, padding, documents) per row; see the module's docstring."""
    tokens, padding = np.zeros(rows, np.int64), np.zeros(rows, np.int64)
    documents = np.zeros(rows, np.int64)
    if rows:
        documents[0] = shard.documents
    token_columns = manifest.columns_with_role("tokens")
    if not token_columns:  # rows of values (RL prompts): the shard's counts go with its first row
        tokens[:1], padding[:1] = shard.tokens, shard.padding_tokens
        return tokens, padding, documents
    name = token_columns[0].name
    segments = next((c.name for c in manifest.columns_with_role("segment_ids", name)), None)
    ids = columns[name]
    if isinstance(ids, tuple):
        counted, pad = np.diff(ids[1]), np.zeros(rows, np.int64)
    elif segments is not None and not isinstance(columns[segments], tuple):
        counted = (np.asarray(columns[segments]) > 0).sum(axis=1)
        pad = ids.shape[1] - counted
    else:
        counted, pad = np.full(rows, ids.shape[1] if ids.ndim == 2 else 1), np.zeros(rows, np.int64)
    if counted.sum() == shard.tokens and pad.sum() == shard.padding_tokens:
        return counted.astype(np.int64), pad.astype(np.int64), documents
    if rows:
        tokens[0], padding[0] = shard.tokens, shard.padding_tokens
    return tokens, padding, documents


def _provenance_names(manifest: Manifest) -> list[str] | None:
    """With --provenance: the input names the rows' spans index (the manifest's inputs, then any other
    a provenance file names, as a merged output's may)."""
    return [i["path"] for i in manifest.inputs] if manifest.config.get("provenance") else None


def _row_batch(folder: Path, manifest: Manifest, shard, names: list[str] | None = None) -> RowBatch:
    columns = read_shard_columns(folder, manifest, shard)
    data = {
        name: Ragged(np.asarray(v[0]), np.asarray(v[1], np.int64)) if isinstance(v, tuple) else np.asarray(v)
        for name, v in columns.items()
    }
    spans = provenance_file(shard) if names is not None else None
    if spans is not None:
        data.update(read_provenance(folder / spans, shard.rows, names))
    return RowBatch(data, *_bookkeeping(columns, manifest, shard, shard.rows))


def shuffled_merge(sources: list[str], manifests: list[Manifest], work: Path, seed: int) -> list:
    """``merge --shuffle-rows``: every source shard's rows, with their bookkeeping, to a work file
    (source shard k is "partition" k: the keyed draws follow the merged order), then the run's own
    external shuffle (``order/shuffle.py``) into shards of the first source's ``--shard-size``."""
    from ..formats.arrow import RowsToShuffle
    from ..order.shuffle import shuffle_rows

    first = manifests[0]
    specs, spread = column_specs(first), []
    names = [i["path"] for m in manifests for i in m.inputs] if first.config.get("provenance") else None
    index = 0
    for source, manifest in zip(sources, manifests):
        for shard in manifest.shards:
            sink = ShardSink(
                work, index, RowsToShuffle, specs, max(shard.rows, 1), None, split=shard.split, provenance=names
            )
            sink.write(_row_batch(Path(source), manifest, shard, names))
            spread += sink.close()
            index += 1
    limit = ShardSize.parse(first.config.get("shard_size", "256MB"))
    shuffled = shuffle_rows(spread, work, specs, first.format, limit, seed, provenance=names)
    for shard in spread:
        for name in shard.files:
            (work / name).unlink(missing_ok=True)
    return shuffled
