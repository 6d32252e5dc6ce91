"""What every text format shares: ``TextInputFormat`` (how a format is named, sniffed, cut and read) and the
registry its modules join with ``@register``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from ...options import Registry
from ..lines import Locator
from ..opening import binary_file, open_for_reading, skip_byte_order_mark
from ..pieces import Piece
from ..records import RecordLog

BOM = b"\xef\xbb\xbf"


class TextInputFormat:
    """One text format. ``read`` gives a piece's texts; stream formats implement ``texts``."""

    name: ClassVar[str]
    suffixes: ClassVar[tuple[str, ...]] = ()
    # Suffixes another format owns that this one takes when the first bytes show it (.json: an array).
    claims_by_content: ClassVar[tuple[str, ...]] = ()
    records: ClassVar[bool] = True  # a document a record (JSON, a row): --text-unit does not apply
    detection_rank: ClassVar[int] = 50  # a stream's first bytes are asked of formats in this order

    def check_compression(self, path: str, compression: str | None) -> None:
        """A compression the format cannot be read through is one line (none here)."""

    def sniffs(self, head: bytes) -> bool:
        raise NotImplementedError

    def splits_by_lines(self, text_unit: str) -> bool:
        """Whether a large uncompressed file is cut into byte ranges (a document never spans a line)."""
        return False

    def read(self, piece: Piece, options, log: RecordLog) -> Iterator[list[str]]:
        locator = Locator(piece)
        counted: list = []  # the reader that counts the input bytes read (none for a stream)
        with open_for_reading(piece, counted) as stream:
            binary = binary_file(stream) if options.text_unit == "file" and not self.records else None
            if binary:  # a file a document, whatever its name: a binary one is a counted skip
                log.read += 1
                log.skip("binary", locator.path, f"{binary}, not text")
                return
            if not piece.start:
                skip_byte_order_mark(stream, locator.path)
            for texts in self.texts(stream, piece, options, log, locator):
                if counted and piece.size:
                    log.piece_fraction = counted[0].count / piece.size
                yield texts

    def texts(self, stream, piece: Piece, options, log: RecordLog, locator: Locator) -> Iterator[list[str]]:
        raise NotImplementedError


# Text formats by name (--input-format's choices), asked of a stream's first bytes by ``detection_rank``:
# ``@register`` on a TextInputFormat (kept as an instance).
TEXT_INPUTS: Registry[TextInputFormat] = Registry("text input format", instances=True, order=lambda f: f.detection_rank)
register = TEXT_INPUTS.register


def first_byte(head: bytes) -> bytes:
    return head.removeprefix(BOM).lstrip()[:1]
