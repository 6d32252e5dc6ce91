"""Flat token files with no index, documents the runs between EOS ids: llm.c's (a 256-int header,
EOS before each document) and nanoGPT's (raw uint16, ``prepare.py`` appends an EOS after each). The
header's layout has one home, ``formats/flat.py``, which writes it."""

from __future__ import annotations

import struct

import numpy as np

from ...formats.flat import LLMC_MAGIC as LLMC_HEADERS
from ...formats.flat import llmc_tokens
from .base import InputSite, TokenFile, TokenInputFormat, memmap, register

LLMC_DTYPES = {magic: dtype for dtype, (magic, _) in LLMC_HEADERS.items()}  # llm.c's header: magic -> dtype


def _has_llmc_magic(site: InputSite) -> bool:
    head = site.head(site.path, 4)
    return len(head) == 4 and struct.unpack("<i", head)[0] in LLMC_DTYPES


def split_at(tokens: np.ndarray, eos: int | None) -> np.ndarray:
    """Document offsets of ids separated by EOS: each run up to and with an EOS (the reader takes the
    EOS off). nanoGPT ends each document with one, llm.c starts each with one: the same runs, llm.c's
    first one empty (framing, not a document)."""
    if eos is None:
        return np.array([0, len(tokens)], dtype=np.int64)
    cuts = np.flatnonzero(np.asarray(tokens) == eos).astype(np.int64) + 1
    return np.unique(np.concatenate([[0], cuts, [len(tokens)]]))


@register
class LlmcInput(TokenInputFormat):
    detection_rank = 40
    name = "llmc"
    splits_at_eos = True

    def detect(self, site: InputSite, ids_key: str) -> bool:
        return site.path.endswith(".bin") and site.isfile(site.path) and _has_llmc_magic(site)

    def open(self, path: str, ids_key: str, eos: int | None) -> TokenFile:
        tokens = llmc_tokens(path, memmap)  # the header's one reader, where the format writes it
        return TokenFile(path, self.name, tokens, split_at(tokens, eos))


def looks_like_text(head: bytes) -> bool:
    """Leading bytes that are UTF-8 text (no NUL, few control characters), which uint16 ids almost never
    are: ids below 256 hold a zero byte, and larger ones rarely pair into valid UTF-8 for long."""
    if not head or b"\0" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 3:  # only a character cut at the end of the sample is forgiven
            return False
        text = head[: error.start].decode("utf-8")
    controls = sum(1 for c in text if ord(c) < 32 and c not in "\t\n\r\f")
    return controls <= len(text) // 100


@register
class NanogptInput(TokenInputFormat):
    """Detected last: any other ``.bin`` file of whole uint16 ids that is not text."""

    detection_rank = 90
    name = "nanogpt"
    splits_at_eos = True
    SNIFF_BYTES = 1 << 16

    def detect(self, site: InputSite, ids_key: str) -> bool:
        if not (site.path.endswith(".bin") and site.isfile(site.path)) or _has_llmc_magic(site):
            return False
        return site.size(site.path) % 2 == 0 and not looks_like_text(site.head(site.path, self.SNIFF_BYTES))

    def open(self, path: str, ids_key: str, eos: int | None) -> TokenFile:
        tokens = memmap(path, np.dtype(np.uint16).newbyteorder("<"))
        return TokenFile(path, self.name, tokens, split_at(tokens, eos))
