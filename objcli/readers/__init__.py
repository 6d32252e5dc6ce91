"""Readers: find inputs, split them into partitions, and yield batches of document texts."""

from ..options import TEXT_UNITS
from .documents import ReadOptions, read_documents
from .inputs import InputFile, Partition
from .planning import INPUT_FORMATS, plan_partitions, resolve_inputs
from .records import RecordLog

__all__ = [
    "INPUT_FORMATS",
    "TEXT_UNITS",
    "InputFile",
    "Partition",
    "ReadOptions",
    "RecordLog",
    "plan_partitions",
    "read_documents",
    "resolve_inputs",
]
