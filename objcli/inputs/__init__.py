"""The inputs stage: find inputs, recognise each once, cut them into partitions, yield batches of texts."""

from ..options import TEXT_UNITS
from .partitioning import INPUT_FORMATS, cut_partitions, resolve_inputs
from .pieces import InputFile, Partition
from .records import RecordLog
from .text_batches import ReadOptions, read_documents

__all__ = [
    "INPUT_FORMATS",
    "TEXT_UNITS",
    "InputFile",
    "Partition",
    "ReadOptions",
    "RecordLog",
    "cut_partitions",
    "read_documents",
    "resolve_inputs",
]
