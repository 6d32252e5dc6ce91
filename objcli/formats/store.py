"""The token store that ``objcli tokenize`` writes and every ``objcli transform STORE`` reads.

A store is an output folder like the others (manifest, partitions, atomic shards, resume): each shard
an Arrow IPC stream file (``part-00000-of-00004.store``), one row per document, in the order and the
batches the text run gives its objective:

==============  ==============================  ==============================================
column          type                            what a derived run needs it for
==============  ==============================  ==============================================
``ids``         list<uint16> (uint32 past       the document's tokens: no tokenizer runs again
                65,536 ids)
``batch``       int32                           the batch the text run encoded it in (objectives
                                                key their randomness to batches and documents)
``chars``       int64                           its length in characters (``--shuffle-documents``
                                                cuts windows and batches by it)
``utf8``        int64                           its UTF-8 bytes (MB/s, text bytes, mixture estimates)
``crc``         uint32                          CRC-32 of its UTF-8 bytes: the keyed hash that
                                                places it in a ``--split`` or a mixture's copies
                                                is CRC-32 from a seeded start, which follows from
                                                this and the length (``crc32_from``)
``bos_text``    bool                            whether the text begins with the BOS piece
==============  ==============================  ==============================================

The tokens take 2 bytes each under a 65,536-id vocabulary; the rest is 25 bytes a document, reported
apart in the manifest (``token_store.bytes``). A store made with ``--provenance`` also holds each
document's origin (``p_file``, an index into the store's manifest's inputs, ``p_record``, ``p_start``)
and, for whole documents, each token's end in characters and how far it starts before the previous
one's end, what a derived ``--provenance`` run needs to write the text run's provenance files: kept as
the tokens the tokenizer's piece table does not predict (``p_fix_at``, ``p_fix_len``, ``p_fix_back``,
lists a document; the table in the manifest's ``token_store.piece_chars``: ``kernels/places.py``), a few
bytes a document. Stores made before keep ``p_ends`` int32 and ``p_back`` int8 (5 bytes a token), still read.
"""

from __future__ import annotations

import io
import zlib
from pathlib import Path

import numpy as np

from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.blocks import SUFFIX as BLOCKS_SUFFIX
from ..storage.blocks import BlockDigester
from ..storage.manifest import ColumnInfo, Manifest
from ..storage.shard_info import ShardRecord
from ..stores.base import ORIGINS, PLACES, PLACES_BEFORE, STORE_COLUMNS, StoredColumn, StoreKind
from .base import Column, OutputFormat, commit, temp_file

STORE = "store"
RECORD_BATCH_TOKENS = 1 << 22  # 8 MiB of uint16 ids a record batch (a shard's last may be shorter)


def known_columns() -> dict[str, StoredColumn]:
    """Every column a store shard may hold besides ``ids``: every store's, then each registered kind's."""
    from ..stores import STORE_KINDS

    own = [c for kind in STORE_KINDS.values() for c in kind.columns]
    return {c.name: c for c in (*STORE_COLUMNS, *ORIGINS, *PLACES, *PLACES_BEFORE, *own)}


def ids_dtype(total_vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds every id."""
    return np.dtype(np.uint16) if total_vocab_size <= 1 << 16 else np.dtype(np.uint32)


def store_columns(
    total_vocab_size: int, kind: StoreKind, origins: bool = False, places=PLACES, own=None
) -> list[ColumnSpec]:
    """The store's columns: the ids, every store's per-document columns, then what ``kind`` holds of
    its own (``own``: as stores made before held it) and, with ``origins`` (``--provenance``), where each
    document comes from (``places``: its tokens' places as stores keep them now, or ``PLACES_BEFORE`` as
    stores made before did)."""
    ids = ColumnSpec("ids", "ragged", 0, total_vocab_size - 1, "the document's token ids", "tokens", "ids")
    return [ids, *(c.spec() for c in STORE_COLUMNS), *kind.column_specs(origins, places, own)]


def document_rows(tokens: np.ndarray, offsets: np.ndarray, metadata: dict) -> RowBatch:
    """A batch of documents as store rows (one a row); ``metadata`` may hold the sentences' counts."""
    lengths = np.diff(offsets)
    columns = {"ids": Ragged(tokens, offsets), **metadata}
    return RowBatch(columns, tokens=lengths, padding=np.zeros(len(lengths), np.int64), documents=np.ones_like(lengths))


def crc32_from(crc: np.ndarray, lengths: np.ndarray, start: int) -> np.ndarray:
    """``zlib.crc32(text, start)`` of each text from ``zlib.crc32(text)`` and its length: CRC-32 is
    affine in its starting value, so crc(text, s) = crc(text, 0) ^ crc(zeros, s) ^ crc(zeros, 0) over as
    many zero bytes as the text has: a term that depends on the length alone, computed once a length, in
    increasing order, each CRC carried on from the shorter one's (the longest text's zeros read once)."""
    distinct, inverse = np.unique(lengths, return_inverse=True)
    zeros = memoryview(bytes(int(distinct[-1]) if len(distinct) else 0))
    keyed, plain, done, shifts = start, 0, 0, []
    for n in distinct.tolist():
        keyed, plain, done = zlib.crc32(zeros[: n - done], keyed), zlib.crc32(zeros[: n - done], plain), n
        shifts.append(keyed ^ plain)
    return crc.astype(np.uint64) ^ np.array(shifts, np.uint64)[inverse.reshape(-1)]


def _field(column: StoredColumn):
    import pyarrow as pa

    arrow = getattr(pa, column.arrow)()
    return pa.field(column.name, pa.list_(arrow) if column.listed else arrow, nullable=False)


class StoreWriter:
    """One store shard: an Arrow IPC stream, a record batch per batch of documents."""

    suffix = ".store"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        import pyarrow as pa

        self.dtype = ids_dtype(columns[0].max_value + 1)
        self.names = [c.name for c in columns]
        self.known = known_columns()
        self.schema = pa.schema(
            [pa.field("ids", pa.list_(pa.from_numpy_dtype(self.dtype)), nullable=False)]
            + [_field(self.known[name]) for name in self.names[1:]]
        )
        self.temp = temp_file(base, self.suffix)
        self.base = base
        self.blocks = BlockDigester()  # each block's digest, as the bytes go by (storage/blocks.py)
        self.writer = pa.ipc.new_stream(pa.PythonFile(_Digested(self.temp, self.blocks), mode="w"), self.schema)
        self.pending: list[RowBatch] = []
        self.pending_tokens = 0

    def write(self, rows: RowBatch) -> None:
        """Rows are gathered into record batches of about ``RECORD_BATCH_TOKENS`` tokens: an Arrow
        record batch costs a message and padded buffers, too much per batch of short documents."""
        self.pending.append(rows)
        self.pending_tokens += len(rows.columns["ids"].values)
        if self.pending_tokens >= RECORD_BATCH_TOKENS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        from ._arrow_columns import int_array  # from the buffers: pa.array of NumPy imports pandas

        if not self.pending:
            return
        ids = Ragged.concat([rows.columns["ids"] for rows in self.pending])
        values = int_array(ids.values, self.dtype)
        arrays = [pa.ListArray.from_arrays(int_array(ids.offsets), values)]
        for name in self.names[1:]:
            dtype = self.known[name].dtype
            if not self.known[name].listed:
                arrays.append(
                    int_array(np.concatenate([np.asarray(r.columns[name], dtype=dtype) for r in self.pending]), dtype)
                )
                continue
            listed = Ragged.concat([rows.columns[name] for rows in self.pending])
            values = int_array(listed.values, dtype)
            arrays.append(pa.ListArray.from_arrays(int_array(listed.offsets), values))
        self.writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self.pending, self.pending_tokens = [], 0

    def close(self) -> list[tuple[Path, str]]:
        self._flush()
        self.writer.close()
        shard = commit(self.temp)
        blocks = temp_file(self.base, self.suffix + BLOCKS_SUFFIX)
        blocks.write(self.blocks.finish(self.dtype.itemsize, ids_batches(shard[0])[1]))
        return [shard, commit(blocks)]


def block_file_of(path: Path) -> bytes:
    """The block file of a shard as it is now (what the writer makes as it writes; for a shard rewritten
    by hand, and its tests)."""
    digester = BlockDigester()
    digester.update(path.read_bytes())
    return digester.finish(*ids_batches(path))


def ids_batches(path: Path) -> tuple[int, list[tuple[int, int]]]:
    """(bytes an id, each record batch's ids in a shard: how many and the file offset of the first), read
    from the buffers' addresses in one memory mapping of the file (the ids themselves are not read)."""
    import pyarrow as pa

    mapped = pa.memory_map(str(path))
    whole = mapped.read_buffer(mapped.size())  # the mapping itself, zero-copy: its address is the file's start
    mapped.seek(0)
    places, itemsize = [], 2
    for batch in pa.ipc.open_stream(mapped):
        ids = batch.column(0)
        values = ids.values
        first = int(ids.offsets[0].as_py()) if len(ids) else 0
        count = (int(ids.offsets[-1].as_py()) if len(ids) else 0) - first
        itemsize = values.type.bit_width // 8
        buffer = values.buffers()[1]
        places.append((count, buffer.address - whole.address + (values.offset + first) * itemsize if count else 0))
    return itemsize, places


def _check_blocks(folder: Path, shard: ShardRecord) -> None:
    """Every block of the shard against its digest (``storage/blocks.py``), where the store keeps them."""
    from ..storage.blocks import ShardBlocks

    if len(shard.files) < 2 or not shard.files[1].endswith(BLOCKS_SUFFIX):
        return  # a store made before block digests
    path = folder / shard.files[0]
    data = np.memmap(path, np.uint8, "r") if path.stat().st_size else b""
    if not ShardBlocks(path, (folder / shard.files[1]).read_bytes()).check_all(data):
        raise ValueError(f"{shard.files[0]}: its blocks do not match the digests in {shard.files[1]}")


class _Digested(io.RawIOBase):
    """The shard's file, its bytes fed to the block digests on their way."""

    def __init__(self, file, blocks: BlockDigester):
        self.file, self.blocks = file, blocks

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.blocks.update(data)
        return self.file.write(data)


def read_store_table(path: Path):
    """A store shard, memory-mapped (the tokens are not copied until a batch asks for them)."""
    import pyarrow as pa

    return pa.ipc.open_stream(pa.memory_map(str(path))).read_all()


def table_documents(table, ids: bool = True) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(flat ids, int64 offsets, the metadata columns) of a store table's rows; without ``ids``, a stand-in
    of their length that reads none of them (a plan run places tokens by position: ``run/document_batches.py``)."""
    from ._arrow_columns import column_numpy, list_ragged, single_array

    if ids:
        values, offsets = list_ragged(single_array(table.column("ids")))
    else:
        offsets = _ids_offsets(table.column("ids"))
        values = stand_in(int(offsets[-1]))
    metadata = {}
    for name, column in known_columns().items():
        if name in table.schema.names and not column.listed:
            metadata[name] = column_numpy(table.column(name))
        elif name in table.schema.names:
            metadata[name] = Ragged(*list_ragged(single_array(table.column(name))))
    return values, offsets, metadata


def stand_in(count: int) -> np.ndarray:
    """``count`` ids that are never read (a plan run's): zeros that take no memory."""
    return np.broadcast_to(np.int32(0), (count,))


def is_stand_in(tokens: np.ndarray) -> bool:
    return tokens.ndim == 1 and tokens.strides == (0,)


def _ids_offsets(column) -> np.ndarray:
    """Each document's ids' offsets in the shard's flat ids (its record batches' lists one after another),
    from the lists' offsets alone."""
    parts, base = [np.zeros(1, np.int64)], 0
    for chunk in column.chunks:
        if not len(chunk):
            continue
        offsets = np.frombuffer(chunk.buffers()[1], np.int32, count=len(chunk) + 1 + chunk.offset)[chunk.offset :]
        offsets = offsets.astype(np.int64)
        parts.append(offsets[1:] - offsets[0] + base)
        base = int(parts[-1][-1])
    return np.concatenate(parts)


class StoreFormat(OutputFormat):
    name = STORE
    writer = StoreWriter
    help = "a token store (objcli tokenize): each document's ids once, for every derived transform"

    def recorded_columns(self, columns: list[ColumnSpec]) -> list[ColumnInfo]:
        dtype = ids_dtype(columns[0].max_value + 1)
        infos = [ColumnInfo.of(columns[0], dtype, f"list<item: {dtype.name}>")]
        known = known_columns()
        for c in columns[1:]:
            infos.append(ColumnInfo.of(c, np.dtype(known[c.name].dtype), known[c.name].arrow_type()))
        return infos

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        _check_blocks(folder, shard)
        table = read_store_table(folder / shard.files[0])
        names = [c.name for c in manifest.columns]
        if table.schema.names != names:
            raise ValueError(f"{shard.files[0]}: columns {table.schema.names}, the manifest lists {names}")
        values, offsets, metadata = table_documents(table)
        single = np.arange(table.num_rows + 1, dtype=np.int64)
        columns = {"ids": Column(values, offsets)}
        for name, value in metadata.items():
            columns[name] = Column(value.values, value.offsets) if isinstance(value, Ragged) else Column(value, single)
        return columns


STORE_FORMAT = StoreFormat()
