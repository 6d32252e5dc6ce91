"""Shard writers, one per output format."""

from .arrow import ArrowWriter
from .base import ShardInfo, ShardSink, arrow_schema
from .megatron import MegatronWriter
from .npy import NpyWriter
from .parquet import ParquetWriter

WRITERS = {"arrow": ArrowWriter, "parquet": ParquetWriter, "npy": NpyWriter, "megatron": MegatronWriter}

__all__ = ["WRITERS", "ShardInfo", "ShardSink", "arrow_schema"]
