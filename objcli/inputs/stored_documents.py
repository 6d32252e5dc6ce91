"""A token store's documents as a run reads them (``token_store.py`` finds and reads them).

``StoredDocuments`` stands where a batch of texts stands in the run: it knows how many documents it
has, their lengths in characters and UTF-8 bytes, their keyed hashes (``--split``, mixtures), which
begin with the BOS text, and their tokens. Every step that orders, splits, samples or measures
documents asks it the way it asks a list of texts, so a derived run makes the same choices."""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass

import numpy as np

from ..formats.store import crc32_from, is_stand_in, stand_in
from ..kernels.ragged import gather_ranges, lengths_to_offsets, range_indices
from ..rows import Ragged
from ..stores.base import KindRecords


@dataclass
class DocumentOrigins:
    """Where the documents of a tokenized input or of a store made with ``--provenance`` come from:
    each one's file (an index into ``names``, the files as the manifest names them), record, first
    character in the record's text and copy (a mixture's repetition). ``places``, a store's: each
    token's end in characters of its text and how far it starts before the previous one's end
    (``run/provenance.py``'s ``ends`` and ``back``); None for a tokenized input, whose spans count ids."""

    names: tuple[str, ...]
    file: np.ndarray  # int64 per document
    records: np.ndarray  # int64 per document
    starts: np.ndarray  # int64 per document
    places: tuple[Ragged, Ragged] | None = None
    copy: int = 0

    def take(self, indices) -> DocumentOrigins:
        places = None if self.places is None else tuple(p.take(indices) for p in self.places)
        columns = (self.file[indices], self.records[indices], self.starts[indices])
        return DocumentOrigins(self.names, *columns, places, self.copy)

    def slice(self, start: int, stop: int) -> DocumentOrigins:
        places = None if self.places is None else tuple(p.slice(start, stop) for p in self.places)
        columns = (self.file[start:stop], self.records[start:stop], self.starts[start:stop])
        return DocumentOrigins(self.names, *columns, places, self.copy)

    def copied(self, copy: int) -> DocumentOrigins:
        return dataclasses.replace(self, copy=copy)

    @staticmethod
    def concat(parts: list[DocumentOrigins]) -> DocumentOrigins:
        columns = (np.concatenate([getattr(p, name) for p in parts]) for name in ("file", "records", "starts"))
        places = None
        if parts[0].places is not None:
            places = tuple(Ragged.concat([p.places[k] for p in parts]) for k in (0, 1))
        return DocumentOrigins(parts[0].names, *columns, places, parts[0].copy)


@dataclass
class StoredDocuments:
    tokens: np.ndarray  # int32, flat
    offsets: np.ndarray  # int64, len + 1
    chars: np.ndarray  # int64 per document
    utf8: np.ndarray  # int64 per document
    # uint32 per document: CRC-32 of its UTF-8 bytes; None for a tokenized input (token_inputs/), whose
    # documents are keyed to their ids instead (CRC-32 of them as little-endian int32, when first asked).
    crc: np.ndarray | None
    bos_text: np.ndarray  # bool per document
    sentences: Ragged | None = None  # a per-sentence store: each document's sentences' token counts
    # --provenance: where each document comes from (a tokenized input's, or a store's made with it)
    origins: DocumentOrigins | None = None
    # what the store's kind keeps besides ids (its ``read``'s "records"): a chat store's conversations and
    # spans, a pair store's renderings, a kind of its own's data for the objective that reads it
    records: KindRecords | None = None
    # A plan run's documents (``tokens``: store positions) whose objective reads some values: the ids, aligned
    ids: np.ndarray | None = None
    # A plan run's documents: each one's first store position (past the vocabulary; a document's positions
    # count up from it), ``tokens`` then a stand-in never read (``placed`` makes the positions where needed)
    firsts: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.chars)

    def __getitem__(self, index: slice) -> StoredDocuments:
        """Documents ``start:stop``: views, nothing copied."""
        start, stop, _ = index.indices(len(self))
        stop = max(start, stop)
        lo, hi = self.offsets[start], self.offsets[stop]
        columns = (c[start:stop] for c in (self.chars, self.utf8, self.crcs(), self.bos_text))
        sentences = None if self.sentences is None else self.sentences.slice(start, stop)
        origins = None if self.origins is None else self.origins.slice(start, stop)
        chat = None if self.records is None else self.records.slice(start, stop)
        offsets = self.offsets[start : stop + 1] - lo
        ids = None if self.ids is None else self.ids[lo:hi]
        firsts = None if self.firsts is None else self.firsts[start:stop]
        return StoredDocuments(self.tokens[lo:hi], offsets, *columns, sentences, origins, chat, ids, firsts)

    def take(self, indices) -> StoredDocuments:
        indices = np.asarray(indices, dtype=np.int64)
        lengths = np.diff(self.offsets)[indices]
        if is_stand_in(self.tokens):
            tokens = stand_in(int(lengths.sum()))
        else:
            tokens = gather_ranges(self.tokens, self.offsets[:-1][indices], lengths)
        return StoredDocuments(
            tokens,
            lengths_to_offsets(lengths),
            *(column[indices] for column in (self.chars, self.utf8, self.crcs(), self.bos_text)),
            None if self.sentences is None else self.sentences.take(indices),
            None if self.origins is None else self.origins.take(indices),
            None if self.records is None else self.records.take(indices),
            None if self.ids is None else gather_ranges(self.ids, self.offsets[:-1][indices], lengths),
            None if self.firsts is None else self.firsts[indices],
        )

    @staticmethod
    def concat(parts: list[StoredDocuments]) -> StoredDocuments:
        if len(parts) == 1:  # a batch within one shard: its views, not a copy
            return parts[0]
        lengths = np.concatenate([np.diff(p.offsets) for p in parts])
        columns = [np.concatenate([p.chars for p in parts]), np.concatenate([p.utf8 for p in parts])]
        columns += [np.concatenate([p.crcs() for p in parts]), np.concatenate([p.bos_text for p in parts])]
        sentences = None if parts[0].sentences is None else Ragged.concat([p.sentences for p in parts])
        origins = None if parts[0].origins is None else DocumentOrigins.concat([p.origins for p in parts])
        chat = None if parts[0].records is None else type(parts[0].records).concat([p.records for p in parts])
        offsets = lengths_to_offsets(lengths)
        placed = all(is_stand_in(p.tokens) for p in parts)
        tokens = stand_in(int(offsets[-1])) if placed else np.concatenate([p.tokens for p in parts])
        ids = None if parts[0].ids is None else np.concatenate([p.ids for p in parts])
        firsts = None if parts[0].firsts is None else np.concatenate([p.firsts for p in parts])
        return StoredDocuments(tokens, offsets, *columns, sentences, origins, chat, ids, firsts)

    def placed(self) -> StoredDocuments:
        """A plan run's documents with each token's store position as its token (what the examples of an
        objective that packs positions see), where ``firsts`` stands for them."""
        if self.firsts is None:
            return self
        positions = range_indices(self.firsts, np.diff(self.offsets)).astype(np.int32)
        return dataclasses.replace(self, tokens=positions, firsts=None)

    def ids_of(self, values: np.ndarray) -> np.ndarray:
        """``values`` as ids: each store position among them (``tokens`` holding positions, ``ids`` their ids) its
        token's id, every other value (an id an objective put in, below the vocabulary) itself."""
        if self.ids is None or not len(self.tokens):
            return values
        order = np.argsort(self.tokens, kind="stable")
        positions = self.tokens[order]
        where = np.minimum(np.searchsorted(positions, values), len(positions) - 1)
        found = positions[where] == values
        return np.where(found, self.ids[order[where]], values).astype(values.dtype, copy=False)

    def sentence_tokens(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A per-sentence store's (tokens, each sentence's token offsets, sentences per document): what
        the sentence objectives get from splitting the texts and encoding the sentences."""
        return self.tokens, lengths_to_offsets(self.sentences.values), np.diff(self.sentences.offsets)

    def crcs(self) -> np.ndarray:
        if self.crc is None:
            ids = self.tokens.astype("<i4")
            views = (
                memoryview(ids[a:b]).cast("B") for a, b in zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist())
            )
            self.crc = np.fromiter(map(zlib.crc32, views), dtype=np.uint32, count=len(self))
        return self.crc

    def keyed_crc(self, start: int) -> np.ndarray:
        """``zlib.crc32(text, start)`` of each document, as the text run computes it."""
        return crc32_from(self.crcs(), self.utf8, start)

    def token_count(self) -> int:
        return int(self.offsets[-1])
