"""What the reader hands on, measured and bounded: long records cut into documents where the
tokens do not change, and the UTF-8 size of a batch (what MB/s and ``text_bytes`` mean)."""

from __future__ import annotations

from ..tokenizers import Tokenizer
from .origins import piece_of
from .records import RecordLog


class MeasuredTexts(list):
    """A batch of texts that knows its UTF-8 size (``utf8``), measured once where the reader hands it on;
    a later step that makes a new list of texts (a shuffle, a mixture's sample) has it measured again."""

    __slots__ = ("utf8",)


def _utf8_size(joined: str) -> int:
    """A string's size in UTF-8: its length where it is ASCII (a flag the string keeps: O(1)), else it
    encoded, in C."""
    return len(joined) if joined.isascii() else len(joined.encode("utf-8", "surrogatepass"))


def cut_long_documents(batches, limit: int, tokenizer: Tokenizer, log: RecordLog):
    """Batches of texts, where a text longer than ``limit`` characters becomes several documents of
    at most ``limit``, cut where the tokens do not change (``Tokenizer.cut_point``), each in a batch
    of its own: the memory a document needs downstream (tokens, the objective's arrays) stays
    bounded, whatever the size of one record. ``log.read`` counts the pieces as documents.

    Each batch is joined once (one pass over its texts' objects; a lone plain string is itself, no copy):
    its length bounds its longest text, so the longest is looked for only in a batch longer than
    ``limit``, and a batch handed on whole carries its UTF-8 size (``MeasuredTexts``), where three
    passes (lengths, ASCII flags, longest) measured it before."""
    for texts in batches:
        joined = "".join(texts)
        if not limit or len(joined) <= limit or max(map(len, texts), default=0) <= limit:
            measured = MeasuredTexts(texts)
            measured.utf8 = _utf8_size(joined)
            yield measured
            continue
        del joined
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
    """Bytes of the texts in UTF-8 (what MB/s and ``text_bytes`` mean): as measured when they were read
    (``MeasuredTexts``), or measured now."""
    if isinstance(texts, MeasuredTexts):
        return texts.utf8
    if not isinstance(texts, list):  # a token store's documents know their sizes
        return int(texts.utf8.sum())
    return _utf8_size("".join(texts))
