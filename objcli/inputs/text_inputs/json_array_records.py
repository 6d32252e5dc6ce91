"""``json``: a ``.json`` file holding one array of records, each a document (scanned as bytes into JSON lines)."""

from __future__ import annotations

from collections.abc import Iterator

from ..json_lines import json_lines
from .base import TextInputFormat, first_byte, register


@register
class JsonArray(TextInputFormat):
    detection_rank = 20
    name = "json"
    claims_by_content = (".json",)  # .json files are told from JSON lines by their first bytes

    def sniffs(self, head: bytes) -> bool:
        return first_byte(head) == b"["

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        yield from json_lines(stream, piece, options, log, locator, array=True)
