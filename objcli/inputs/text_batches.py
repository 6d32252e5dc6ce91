"""Reading a partition (its pieces, one after another) as batches of document texts.

Line-based inputs are read in blocks of about ``batch_bytes`` of complete lines, so memory is
bounded and JSON lines decode in one msgspec call per block; a block that fails to decode is
re-read line by line to skip (or, under ``--strict``, report) exactly the bad records.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..storage.remote import public_url
from .origins import sourced_batch
from .pieces import Partition, Piece
from .records import RecordLog
from .text_formats import text_format


@dataclass(frozen=True)
class ReadOptions:
    text_key: str = "text"
    text_unit: str = "line"  # text inputs: one document per line | paragraph | file
    strict: bool = False
    batch_bytes: int = 1 << 20
    records: bool = False  # each document is a whole JSON record (its JSON text), for conversations
    provenance: bool = False  # each text a SourcedText (origins.py): its file, record and offset


def read_documents(partition: Partition, options: ReadOptions, log: RecordLog) -> Iterator[list[str]]:
    """Batches of document texts from one partition, with bad records counted in ``log``. The small
    files of a partition are read one after another and their texts gathered into batches of about
    ``--batch-size``, so a thousand one-page files are not a thousand tokenizer calls."""
    carry: list[str] = []  # the short last batch of a piece, joined to what the next piece reads
    carried = 0  # its characters, kept as it grows (not summed again for every file)
    for piece in partition.pieces:
        previous = None
        log.piece_bytes, log.piece_fraction = piece.size, 0.0
        for texts in read_piece(piece, options, log):
            if previous is not None:  # a batch the reader cut at --batch-size: as it is
                yield carry + previous if carry else previous
                carry, carried = [], 0
            previous = texts
        log.pieces_done_bytes += piece.size
        log.piece_bytes, log.piece_fraction = 0, 0.0
        if previous is not None:
            carry += previous
            carried += sum(map(len, previous))
            if carried >= options.batch_bytes // 2:
                yield carry
                carry, carried = [], 0
    if carry:
        yield carry


def read_piece(piece: Piece, options: ReadOptions, log: RecordLog) -> Iterator[list[str]]:
    """Batches of document texts from one piece (a file, or a byte range of one); ``log`` learns
    how far into the piece they come from (progress). With ``options.provenance``, each text is a
    ``SourcedText`` naming its file and record."""
    if not options.provenance:
        yield from _read_piece(piece, options, log)
        return
    log.records = []
    name = public_url(piece.input.path)
    try:
        for texts in _read_piece(piece, options, log):
            yield sourced_batch(texts, name, piece.first_record, log.records)
    finally:
        log.records = None


def _read_piece(piece: Piece, options: ReadOptions, log: RecordLog) -> Iterator[list[str]]:
    """The piece's texts, as its format reads them (``text_formats.py``; a stream's, decided from its
    first bytes)."""
    yield from text_format(piece.input.format).read(piece, options, log)
