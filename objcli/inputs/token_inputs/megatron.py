"""Megatron-LM's indexed datasets (``PREFIX.bin`` + ``PREFIX.idx``, given as the prefix or either
file): a document is a document-index entry, its sequences its sentences (``--split-sentences``). The
index layout itself has one home, ``formats/megatron.py``, which writes it and reads it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ...errors import ObjcliError
from .base import InputSite, TokenFile, TokenInputFormat, memmap, register


@register
class MegatronInput(TokenInputFormat):
    detection_rank = 10
    name = "megatron"

    def detect(self, site: InputSite, ids_key: str) -> bool:
        return self.prefix(site) is not None

    @staticmethod
    def prefix(site: InputSite) -> str | None:
        """The prefix of a pair named by its prefix or either file; a pair missing one file is one line
        naming it (Megatron names its pairs PREFIX_text_document)."""
        path = site.path
        for base in dict.fromkeys((path.removesuffix(".bin").removesuffix(".idx"), path)):
            idx, bin_ = site.isfile(base + ".idx"), site.isfile(base + ".bin")
            if idx and bin_:
                return base
            if idx or (bin_ and base.endswith("_document")):
                missing = site.named(base + (".bin" if idx else ".idx"))
                raise ObjcliError(
                    f"input {site.name}: a Megatron indexed dataset without {missing}; put it beside the other"
                )
        return None

    def files(self, site: InputSite) -> list[str]:
        base = self.prefix(site) or site.path
        return [base + ".idx", base + ".bin"]

    def open(self, path: str, ids_key: str, eos: int | None) -> TokenFile:
        from ...formats.megatron import read_megatron_index

        base = self.prefix(InputSite.local(path))
        if base is None:
            raise ValueError("no PREFIX.idx beside it")
        dtype, _, sentence_offsets, document_index = read_megatron_index(Path(base + ".idx"))
        tokens = memmap(base + ".bin", dtype)
        listed = int(sentence_offsets[-1])
        if len(tokens) < listed:
            raise ValueError(f"{base}.bin is cut short: {len(tokens):,} tokens, its index needs {listed:,}")
        if len(tokens) > listed:  # another run's .bin, or an index cut short: never silently cut
            raise ValueError(
                f"{base}.bin holds {len(tokens):,} tokens, {len(tokens) - listed:,} past the {listed:,} its index "
                "lists (the pair is not one run's)"
            )
        split = bool(np.any(np.diff(document_index) > 1))  # --split-sentences: documents of several sequences
        offsets = sentence_offsets[document_index]
        return TokenFile(base, self.name, tokens, offsets, *((sentence_offsets, document_index) if split else ()))


def megatron_list(path: str) -> list[str] | None:
    """The prefixes a ``megatron.txt``-style list names (``WEIGHT PREFIX`` a line, as Megatron's
    ``--data-path`` takes them and objcli's Megatron output writes them; a relative prefix is beside the
    list), or None when the file is not one."""
    if not path.endswith(".txt") or not os.path.isfile(path) or os.path.getsize(path) > 1 << 20:
        return None
    prefixes = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in filter(None, (raw.split() for raw in f)):
            if len(line) != 2:
                return None
            try:
                float(line[0])
            except ValueError:
                return None
            prefix = line[1] if os.path.isabs(line[1]) else os.path.join(os.path.dirname(path), line[1])
            if not os.path.isfile(prefix + ".idx"):
                return None
            prefixes.append(prefix)
    return prefixes or None
