"""Flat token files: every document's tokens back to back, as the loaders of nanoGPT, llm.c, OLMo/
dolma and datatrove/nanotron read them, each shard with an index of where documents start.

============  ===========================================  ==========================================
``--format``  files per shard                              read by
============  ===========================================  ==========================================
``tokens``    ``.bin``: tokens, no header, little-endian   ``np.memmap(path, dtype)`` (nanoGPT's
              uint16 (every id < 65,536) else uint32;      ``get_batch``, OLMo/dolma-style loaders)
              ``.offsets.npy``: int64, documents + 1
``llmc``      ``.bin``: llm.c's 256 x int32 header (magic  llm.c's ``dataloader.h`` (``train_gpt2``,
              20240520 version 1 for uint16, 20240801      ``train_llama3``)
              version 7 for uint32; token count), then
              the tokens; ``.offsets.npy`` as above
``nanoset``   ``.ds`` tokens (2 or 4 bytes), ``.ds.index``  datatrove's ``DatatroveFolderDataset`` and
              uint64 document ends, ``.ds.metadata``       merger, nanotron's Nanoset
              (``tokenizer|token_size``, token count)
============  ===========================================  ==========================================

Rows are whole documents (these formats take ``--packing none``, never cut at ``--seq-len``: the
trainer cuts its own windows), so the index is exact.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.files import file_sha256
from ..storage.manifest import ColumnInfo, Manifest
from ..storage.shard_info import TEMP_SUFFIX, ShardRecord
from .base import Column, OutputFormat, commit, register, temp_file
from .megatron import input_ids_only, token_stream

LLMC_HEADER_INTS = 256
LLMC_MAGIC = {np.dtype(np.uint16): (20240520, 1), np.dtype(np.uint32): (20240801, 7)}  # llm.c's data_common.py


def llmc_tokens(path, read=np.fromfile) -> np.ndarray:
    """The tokens of an llm.c ``.bin``, its header checked: the magic (and so the token width) and the
    count it holds against the file; ``read(path, dtype, offset)`` reads them (a memory map for
    inputs). ``ValueError`` otherwise. The one reader of the header this module writes."""
    header = np.fromfile(path, "<i4", LLMC_HEADER_INTS)
    widths = {magic: dtype for dtype, (magic, _) in LLMC_MAGIC.items()}
    if len(header) < LLMC_HEADER_INTS or int(header[0]) not in widths:
        raise ValueError("no llm.c header (magic 20240520 or 20240801)")
    tokens = read(path, widths[int(header[0])].newbyteorder("<"), offset=LLMC_HEADER_INTS * 4)
    if len(tokens) != int(header[2]):
        raise ValueError(f"its header counts {int(header[2]):,} tokens and the file holds {len(tokens):,} (cut short?)")
    return tokens


def datatrove_tokens(path, read=np.fromfile) -> tuple[np.ndarray, np.ndarray]:
    """The tokens and document offsets of a datatrove ``.ds`` (``.ds.index``: uint64 document ends;
    ``.ds.metadata``: ``tokenizer|token_size`` on its first line, 2 bytes where there is none, datatrove's
    default), checked; ``read(path, dtype)`` reads the tokens (a memory map for inputs). ``ValueError``
    otherwise. The one reader of the layout ``NanosetWriter`` writes."""
    size = _datatrove_token_size(str(path))
    tokens = read(str(path), np.dtype(np.uint16 if size == 2 else np.uint32).newbyteorder("<"))
    index = f"{path}.index"
    ends = np.fromfile(index, "<u8").astype(np.int64)
    if os.path.getsize(index) % 8 or np.any(np.diff(ends) < 0) or (len(ends) and ends[0] < 0):
        raise ValueError(f"{index} is not uint64 document ends in order")
    if len(ends) and ends[-1] != len(tokens):
        raise ValueError(
            f"its index ends at token {int(ends[-1]):,} and the file holds {len(tokens):,} (token size {size}?)"
        )
    return tokens, np.concatenate([[0], ends])


def _datatrove_token_size(path: str) -> int:
    try:
        with open(path + ".metadata", encoding="utf-8") as f:
            size = int(f.readline().strip().rsplit("|", 1)[1])
    except FileNotFoundError:
        return 2  # datatrove's default token size
    except (ValueError, IndexError):
        raise ValueError(f"{path}.metadata does not say the token size (tokenizer|size on its first line)") from None
    if size not in (2, 4):
        raise ValueError(f"token size {size} in {path}.metadata; datatrove writes 2 or 4")
    return size


def flat_dtype(spec: ColumnSpec) -> np.dtype:
    return np.dtype(np.uint16) if spec.min_value >= 0 and spec.max_value < 65_536 else np.dtype(np.uint32)


class _FlatWriter:
    """Tokens of each row streamed to one file; the document index written at close."""

    token_suffix = ".bin"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        self.base = base
        self.dtype = flat_dtype(next(c for c in columns if c.name == "input_ids")).newbyteorder("<")
        self.tokens = temp_file(base, self.token_suffix)
        self.lengths: list[np.ndarray] = []
        self._start()

    def _start(self) -> None:
        return None

    def write(self, rows: RowBatch) -> None:
        column = rows.columns["input_ids"]
        values, offsets = (
            (column.values, column.offsets)
            if isinstance(column, Ragged)
            else (column.reshape(-1), np.arange(len(column) + 1, dtype=np.int64) * column.shape[1])
        )
        self.tokens.write(values.astype(self.dtype).tobytes())
        self.lengths.append(np.diff(offsets).astype(np.int64))

    def _offsets(self) -> np.ndarray:
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, dtype=np.int64)
        return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

    def _offsets_file(self) -> tuple[Path, str]:
        index = temp_file(self.base, ".offsets.npy")
        np.save(index, self._offsets(), allow_pickle=False)
        return commit(index)

    def close(self) -> list[tuple[Path, str]]:
        return [commit(self.tokens), self._offsets_file()]


class TokensWriter(_FlatWriter):
    suffix = ".bin"


class LlmcWriter(_FlatWriter):
    """llm.c's header holds the token count, known only at the end: a zero header reserves its bytes,
    is filled in at close, and the file is hashed once more (a header cannot be patched into sha256)."""

    suffix = ".bin"

    def _start(self) -> None:
        self.tokens.write(np.zeros(LLMC_HEADER_INTS, dtype="<i4").tobytes())

    def close(self) -> list[tuple[Path, str]]:
        count = int(self._offsets()[-1])
        if count >= 2**31:
            raise ValueError(f"llm.c holds fewer than 2**31 tokens per file ({count:,}); pass a smaller --shard-size")
        self.tokens.close()
        header = np.zeros(LLMC_HEADER_INTS, dtype="<i4")
        header[0], header[1] = LLMC_MAGIC[np.dtype(self.dtype.name)]
        header[2] = count
        with open(self.tokens.path, "r+b") as f:
            f.write(header.tobytes())
            f.flush()
            os.fsync(f.fileno())
        final = self.tokens.path.with_name(self.tokens.path.name.removesuffix(TEMP_SUFFIX))
        os.replace(self.tokens.path, final)
        return [(final, file_sha256(final)), self._offsets_file()]


class NanosetWriter(_FlatWriter):
    suffix = ".ds"
    token_suffix = ".ds"

    def close(self) -> list[tuple[Path, str]]:
        offsets = self._offsets()
        files = [commit(self.tokens)]
        index = temp_file(self.base, ".ds.index")
        index.write(offsets[1:].astype("<u8").tobytes())
        files.append(commit(index))
        metadata = temp_file(self.base, ".ds.metadata")
        metadata.write(f"objcli|{self.dtype.itemsize}\n{int(offsets[-1])}\n{int(offsets[-1]):,} tokens".encode())
        files.append(commit(metadata))
        return files


class FlatFormat(OutputFormat):
    """The three flat formats: whole documents' tokens back to back, and an index of where each starts."""

    whole_documents = True
    packers = ("none",)

    def __init__(self, name: str, writer: type):
        self.name, self.writer = name, writer

    def recorded_columns(self, columns: list[ColumnSpec]) -> list[ColumnInfo]:
        return input_ids_only(columns, flat_dtype)

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        """Tokens and document offsets of one shard, from its documented layout."""
        name, dtype = shard.files[0], np.dtype(manifest.columns[0].disk_dtype).newbyteorder("<")
        if self.name == "nanoset":
            values, offsets = datatrove_tokens(folder / name)
        else:
            offsets = np.load(folder / name.replace(".bin", ".offsets.npy"))
            values = llmc_tokens(folder / name) if self.name == "llmc" else np.fromfile(folder / name, dtype=dtype)
        if values.dtype.newbyteorder("<") != dtype:
            raise ValueError(f"{name}: its header holds {values.dtype.name} tokens, the manifest {dtype.name}")
        return {"input_ids": token_stream(values, offsets.astype(np.int64))}


TOKENS = register(FlatFormat("tokens", TokensWriter))
LLMC = register(FlatFormat("llmc", LlmcWriter))
NANOSET = register(FlatFormat("nanoset", NanosetWriter))
