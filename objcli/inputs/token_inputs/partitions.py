"""A tokenized input's documents as a run reads them: cut into partitions by document ranges
(``--partition-size`` of token bytes, so several workers and Dask share one large file), and read a
partition at a time in batches, memory-mapped. Ids are checked against the tokenizer's vocabulary
(the first bad one named by file and position), and documents that end with the tokenizer's EOS
(Megatron's ``--append-eod``) have it taken off, so the objective adds it as its EOS policy says:
never doubled, never lost. Everything a text run keys to a document's text is keyed to its ids here:
``--split`` and mixtures hash them, ``--shuffle-documents`` and batches count tokens (4 bytes each,
as a batch of text counts bytes)."""

from __future__ import annotations

import dataclasses
import os
from functools import lru_cache

import numpy as np

from ...errors import ObjcliError
from ...storage.remote import is_url, public_url
from ..pieces import InputFile, Partition, Piece
from . import TOKEN_INPUTS, TokenFile, open_token_file, readable_path


def token_input(path: str, fmt: str, ids_key: str) -> InputFile:
    opened = opened_once(path, fmt, ids_key)
    return InputFile(path, fmt, None, int(opened.tokens.nbytes))


def token_partitions(source: InputFile, partition_bytes: int, ids_key: str) -> list[Partition]:
    """The file's documents in partitions of about ``partition_bytes`` of tokens. A piece's start and
    end are byte offsets into the tokens, as a text file's are: its documents are those that start
    within them (``piece_documents``)."""
    opened = opened_once(source.path, source.format, ids_key)
    starts = opened.offsets * opened.tokens.dtype.itemsize
    total = int(starts[-1])
    cuts = [0, *range(partition_bytes, total, partition_bytes), total] if total else [0, 0]
    pieces = [Piece(InputFile(source.path, source.format, None, total), a, b) for a, b in zip(cuts[:-1], cuts[1:])]
    return [Partition(i, (piece,)) for i, piece in enumerate(pieces)]


def piece_documents(opened: TokenFile, piece: Piece) -> tuple[int, int]:
    """The documents of a piece: those whose first token lies in its byte range (the last piece's
    also those with no token at the very end)."""
    starts = opened.offsets[:-1] * opened.tokens.dtype.itemsize
    first = int(np.searchsorted(starts, piece.start, side="left"))
    last = int(np.searchsorted(starts, piece.end, side="left"))
    if piece.end >= int(opened.offsets[-1]) * opened.tokens.dtype.itemsize:
        last = opened.documents
    return first, last


@lru_cache(maxsize=8)
def _opened(path: str, fmt: str, ids_key: str, eos: int | None, stamp: tuple) -> tuple[TokenFile, str]:
    """An input opened once a process (``stamp``: where it is read and when it changed), and how its EOS comes off:
    "each" document's that ends with one (runs between EOS ids), or "end" of every document where
    every one ends with it (Megatron's --append-eod, datatrove's eos_token)."""
    opened = open_token_file(readable_path(path, fmt), fmt, ids_key, eos)
    if is_url(path):  # read from the local copy, named by its URL
        opened = dataclasses.replace(opened, path=public_url(path))
    if TOKEN_INPUTS[fmt].splits_at_eos:
        return opened, "each" if eos is not None else ""
    lengths = np.diff(opened.offsets)
    ends = opened.offsets[1:][lengths > 0] - 1
    every = eos is not None and len(ends) and np.all(opened.tokens[ends] == eos)
    return opened, "end" if every else ""


def opened_once(path: str, fmt: str, ids_key: str, eos: int | None = None) -> TokenFile:
    """An input opened once a process while unchanged (the plan asks for its size, partitions and
    dtype, each partition for its ids: a Parquet column is loaded once, not at each)."""
    return _opened(path, fmt, ids_key, eos, _stamp(path, fmt))[0]


def _stamp(path: str, fmt: str) -> tuple:
    """(where the input is read here, its modification time): an object replaced in the bucket has
    another local copy, so a process that read it before opens the new one."""
    path = readable_path(path, fmt)
    for name in (path, path + ".idx", path + ".bin"):
        if os.path.exists(name):
            return path, os.stat(name).st_mtime
    return path, 0.0


def token_batches(partition: Partition, ids_key: str, batch_bytes: int, log, eos: int | None, vocab: int):
    """A token input partition's documents, in batches of about ``batch_bytes`` / 4 tokens, as a token
    store's are (``StoredDocuments``): the EOS the input ends (or starts) every document with taken
    off, ids checked against the vocabulary, empty documents counted skips."""
    piece = partition.pieces[0]
    opened, strip = _opened(
        piece.input.path, piece.input.format, ids_key, eos, _stamp(piece.input.path, piece.input.format)
    )
    first, last = piece_documents(opened, piece)
    for a, b in _batches(opened.offsets, first, last, max(1, batch_bytes // 4)):
        yield _batch(opened, piece.input.path, (a, b), (strip, eos), vocab, log)
        log.pieces_done_bytes += int(opened.offsets[b] - opened.offsets[a]) * opened.tokens.dtype.itemsize


def _batches(offsets: np.ndarray, first: int, last: int, tokens: int) -> list[tuple[int, int]]:
    """Document ranges of about ``tokens`` tokens each (a batch closes after the document that takes
    it there, as a text batch does)."""
    reach = np.arange(int(offsets[first]) + tokens, int(offsets[last]) + tokens, tokens)
    ends = np.minimum(np.searchsorted(offsets, reach, side="left"), last)
    cuts = sorted({first, last, *(int(e) for e in ends if e > first)})
    return list(zip(cuts[:-1], cuts[1:]))


def _batch(opened: TokenFile, name: str, documents: tuple[int, int], stripping: tuple, vocab: int, log):
    """Documents ``a:b`` of the file (``name``: as the manifest names it)."""
    from ...kernels.ragged import gather_ranges, lengths_to_offsets
    from ..token_store import DocumentOrigins, StoredDocuments

    (a, b), (strip, eos) = documents, stripping
    starts, lengths = opened.offsets[a:b].copy(), np.diff(opened.offsets[a : b + 1])
    chunk = np.asarray(opened.tokens[opened.offsets[a] : opened.offsets[b]])  # the batch's ids, one read
    has = lengths > 0
    off = np.zeros(len(lengths), dtype=bool)  # documents whose last token (an EOS) comes off
    if strip == "end":
        off = has
    elif strip == "each":  # runs between EOS ids: the one a run ends with
        off[has] = chunk[(starts - starts[0] + lengths - 1)[has]] == eos
    if off.any():
        chunk = np.delete(chunk, (starts - starts[0] + lengths - 1)[off])
        lengths = lengths - off
    _check_ids(chunk, opened, starts, lengths, vocab)
    raw = chunk
    framing = np.zeros(b - a, dtype=bool)  # llm.c's leading EOS, a file's final one: no document
    if strip == "each":
        framing[0] |= a == 0 and lengths[0] == 0
        framing[-1] |= b == opened.documents and lengths[-1] == 0
    log.read += int((~framing).sum())
    lead = leading_framing(opened, strip, eos)
    for k in np.flatnonzero((lengths == 0) & ~framing):
        log.skip("empty_document", f"{name} document {a + int(k) - lead}", "no token left")
    keep = np.flatnonzero(lengths > 0)
    sentences = _sentences(opened, a, b, strip).take(keep) if opened.sentences is not None else None
    if len(keep) < b - a:
        raw = gather_ranges(raw, lengths_to_offsets(lengths)[:-1][keep], lengths[keep])
    lengths = lengths[keep].astype(np.int64)
    none = np.zeros(len(lengths), dtype=bool)
    zeros = np.zeros(len(keep), np.int64)
    origins = DocumentOrigins((name,), zeros, a + keep.astype(np.int64) - lead, zeros)
    return StoredDocuments(
        raw.astype(np.int32), lengths_to_offsets(lengths), lengths, 4 * lengths, None, none, sentences, origins
    )


def leading_framing(opened: TokenFile, strip: str, eos: int | None) -> int:
    """1 where a file split at EOS starts with one (llm.c's, before its first document): that empty
    run is no document, and the file's documents are numbered from the one after it."""
    return int(strip == "each" and opened.documents > 0 and opened.offsets[1] == 1 and int(opened.tokens[0]) == eos)


def _check_ids(tokens: np.ndarray, opened: TokenFile, starts: np.ndarray, lengths: np.ndarray, vocab: int) -> None:
    if not len(tokens) or (int(tokens.max()) < vocab and (tokens.dtype.kind == "u" or int(tokens.min()) >= 0)):
        return  # one pass (two for a signed dtype) over the ids, the common case
    bad = np.flatnonzero((tokens < 0) | (tokens >= vocab))
    if bad.size:
        k = int(bad[0])
        ends = np.cumsum(lengths)
        document = int(np.searchsorted(ends, k, side="right"))
        position = int(starts[document]) + k - int(ends[document] - lengths[document])
        raise ObjcliError(
            f"input {opened.path}: token {position:,} is id {int(tokens[k])}, outside the tokenizer's {vocab:,} ids; "
            "give the tokenizer the file was made with"
        )


def _sentences(opened: TokenFile, a: int, b: int, strip: str):
    """Each document's sentences' token counts (Megatron's split sentences), the EOS off its last."""
    from ...rows import Ragged

    first = opened.document_sentences[a : b + 1]
    lengths = np.diff(opened.sentences[first[0] : first[-1] + 1]).astype(np.int64)
    offsets = (first - first[0]).astype(np.int64)
    if strip == "end":
        last = offsets[1:][np.diff(offsets) > 0] - 1  # each document's last sentence
        lengths[last[lengths[last] > 0]] -= 1
    return Ragged(lengths, offsets)
