"""The inputs stage: find inputs, recognise each once, cut them into partitions, yield batches of texts."""

from ..options import TEXT_UNITS
from .members import group_members
from .partitioning import INPUT_FORMATS, cut_partitions, text_files
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
    "group_members",
    "read_documents",
    "text_files",
]
