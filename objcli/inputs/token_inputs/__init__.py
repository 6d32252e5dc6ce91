"""Corpora other tools already tokenized, read as documents of token ids with no text and no
tokenizer run: one ``TokenInputFormat`` a module, registered here, each recognising itself by names
and content on any filesystem (a local path and an object in a bucket go through the same code).

==============  =====================================  ================================================
format          files                                  one document is
==============  =====================================  ================================================
``megatron``    ``PREFIX.bin`` + ``PREFIX.idx``        a document-index entry (``MMIDIDX`` version 1,
                (given as the prefix or either file)   every integer dtype code); its sequences are its
                                                       sentences (``--split-sentences``)
``datatrove``   ``NAME.ds`` + ``NAME.ds.index``        a run between two of the index's uint64 ends;
                (``NAME.ds.metadata``: token size)     tokens of the metadata's size (2 or 4 bytes)
``input-ids``   a ``save_to_disk`` folder, Arrow or    a row's list of integers (the column
                Parquet files with an ``input_ids``    ``--text-key`` names when it is not
                column (detected by their schema)      ``text``); other columns are not read
``llmc``        ``.bin`` with llm.c's 256-int header   a run between two EOS ids (llm.c writes an EOS
                                                       before each document)
``nanogpt``     ``.bin`` of raw uint16, no header      a run between two EOS ids (nanoGPT's
                                                       ``prepare.py`` appends one after each)
==============  =====================================  ================================================

How their documents are cut into partitions and read in batches is ``documents.py``'s; an input in
object storage is read from a local copy (``storage/copies.py``). Every module of this package is
imported here; a format's module registers it (``@register``), so a new format is one module."""

from __future__ import annotations

import struct

from ...errors import ObjcliError
from ...options import discover
from ...storage.remote import filesystem, is_url, public_url, storage_error, storage_errors
from .base import TOKEN_INPUTS, InputSite, TokenFile, TokenInputFormat, register


def is_token_input(fmt: str | None) -> bool:
    return fmt in TOKEN_INPUTS


def token_format(fmt: str) -> TokenInputFormat:
    return TOKEN_INPUTS[fmt]


def site_of(path: str) -> InputSite:
    """Where an input is, as detection reads it: a bucket's filesystem for a URL, the local one else."""
    if is_url(path):
        fs, inner = filesystem(path)
        return InputSite(fs, inner, public_url(path), remote=True, given=path)
    return InputSite.local(path)


def input_files(path: str, fmt: str) -> list[str]:
    """The files a tokenized input consists of (an object-storage input's, as its filesystem names them)."""
    site = site_of(path)
    try:
        return TOKEN_INPUTS[fmt].files(site)
    except storage_errors() as error:
        raise storage_error(error, path, "listing its objects") from None


def readable_path(path: str, fmt: str) -> str:
    """Where a token input's files can be read here: the path itself, or its local copy's."""
    if not is_url(path):
        return path
    from ...storage.copies import local_copy

    site = site_of(path)
    objects = input_files(path, fmt)
    if objects == [site.path] and not site.isfile(site.path):
        raise ObjcliError(f"input {public_url(path)}: no object {site.path}; check the URL")
    root = TOKEN_INPUTS[fmt].copy_root(site.path)
    return str(local_copy(path, objects, root) / site.path[len(root) :].lstrip("/")).rstrip("/")


def open_token_file(path: str, fmt: str, ids_key: str = "input_ids", eos: int | None = None) -> TokenFile:
    """A token input's ids and boundaries (``eos``: where nanoGPT's and llm.c's files end documents);
    one line naming the file for anything that does not hold."""
    try:
        return TOKEN_INPUTS[fmt].open(path, ids_key, eos)
    except (ValueError, TypeError, KeyError, struct.error, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise ObjcliError(f"input {path}: {error.strerror} ({error.filename}); check the path") from None
        detail = error if not isinstance(error, (TypeError, KeyError)) else f"{type(error).__name__}: {error}"
        raise ObjcliError(
            f"input {path}: not a readable {fmt} file ({detail}); check it, or name --input-format"
        ) from None


discover(__name__, __path__)  # each format's module registers it

from .megatron import megatron_list  # noqa: E402 - a Megatron data-path list, read by the run

__all__ = [
    "TOKEN_INPUTS",
    "InputSite",
    "TokenFile",
    "TokenInputFormat",
    "input_files",
    "is_token_input",
    "megatron_list",
    "open_token_file",
    "site_of",
    "readable_path",
    "register",
    "token_format",
]
