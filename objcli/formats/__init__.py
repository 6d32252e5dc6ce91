"""Output formats, one module each: the writer, what it stores, how its shards are read back and
the files its loader opens besides them (``base.OutputFormat``). Everything else (the options'
choices, the run, verify, inspect, stats, merge, reshard) asks a format here, never by its name.

Importing this package costs NumPy only: a format imports pyarrow where it writes or reads Arrow."""

from __future__ import annotations

from ..options import LiveChoices, discover
from .base import FORMATS, Column, OutputFormat, ShardWriter, SideFiles, register
from .sink import ShardSink
from .store import STORE, STORE_FORMAT

discover(__name__, __path__)  # each format's module registers it

FORMAT_NAMES = LiveChoices(FORMATS.names)  # the --format choices, a format registered later among them


def format_of(name: str) -> OutputFormat:
    """A registered format, or the token store (written by ``objcli tokenize``, never a --format choice)."""
    return STORE_FORMAT if name == STORE else FORMATS[name]


def whole_document_formats() -> tuple[str, ...]:
    """Formats that hold whole documents' tokens only (Megatron's, the flat token files)."""
    return tuple(name for name, output_format in FORMATS.items() if output_format.whole_documents)


SIDE_FILES = SideFiles(lambda: list(FORMATS.values()))

__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "SIDE_FILES",
    "Column",
    "OutputFormat",
    "ShardSink",
    "ShardWriter",
    "format_of",
    "register",
    "whole_document_formats",
]
