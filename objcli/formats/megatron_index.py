"""Megatron-LM's ``MMIDIDX`` index (``.idx``), the layout ``megatron.py`` documents: its header and arrays
written and read, for the format, its joins (``megatron_join.py``) and Megatron-LM's files read as inputs."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
HEADER_BYTES = 34
DOCUMENT_SUFFIX = "_input_ids_document"  # Megatron's own naming: {prefix}_{key}_document.bin/.idx
# Chat rows: each token's loss mask (1: learned), a prefix of its own beside the tokens', as FlagScale's and
# Megatron forks' SFT datasets look for it ({prefix}_loss_mask_document beside {prefix}_text_document).
MASK_SUFFIX = "_loss_mask_document"
DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}
MASK_CODE = 1  # uint8
# Megatron-LM's DType codes (megatron/core/datasets/indexed_dataset.py) that hold token ids; floats do not.
READ_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}


def index_header(code: int, sequences: int, documents: int) -> bytes:
    return MAGIC + struct.pack("<QBQQ", 1, code, sequences, documents)


def read_index_header(path: Path) -> tuple[int, int, int]:
    """(dtype code, sequences, document-index length) from an ``.idx`` header; ``ValueError`` when
    the file does not start with one."""
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    if head[:9] != MAGIC:
        raise ValueError(f"{path.name} lacks the MMIDIDX header")
    code, count, documents = struct.unpack("<BQQ", head[17:HEADER_BYTES])
    return code, count, documents


def index_array(path: Path, count: int, documents: int, part: str) -> np.ndarray:
    """One of an index's arrays, read on its own (sizes, pointers or document boundaries)."""
    start, dtype, length = {
        "sizes": (HEADER_BYTES, "<i4", count),
        "pointers": (HEADER_BYTES + 4 * count, "<i8", count),
        "documents": (HEADER_BYTES + 12 * count, "<i8", documents),
    }[part]
    array = np.fromfile(path, dtype=dtype, count=length, offset=start)
    if len(array) != length:
        raise ValueError(f"{path.name} is cut short (its {part} end early)")
    return array


def read_megatron_index(path: Path) -> tuple[np.dtype, np.ndarray, np.ndarray, np.ndarray]:
    """(token dtype, sequence sizes, sequences' token offsets, document index) of a Megatron ``.idx``
    (``MMIDIDX`` version 1, any of Megatron-LM's integer dtypes), every part checked against the others
    before use: the file's size against its counts (read before any array is allocated), sizes that
    are not negative, pointers back to back, a document index from 0 to the sequences, never falling.
    ``ValueError`` naming the file otherwise. The one reader of the layout this module writes: objcli's
    own outputs and Megatron-LM's files read as inputs (``inputs/token_inputs/megatron.py``)."""
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    if len(head) < HEADER_BYTES or head[:9] != MAGIC:
        raise ValueError(f"{path} lacks the MMIDIDX header")
    version, code, count, entries = struct.unpack("<QBQQ", head[9:HEADER_BYTES])
    if version != 1:
        raise ValueError(f"{path} is MMIDIDX version {version}; objcli reads version 1")
    if code not in READ_DTYPES:
        raise ValueError(f"{path} has dtype code {code}, which holds no token ids (Megatron's floats)")
    dtype = np.dtype(READ_DTYPES[code]).newbyteorder("<")
    if path.stat().st_size != HEADER_BYTES + 12 * count + 8 * entries:  # a count is read as written
        raise ValueError(f"{path} holds {path.stat().st_size:,} bytes, not what its {count:,} sequences need")
    sizes = index_array(path, count, entries, "sizes").astype(np.int64)
    pointers, documents = index_array(path, count, entries, "pointers"), index_array(path, count, entries, "documents")
    if count and sizes.min() < 0:
        raise ValueError(f"{path}: sequence {int(np.argmin(sizes)):,} has a negative size ({int(sizes.min()):,})")
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    if not np.array_equal(pointers, offsets[:-1] * dtype.itemsize):
        raise ValueError(f"{path}: its sequences are not back to back in the .bin (pointers out of order)")
    if entries == 0 or documents[0] != 0 or documents[-1] != count or np.any(np.diff(documents) < 0):
        raise ValueError(f"{path}: its document index does not run from 0 to its {count:,} sequences")
    return dtype, sizes, offsets, documents
