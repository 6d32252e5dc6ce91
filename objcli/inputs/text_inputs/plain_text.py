"""``text``: a line, a paragraph or the whole file a document (``--text-unit``); what no other format takes."""

from __future__ import annotations

from collections.abc import Iterator

from ...errors import ObjcliError
from ..lines import decode_text_block, line_blocks, paragraphs, whole_file
from .base import TextInputFormat, register


@register
class PlainText(TextInputFormat):
    """Anything else: detected last."""

    name, suffixes, records = "text", (".txt", ".text"), False
    detection_rank = 90  # whatever the others do not take

    def sniffs(self, head: bytes) -> bool:
        return True

    def splits_by_lines(self, text_unit: str) -> bool:
        return text_unit == "line"

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        if options.records:
            raise ObjcliError(
                f"input {locator.path}: conversations are JSON records; give JSON lines or Parquet "
                "(--input-format jsonl if the name does not say)"
            )
        if options.text_unit == "paragraph":
            yield from paragraphs(stream, piece, options, log, locator)
        elif options.text_unit != "line":
            yield from whole_file(stream, piece, options, log, locator)
        else:
            for first_line, block in line_blocks(stream, piece, options.batch_bytes, locator):
                texts = decode_text_block(block, first_line, log, locator)
                del block
                if texts:
                    yield texts
