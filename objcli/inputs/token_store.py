"""A token store (``objcli tokenize``) as an input: its partitions, and their documents as the text
run's batches, tokens and all, with no text and no tokenizer (``formats/store.py`` says what a
store holds)."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..errors import BadRecord, ObjcliError
from ..formats.store import STORE, StoreWriter, read_store_table, table_documents
from ..kernels.places import places_of
from ..rows import Ragged
from ..storage.copies import local_file_copy
from ..storage.files import file_sha256
from ..storage.remote import filesystem, is_url, join, storage_error, storage_errors
from ..stores import manifest_kind
from .pieces import InputFile, Partition, Piece
from .store_checks import check_store_sections
from .store_shards import check_shard
from .stored_documents import DocumentOrigins, StoredDocuments

SHARD_SUFFIX = StoreWriter.suffix  # .store


def store_manifest(path: str | Path) -> dict | None:
    """The manifest of the token store at ``path`` (a folder, or a prefix in object storage), or None
    when it is not one; read once a process while it is unchanged (every partition asks for it)."""
    file = manifest_file(str(path))
    try:
        stamp = os.stat(file).st_mtime_ns if file else None
    except OSError:
        return None
    return None if stamp is None else _store_manifest(str(path), stamp, file)


def is_store(path: str | Path) -> bool:
    """Whether ``path`` is a finished token store (the one test: detection's, a glob's, the plan's)."""
    return store_manifest(path) is not None


def manifest_file(path: str) -> str | None:
    """Where the store's manifest can be read here (in object storage: a local copy, cached by the
    object's version)."""
    if not is_url(path):
        return os.path.join(path, "manifest.json")
    fs, inner = filesystem(path)
    try:
        fs.info(inner.rstrip("/") + "/manifest.json")
    except FileNotFoundError:  # no such object: not a store (a service that cannot be reached is one line)
        return None
    except storage_errors() as error:
        raise storage_error(error, path, "listing it") from None
    return str(local_file_copy(join(path, "manifest.json")))


def readable_shard(path: str) -> Path:
    """A store shard as a local file (one in object storage copied once, by its version)."""
    return local_file_copy(path) if is_url(path) else Path(path)


@lru_cache(maxsize=16)
def _store_manifest(path: str, stamp: int, file: str) -> dict | None:
    try:
        with open(file, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != STORE or "token_store" not in manifest:
        return None
    if not manifest.get("complete"):
        raise ObjcliError(f"input {path}: the token store is not finished; rerun its objcli tokenize to complete it")
    check_store_sections(manifest, f"input {path}/manifest.json")
    return manifest


def store_input(path: str) -> InputFile:
    """A store folder as one input: its size is its shards' bytes (what progress counts)."""
    manifest = store_manifest(path)
    size = sum(sum(shard["bytes"].values()) for shard in manifest["shards"])
    file = manifest_file(path)
    version = file_sha256(file) if is_url(path) else str(os.stat(file).st_mtime_ns)
    return InputFile(path, STORE, None, size, version=version)


def store_partitions(store: InputFile) -> list[Partition]:
    """The store's partitions, each its shards: the text run's partitions, document for document."""
    manifest = store_manifest(store.path)
    shards = {shard["files"][0]: shard for shard in manifest["shards"]}
    partitions = []
    for entry in manifest["partitions"]:
        pieces = []
        for name in entry["shards"]:
            size = sum(shards[name]["bytes"].values())
            pieces.append(Piece(InputFile(join(store.path, name), STORE, None, size)))
        if not pieces:  # a partition whose records were all skipped: its accounting still counts
            pieces.append(Piece(InputFile(store.path, STORE, None, 0)))
        partitions.append(Partition(entry["index"], tuple(pieces), store_partition=entry["index"], store=store.path))
    return partitions


def _store_of(partition: Partition) -> str:
    folder = partition.pieces[0].input.path  # a shard, or the store itself for a partition with none
    return folder.rsplit("/", 1)[0] if folder.endswith(SHARD_SUFFIX) else folder


def store_index(manifest: dict) -> tuple[dict[int, dict], dict[str, str]]:
    """A store manifest's partitions by index and its files' sha256 by name, made once a manifest: every
    partition of a run asks, so a store of many thousand partitions is not scanned once a partition."""
    key = id(manifest)
    kept = _INDEXES.get(key)
    if kept is None or kept[0] is not manifest:
        entries = {p["index"]: p for p in manifest["partitions"]}
        digests = {name: d for shard in manifest["shards"] for name, d in shard["sha256"].items()}
        kept = _INDEXES[key] = (manifest, entries, digests)
        while len(_INDEXES) > 16:  # as many as manifests are kept (_store_manifest)
            _INDEXES.pop(next(iter(_INDEXES)))
    return kept[1], kept[2]


_INDEXES: dict[int, tuple[dict, dict, dict]] = {}


def partition_accounting(partition: Partition) -> dict:
    """What the tokenize run counted for this partition (read, skipped by reason, long ones cut)."""
    manifest = store_manifest(_store_of(partition))
    entries, digests = store_index(manifest)
    entry = entries[partition.store_partition]
    reasons = tuple(manifest["token_store"].get("render_failures", ()))
    names = tuple(i["path"] for i in manifest["inputs"])
    columns = tuple(c["name"] for c in manifest["columns"])
    kind = manifest_kind(manifest)
    table = manifest["token_store"].get("piece_chars")  # decoded where a shard needs it (_places)
    return {
        **entry,
        "sha256": digests,
        "names": names,
        "reasons": reasons,
        "kind": kind,
        "columns": columns,
        "piece_chars": table,
    }


@lru_cache(maxsize=16)
def _piece_chars(encoded: str | None) -> np.ndarray | None:
    """The store's piece table (``run/stores.encode_table``), decoded once a process."""
    import base64

    if encoded is None:
        return None
    return np.frombuffer(zlib.decompress(base64.b64decode(encoded, validate=True)), np.uint8)


def stored_batches(partition: Partition, log, ids: bool = True) -> Iterator[StoredDocuments]:
    """The partition's documents in the text run's batches (a batch may run across two shards); a
    batch index the text run passed with no document is an empty batch here too. Without ``ids``, the
    documents' lengths and measures only: their ids are neither read nor checked (a plan run)."""
    accounting = partition_accounting(partition)
    log.read += accounting["documents_read"]
    for reason, count in accounting["skipped_by_reason"].items():
        if log.strict and count:  # the text run would have stopped at the first of them
            store = _store_of(partition)
            records = f"{count:,} record{'s' * (count != 1)}"
            detail = (
                f"{records} of partition {partition.store_partition} skipped ({reason}) when the text was tokenized"
            )
            fix = "fix the text and tokenize it again with --strict, or pass without --strict to skip them"
            raise BadRecord(reason, f"input {store}", detail, fix)
        log.skipped[reason] += count
    log.cut += accounting.get("counters", {}).get("long_documents_cut", 0)
    pending: list[StoredDocuments] = []
    batch = 0
    for piece in partition.pieces:
        if not piece.input.path.endswith(SHARD_SUFFIX):  # a partition whose records were all skipped
            continue
        shard = readable_shard(piece.input.path)
        check_shard(shard, accounting["sha256"], piece.input.path, ids)
        documents, batches = _read_shard(shard, accounting, ids)
        log.pieces_done_bytes += piece.size
        values, starts = np.unique(batches, return_index=True)  # batches run in order within a shard
        for value, start, end in zip(values.tolist(), starts.tolist(), [*starts[1:].tolist(), len(batches)]):
            while batch < value:  # the batch in hand is done (and any the text run gave no document)
                yield StoredDocuments.concat(pending) if pending else empty_like(documents)
                pending, batch = [], batch + 1
            pending.append(documents[start:end])
    if pending:
        yield StoredDocuments.concat(pending)


def _read_shard(path: Path, accounting: dict, ids: bool = True) -> tuple[StoredDocuments, np.ndarray]:
    """A shard's documents and the batch of each (``accounting``'s ``names``: the store's inputs, which
    its ``--provenance`` columns index; ``reasons``: what a record store's failure codes name; ``kind``:
    what the store holds, which reads its own columns back)."""
    table = read_store_table(path)
    if tuple(table.column_names) != accounting["columns"]:  # a shard of another kind of store than the manifest's
        raise ObjcliError(
            f"input {path}: holds the columns {', '.join(table.column_names)}, where the token store's manifest "
            f"names {', '.join(accounting['columns'])}; run 'objcli verify {path.parent}' and tokenize the text again"
        )
    tokens, offsets, metadata = table_documents(table, ids)
    origins = None
    if "p_file" in metadata:
        where = [metadata[name].astype(np.int64) for name in ("p_file", "p_record", "p_start")]
        places = _places(tokens, offsets, metadata, accounting, path)
        origins = DocumentOrigins(accounting["names"], *where, places)
    documents = StoredDocuments(
        tokens.astype(np.int32, copy=False),
        offsets,
        metadata["chars"].astype(np.int64),
        metadata["utf8"].astype(np.int64),
        metadata["crc"],
        metadata["bos_text"].astype(bool),
        origins=origins,
        **accounting["kind"].read(metadata, accounting["reasons"], path, np.diff(offsets)),
    )
    return documents, metadata["batch"]


def _places(tokens, offsets, metadata: dict, accounting: dict, path: Path):
    """Each token's end and back (Ragged, along the ids): kept as they are by stores made before, or made
    from the piece table and each document's fixes (``kernels/places.py``); None where a kind keeps none."""
    if "p_ends" in metadata:
        return metadata["p_ends"], metadata["p_back"]
    if "p_fix_at" not in metadata:
        return None
    try:
        table = _piece_chars(accounting["piece_chars"])
    except (ValueError, TypeError, zlib.error):  # binascii.Error is a ValueError
        table = None
    if table is None or (len(tokens) and len(table) <= int(np.max(tokens))):
        raise ObjcliError(
            f"input {path.parent}: its manifest's token_store.piece_chars is missing, damaged or too short for "
            "its ids (edited?); tokenize the text again with --provenance"
        )
    at, lengths, backs = (metadata[name] for name in ("p_fix_at", "p_fix_len", "p_fix_back"))
    ends, back = places_of(np.asarray(tokens), offsets, table, at.values, lengths.values, backs.values, at.offsets)
    return Ragged(ends, offsets), Ragged(back, offsets)


def _empty() -> StoredDocuments:
    none = np.zeros(0, dtype=np.int64)
    return StoredDocuments(np.zeros(0, np.int32), np.zeros(1, np.int64), none, none, none.astype(np.uint32), none > 0)


def empty_like(documents: StoredDocuments) -> StoredDocuments:
    """No documents, of the same kind (a per-sentence store's keep their sentence counts, a store's
    with --provenance its origins)."""
    return documents[0:0]
