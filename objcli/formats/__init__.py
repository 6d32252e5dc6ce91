"""Output formats, one module each: the writer, what it stores, how its shards are read back and
the files its loader opens besides them (``base.OutputFormat``). Everything else (the options'
choices, the run, verify, inspect, stats, merge, reshard) asks a format here, never by its name.

Importing this package costs NumPy only: a format imports pyarrow where it writes or reads Arrow."""

from __future__ import annotations

from ..options import LiveChoices
from .arrow import ARROW, HF
from .base import Column, OutputFormat, ShardWriter, SideFiles
from .flat import LLMC, NANOSET, TOKENS
from .megatron import MEGATRON
from .nemo_npy import NEMO_PACKED_NPY
from .nemo_packed import NEMO_PACKED
from .npy import NPY
from .parquet import PARQUET
from .row_plan import PLAN
from .sink import ShardSink
from .store import STORE, STORE_FORMAT

FORMATS: dict[str, OutputFormat] = {
    f.name: f for f in (ARROW, PARQUET, HF, NPY, MEGATRON, TOKENS, LLMC, NANOSET, NEMO_PACKED, NEMO_PACKED_NPY, PLAN)
}


FORMAT_NAMES = LiveChoices(lambda: list(FORMATS))  # the --format choices, a format registered later among them


def register(output_format: OutputFormat) -> OutputFormat:
    FORMATS[output_format.name] = output_format
    return output_format


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
