"""``objcli reshard STORE``: a token store recut into shards of another size, partition by partition.

A derived run reads each partition's documents in the text run's batches whichever shards hold them
(each document's ``batch`` column says which batch it was encoded in, and a batch may run across two
shards), so a store recut within its partitions derives every output it derived before, byte for
byte. Rows are documents; ``--num-shards`` (shards per split, rows spread across partitions) cannot
keep partitions apart and is refused.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ObjcliError
from ..formats import ShardSink
from ..formats.base import column_specs
from ..formats.sizes import ShardSize
from ..formats.store import STORE_FORMAT, document_rows, read_store_table, table_documents
from ..run.progress import phase
from ..storage.manifest import Manifest


def rewrite_store(folder: Path, manifest: Manifest, partitions: list[dict], work: Path, limit: ShardSize) -> list:
    """Each partition's documents, in order, through the store's writer into shards of ``limit``."""
    if limit.count:
        raise ObjcliError(
            "reshard: --num-shards spreads rows over a split's shards, and a token store's shards are cut "
            "within its partitions; give --shard-size"
        )
    specs, records = column_specs(manifest), []
    shown = phase("reshard", len(manifest.shards), "shards")
    for entry in partitions:
        sink = ShardSink(work, entry["index"], STORE_FORMAT.writer, specs, limit.rows, limit.bytes)
        for name in entry["shards"]:
            shown.update(1)
            tokens, offsets, metadata = table_documents(read_store_table(folder / name))
            sink.write(document_rows(tokens, offsets, metadata))
        records += sink.close()
    return records


def partitions_of(partitions: list[dict], shards: list) -> list[dict]:
    """The store's partitions, each naming its new shards (given their final names, in order)."""
    named: dict[int, list[str]] = {}
    for shard in shards:
        named.setdefault(shard.partition, []).append(shard.files[0])
    return [{**entry, "shards": named.get(entry["index"], [])} for entry in partitions]
