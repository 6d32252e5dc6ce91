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
one's end (``p_ends`` int32, ``p_back`` int8: 5 bytes a token), what a derived ``--provenance`` run
needs to write the text run's provenance files.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.manifest import ColumnInfo, Manifest
from ..storage.shard_info import ShardRecord
from .base import Column, OutputFormat, commit, temp_file

STORE = "store"
SENTENCES = "sentences"  # a per-sentence store's column: each document's sentences' token counts
RECORD_BATCH_TOKENS = 1 << 22  # 8 MiB of uint16 ids a record batch (a shard's last may be shorter)
METADATA = {  # column -> (Arrow type name, NumPy dtype, description)
    "batch": ("int32", np.int32, "the batch the text run encoded the document in"),
    "chars": ("int64", np.int64, "characters of the document's text"),
    "utf8": ("int64", np.int64, "UTF-8 bytes of the document's text"),
    "crc": ("uint32", np.uint32, "CRC-32 of the document's UTF-8 bytes"),
    "bos_text": ("bool_", np.bool_, "the text begins with the BOS piece"),
}


# A store made with --provenance: where each document comes from, and for a store of whole documents
# where each token ends in characters of its text (run/provenance.py's ends and back): 5 bytes a token.
ORIGINS = {  # column -> (Arrow type name, NumPy dtype, description)
    "p_file": ("int32", np.int32, "the input file, an index into the store's manifest's inputs"),
    "p_record": ("int64", np.int64, "the record's index in the file"),
    "p_start": ("int64", np.int64, "the document's first character in the record's text"),
}
PLACES = {  # list columns, one entry per token
    "p_ends": ("int32", np.int32, "each token's end, in characters of the document's text"),
    "p_back": ("int8", np.int8, "how far each token starts before the previous one's end (up to 127)"),
}


# A chat store (objcli tokenize --chat): a row per record, its ids its rendered conversations' ids one
# after another, and what --objective chat would otherwise render and encode to find.
CONVERSATION_LISTS = {  # list columns, per record
    "c_examples": ("int32", np.int32, "tokens of each conversation the record gives (one each with --turns each)"),
    "c_first": ("int32", np.int32, "each supervised span's first token, in the record's ids"),
    "c_last": ("int32", np.int32, "each supervised span's last token (inclusive)"),
}
CONVERSATION_SCALARS = {
    "c_failed": ("int8", np.int8, "0, or why the record renders no conversation (1 + an index into the reasons)"),
}
# A pair store (objcli tokenize --preference): a row per record, its ids its three renderings' ids one
# after another (readers/stored_pairs.py), and what --objective preference and reward would otherwise find.
PAIR_LISTS = {"q_lengths": ("int32", np.int32, "tokens of the prompt, prompt + chosen and prompt + rejected")}
PAIR_SCALARS = {
    "q_prompt": ("int32", np.int32, "where both completions part from the prompt's ids"),
    "q_margin": ("float64", np.float64, "the record's margin, NaN for none"),
    "q_failed": ("int8", np.int8, "0, or why the record gives no pair (1 + an index into the reasons)"),
}
SCALARS = METADATA | ORIGINS | CONVERSATION_SCALARS | PAIR_SCALARS
LISTS = {SENTENCES: ("int32", np.int32, "")} | PLACES | CONVERSATION_LISTS | PAIR_LISTS


def ids_dtype(total_vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds every id."""
    return np.dtype(np.uint16) if total_vocab_size <= 1 << 16 else np.dtype(np.uint32)


def store_columns(total_vocab_size: int, kind: str = "documents", origins: bool = False) -> list[ColumnSpec]:
    """The store's columns (``kind``: what it holds, ``StoreKind.name``); a store tokenized per sentence also lists each
    document's sentences' token counts (its ids are its sentences' ids, one after another), a chat store
    each record's conversations and supervised spans; ``origins``: where each document comes from
    (``--provenance``; a store of whole documents also places its tokens)."""
    ids = ColumnSpec("ids", "ragged", 0, total_vocab_size - 1, "the document's token ids", "tokens", "ids")
    metadata = [
        ColumnSpec(name, "scalar", 0, 2**32 - 1, doc, "per_segment", "ids") for name, (_, _, doc) in METADATA.items()
    ]
    counts = ColumnSpec(
        SENTENCES, "ragged", 0, 2**31 - 1, "tokens of each of the document's sentences", "per_segment", SENTENCES
    )
    chat = [ColumnSpec(n, "ragged", 0, 2**31 - 1, d, "per_segment", n) for n, (*_, d) in CONVERSATION_LISTS.items()]
    chat += [ColumnSpec(n, "scalar", 0, 127, d, "per_segment", "ids") for n, (*_, d) in CONVERSATION_SCALARS.items()]
    where = [ColumnSpec(name, "scalar", 0, 2**62, doc, "per_segment", "ids") for name, (_, _, doc) in ORIGINS.items()]
    places = [
        ColumnSpec(name, "ragged", -128, 2**31 - 1, doc, "positions", "ids") for name, (*_, doc) in PLACES.items()
    ]
    pairs = [ColumnSpec(n, "ragged", 0, 2**31 - 1, d, "per_segment", n) for n, (*_, d) in PAIR_LISTS.items()]
    pairs += [
        ColumnSpec(n, "scalar", -(2**31), 2**31 - 1, d, "per_segment", "ids") for n, (*_, d) in PAIR_SCALARS.items()
    ]
    where += places if kind == "documents" else []
    own = {"documents": [], "sentences": [counts], "conversations": chat, "pairs": pairs}[kind]
    return [ids, *metadata, *own, *(where if origins else [])]


def document_rows(tokens: np.ndarray, offsets: np.ndarray, metadata: dict) -> RowBatch:
    """A batch of documents as store rows (one a row); ``metadata`` may hold the sentences' counts."""
    lengths = np.diff(offsets)
    columns = {"ids": Ragged(tokens, offsets), **metadata}
    return RowBatch(columns, tokens=lengths, padding=np.zeros(len(lengths), np.int64), documents=np.ones_like(lengths))


def crc32_from(crc: np.ndarray, lengths: np.ndarray, start: int) -> np.ndarray:
    """``zlib.crc32(text, start)`` of each text from ``zlib.crc32(text)`` and its length: CRC-32 is
    affine in its starting value, so crc(text, s) = crc(text, 0) ^ crc(zeros, s) ^ crc(zeros, 0)
    over as many zero bytes as the text has (one C call per document over a shared zero buffer)."""
    zeros = memoryview(bytes(int(lengths.max()) if len(lengths) else 0))
    shift = np.fromiter(
        (zlib.crc32(zeros[:n], start) ^ zlib.crc32(zeros[:n]) for n in lengths.tolist()), np.uint64, len(lengths)
    )
    return crc.astype(np.uint64) ^ shift


class StoreWriter:
    """One store shard: an Arrow IPC stream, a record batch per batch of documents."""

    suffix = ".store"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        import pyarrow as pa

        self.dtype = ids_dtype(columns[0].max_value + 1)
        self.names = [c.name for c in columns]
        self.schema = pa.schema(
            [pa.field("ids", pa.list_(pa.from_numpy_dtype(self.dtype)), nullable=False)]
            + [
                pa.field(name, getattr(pa, SCALARS[name][0])(), nullable=False)
                if name in SCALARS
                else pa.field(name, pa.list_(pa.from_numpy_dtype(LISTS[name][1])), nullable=False)
                for name in self.names[1:]
            ]
        )
        self.temp = temp_file(base, self.suffix)
        self.writer = pa.ipc.new_stream(pa.PythonFile(self.temp, mode="w"), self.schema)
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

        from .arrow_columns import int_array  # from the buffers: pa.array of NumPy imports pandas

        if not self.pending:
            return
        ids = Ragged.concat([rows.columns["ids"] for rows in self.pending])
        values = int_array(ids.values, self.dtype)
        arrays = [pa.ListArray.from_arrays(int_array(ids.offsets), values)]
        for name in self.names[1:]:
            if name in SCALARS:
                dtype = SCALARS[name][1]
                arrays.append(
                    int_array(np.concatenate([np.asarray(r.columns[name], dtype=dtype) for r in self.pending]), dtype)
                )
                continue
            listed = Ragged.concat([rows.columns[name] for rows in self.pending])
            values = int_array(listed.values, LISTS[name][1])
            arrays.append(pa.ListArray.from_arrays(int_array(listed.offsets), values))
        self.writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self.pending, self.pending_tokens = [], 0

    def close(self) -> list[tuple[Path, str]]:
        self._flush()
        self.writer.close()
        return [commit(self.temp)]


def read_store_table(path: Path):
    """A store shard, memory-mapped (the tokens are not copied until a batch asks for them)."""
    import pyarrow as pa

    return pa.ipc.open_stream(pa.memory_map(str(path))).read_all()


def table_documents(table) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(flat ids, int64 offsets, the metadata columns) of a store table's rows."""
    from .arrow_columns import column_numpy, list_ragged, single_array

    values, offsets = list_ragged(single_array(table.column("ids")))
    metadata = {name: column_numpy(table.column(name)) for name in SCALARS if name in table.schema.names}
    for name in LISTS:
        if name in table.schema.names:
            items, list_offsets = list_ragged(single_array(table.column(name)))
            metadata[name] = Ragged(items.astype(np.int64 if name == SENTENCES else items.dtype), list_offsets)
    return values, offsets, metadata


class StoreFormat(OutputFormat):
    name = STORE
    writer = StoreWriter
    help = "a token store (objcli tokenize): each document's ids once, for every derived transform"

    def stored_columns(self, columns: list[ColumnSpec]) -> list[ColumnInfo]:
        dtype = ids_dtype(columns[0].max_value + 1)
        infos = [ColumnInfo.of(columns[0], dtype, f"list<item: {dtype.name}>")]
        for c in columns[1:]:
            known = SCALARS.get(c.name)
            if known is None:  # a list column: the sentences' counts, the tokens' places, the conversations'
                item = LISTS[c.name]
                known = (f"list<item: {item[0]}>", item[1], "")
            infos.append(ColumnInfo.of(c, np.dtype(known[1]), known[0]))
        return infos

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
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
