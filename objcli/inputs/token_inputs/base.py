"""What every tokenized input format is (``TokenInputFormat``), what it opens to (``TokenFile``), and
where detection looks (``InputSite``: a path on a filesystem, local or object storage, read the same way)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...options import Registry


@dataclass
class TokenFile:
    """One tokenized input: its ids (memory-mapped), where each document starts and ends in them,
    and for Megatron's split sentences where each sentence does."""

    path: str  # as the manifest and messages name it (a Megatron prefix, a .ds file, …)
    fmt: str
    tokens: np.ndarray  # memory-mapped, the file's own dtype
    offsets: np.ndarray  # int64, documents + 1, in tokens
    sentences: np.ndarray | None = None  # int64 token offsets of every sentence (Megatron), or None
    document_sentences: np.ndarray | None = None  # int64, documents + 1: each document's first sentence

    @property
    def documents(self) -> int:
        return len(self.offsets) - 1


@dataclass(frozen=True)
class InputSite:
    """An input as a format's detection sees it, a file or an object read through the same methods:
    a local path through the OS, an object through its fsspec filesystem (``fs``; None for a local
    path: detecting a local input never imports fsspec, 45 ms of every run's start-up)."""

    fs: object | None
    path: str  # as the filesystem names it
    name: str  # as messages name it (the user's path; a URL without credentials)
    remote: bool = False
    given: str = ""  # as the user gave it (a URL with its credentials or signed query): what opens it

    @classmethod
    def local(cls, path: str) -> InputSite:
        return cls(None, path, path)

    def isfile(self, path: str) -> bool:
        return self.fs.isfile(path) if self.remote else os.path.isfile(path)

    def size(self, path: str) -> int:
        return self.fs.size(path) if self.remote else os.path.getsize(path)

    def open(self, path: str):
        """The file's bytes as a binary stream (seekable, as Parquet's footer needs)."""
        return self.fs.open(path, "rb") if self.remote else open(path, "rb")  # noqa: SIM115 - the caller closes it

    def head(self, path: str, size: int) -> bytes:
        if self.remote:  # one ranged request, not a buffered read of a whole block
            return self.fs.cat_file(path, start=0, end=size)
        with open(path, "rb") as f:
            return f.read(size)

    def text(self, path: str) -> str:
        if self.remote:
            return self.fs.cat_file(path).decode("utf-8")
        with open(path, "rb") as f:
            return f.read().decode("utf-8")

    def named(self, path: str) -> str:
        """A sibling path as messages name it."""
        if not self.remote:
            return path
        from ...storage.remote import public_url

        return public_url(self.fs.unstrip_protocol(path))


class TokenInputFormat:
    """One tokenized input format: how it is recognised (``detect``, by names and content), which
    files it consists of (``files``: what is hashed, copied from object storage and checked by
    ``verify``) and how it opens (``open``: its ids and document boundaries, checked against the
    files' sizes). A module of this package that decorates its class with ``@register`` is all a new
    one needs: the package imports every module."""

    name: ClassVar[str]
    # Where detection asks it among the token formats (lowest first): layouts of several files (an index
    # beside the ids) before single files, a header before headerless ids; a new format 50, before
    # nanoGPT's catch-all .bin (90).
    detection_rank: ClassVar[int] = 50
    # No index: documents are the runs between EOS ids (the reader takes each run's EOS off).
    splits_at_eos: ClassVar[bool] = False

    def detect(self, site: InputSite, ids_key: str) -> bool:
        raise NotImplementedError

    def files(self, site: InputSite) -> list[str]:
        return [site.path]

    def copy_root(self, path: str) -> str:
        """The folder its files are named relative to in a local copy of an object-storage input."""
        return path.rsplit("/", 1)[0]

    def open(self, path: str, ids_key: str, eos: int | None) -> TokenFile:
        raise NotImplementedError


def memmap(path: str, dtype, offset: int = 0) -> np.ndarray:
    """A file's ids from ``offset`` on, memory-mapped; a size that is no whole number of ids is said."""
    size = os.path.getsize(path) - offset
    if size % np.dtype(dtype).itemsize:
        raise ValueError(f"its {size:,} bytes are no whole number of {np.dtype(dtype).itemsize}-byte tokens")
    if size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset)


def _rank(token_format: TokenInputFormat) -> int:
    return token_format.detection_rank


# The token formats in the order detection asks them, by name: a class registered (``@register``) is kept as
# an instance, an --input-format choice detected at its ``detection_rank`` (equal ranks in the order registered).
TOKEN_INPUTS: Registry[TokenInputFormat] = Registry("token input format", instances=True, order=_rank)
register = TOKEN_INPUTS.register
