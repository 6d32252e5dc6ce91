"""``parquet``: a row's ``--text-key`` column (or the whole row), read in row groups (``inputs/parquet.py``)."""

from __future__ import annotations

from collections.abc import Iterator

from ...errors import ObjcliError
from ..parquet import parquet_texts
from ..pieces import Piece
from ..records import RecordLog
from .base import TextInputFormat, register


@register
class ParquetText(TextInputFormat):
    detection_rank = 10
    name, suffixes = "parquet", (".parquet",)

    def check_compression(self, path: str, compression: str | None) -> None:
        if compression is not None:
            raise ObjcliError(
                f"input {path}: Parquet inside {compression} compression cannot be read in place; "
                "decompress it first (Parquet compresses its own pages)"
            )

    def sniffs(self, head: bytes) -> bool:
        return head.startswith(b"PAR1")

    def read(self, piece: Piece, options, log: RecordLog) -> Iterator[list[str]]:
        yield from parquet_texts(piece, None if options.records else options.text_key, log)
