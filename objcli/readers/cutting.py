"""What the reader hands on, measured and bounded: long records cut into documents where the
tokens do not change, and the UTF-8 size of a batch (what MB/s and ``text_bytes`` mean)."""

from __future__ import annotations

from itertools import compress, repeat
from operator import not_

from ..tokenizers import Tokenizer
from .origins import piece_of
from .records import RecordLog


def cut_long_documents(batches, limit: int, tokenizer: Tokenizer, log: RecordLog):
    """Batches of texts, where a text longer than ``limit`` characters becomes several documents of
    at most ``limit``, cut where the tokens do not change (``Tokenizer.cut_point``), each in a batch
    of its own: the memory a document needs downstream (tokens, the objective's arrays) stays
    bounded, whatever the size of one record. ``log.read`` counts the pieces as documents."""
    for texts in batches:
        if not limit or max(map(len, texts), default=0) <= limit:
            yield texts
            continue
        waiting = []
        for text in texts:
            if len(text) <= limit:
                waiting.append(text)
                continue
            if waiting:
                yield waiting
                waiting = []
            log.cut += 1
            log.read -= 1
            start = 0
            for piece in tokenizer.iter_pieces(text, limit):
                log.read += 1
                yield [piece_of(text, start, piece)]
                start += len(piece)
        if waiting:
            yield waiting


def utf8_bytes(texts: list[str]) -> int:
    """Bytes of the texts in UTF-8 (what MB/s and ``text_bytes`` mean). An ASCII text's length is
    its size (``isascii`` reads a flag), so an ASCII batch costs two C-level passes; only the
    texts that are not ASCII are encoded to count."""
    if not isinstance(texts, list):  # a token store's documents know their sizes
        return int(texts.utf8.sum())
    size = sum(map(len, texts))
    others = list(compress(texts, map(not_, map(str.isascii, texts))))  # no Python loop over the ASCII ones
    if others:
        size += sum(map(len, map(str.encode, others, repeat("utf-8"), repeat("surrogatepass")))) - sum(map(len, others))
    return size
