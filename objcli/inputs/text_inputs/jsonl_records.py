"""``jsonl``: a record a line (``.jsonl``, ``.ndjson``, and ``.json`` whose first bytes show an object)."""

from __future__ import annotations

from collections.abc import Iterator

from ..json_lines import json_lines
from .base import TextInputFormat, first_byte, register


@register
class JsonLines(TextInputFormat):
    detection_rank = 30
    name, suffixes = "jsonl", (".jsonl", ".ndjson", ".json")

    def sniffs(self, head: bytes) -> bool:
        return first_byte(head) == b"{"

    def splits_by_lines(self, text_unit: str) -> bool:
        return True

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        yield from json_lines(stream, piece, options, log, locator)
