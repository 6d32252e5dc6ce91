"""Shard writers, one per output format."""

from .arrow import ArrowWriter, HfWriter
from .base import ShardInfo, ShardSink, arrow_schema
from .flat import FLAT_FORMATS, LlmcWriter, NanosetWriter, TokensWriter
from .megatron import MegatronWriter
from .npy import NpyWriter
from .parquet import ParquetWriter

WRITERS = {"arrow": ArrowWriter, "parquet": ParquetWriter, "hf": HfWriter, "npy": NpyWriter, "megatron": MegatronWriter,
           "tokens": TokensWriter, "llmc": LlmcWriter, "nanoset": NanosetWriter}

__all__ = ["FLAT_FORMATS", "WRITERS", "ShardInfo", "ShardSink", "arrow_schema"]
