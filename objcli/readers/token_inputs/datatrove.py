"""datatrove's token files (``NAME.ds`` + ``NAME.ds.index``; ``NAME.ds.metadata`` says the token
size): a document is a run between two of the index's uint64 ends."""

from __future__ import annotations

import os

import numpy as np

from .base import InputSite, TokenFile, TokenInputFormat, memmap, register


@register
class DatatroveInput(TokenInputFormat):
    detection_rank = 20
    name = "datatrove"

    def detect(self, site: InputSite, ids_key: str) -> bool:
        return site.path.endswith(".ds") and site.isfile(site.path + ".index")

    def files(self, site: InputSite) -> list[str]:
        path = site.path
        return [path, path + ".index", *([path + ".metadata"] if site.isfile(path + ".metadata") else [])]

    def open(self, path: str, ids_key: str, eos: int | None) -> TokenFile:
        size = _token_size(path)
        tokens = memmap(path, np.dtype(np.uint16 if size == 2 else np.uint32).newbyteorder("<"))
        ends = np.fromfile(path + ".index", "<u8").astype(np.int64)
        if os.path.getsize(path + ".index") % 8 or np.any(np.diff(ends) < 0) or (len(ends) and ends[0] < 0):
            raise ValueError(f"{path}.index is not uint64 document ends in order")
        if len(ends) and ends[-1] != len(tokens):
            raise ValueError(
                f"its index ends at token {int(ends[-1]):,} and the file holds {len(tokens):,} (token size {size}?)"
            )
        return TokenFile(path, self.name, tokens, np.concatenate([[0], ends]))


def _token_size(path: str) -> int:
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
