"""datatrove's token files (``NAME.ds`` + ``NAME.ds.index``; ``NAME.ds.metadata`` says the token
size): a document is a run between two of the index's uint64 ends. The layout is read where it is
written (``formats/flat.py``)."""

from __future__ import annotations

from ...formats.flat import datatrove_tokens
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
        tokens, offsets = datatrove_tokens(path, memmap)
        return TokenFile(path, self.name, tokens, offsets)
