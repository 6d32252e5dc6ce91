"""How each tokenized input format is opened (``token_files.py`` says what each holds): its ids,
memory-mapped where the format allows, and its documents' boundaries, checked against the files'
own sizes so a cut or mismatched file is one line, never wrong ids."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..formats.flat import LLMC_MAGIC as LLMC_HEADERS

TOKEN_FORMATS = ("megatron", "datatrove", "llmc", "nanogpt", "input-ids")
SPLIT_AT_EOS = ("llmc", "nanogpt")  # no index: documents are the runs between EOS ids
LLMC_MAGIC = {magic: dtype for dtype, (magic, _) in LLMC_HEADERS.items()}  # llm.c's header: magic -> dtype


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


def megatron_prefix(path: str) -> str | None:
    """The prefix of a Megatron pair named by its prefix or either file; a pair missing one file is
    one line naming it."""
    for base in dict.fromkeys((path.removesuffix(".bin").removesuffix(".idx"), path)):
        idx, bin_ = os.path.isfile(base + ".idx"), os.path.isfile(base + ".bin")
        if idx and bin_:
            return base
        if idx or (bin_ and base.endswith("_document")):  # Megatron names its files PREFIX_text_document
            missing = base + (".bin" if idx else ".idx")
            raise ObjcliError(f"input {path}: a Megatron indexed dataset without {missing}; copy it beside the other")
    return None


def input_files(path: str, fmt: str, isfile=os.path.isfile, read_text=None) -> list[str]:
    """The files a tokenized input consists of, as read (``isfile``/``read_text``: a bucket's, for one
    in object storage, ``token_objects.py``)."""
    read_text = read_text or (lambda name: open(name, encoding="utf-8").read())  # noqa: SIM115 - read whole
    if fmt == "megatron":
        stripped = path.removesuffix(".bin").removesuffix(".idx")
        base = stripped if isfile(stripped + ".idx") else path
        return [base + ".idx", base + ".bin"]
    if fmt == "datatrove":
        return [path, path + ".index", *([path + ".metadata"] if isfile(path + ".metadata") else [])]
    folder = path.rstrip("/")
    if fmt == "input-ids" and isfile(folder + "/state.json"):
        names = saved_data_files(read_text(folder + "/state.json"), folder)
        return [folder + "/state.json", *(f"{folder}/{name}" for name in names)]
    return [path]


def saved_data_files(state: str, folder: str) -> list[str]:
    """The data files a ``save_to_disk`` folder's ``state.json`` names: plain file names inside the
    folder (datasets writes ``data-00000-of-00001.arrow``); anything else is one line, never a file
    read outside the folder."""
    from ..storage.manifest import is_plain_name

    try:
        entries = json.loads(state)["_data_files"]
        names = [entry["filename"] for entry in entries]
    except (ValueError, KeyError, TypeError):
        raise ObjcliError(
            f"input {folder}: its state.json lists no _data_files with a filename each (not datasets' "
            "save_to_disk layout); save the dataset again with save_to_disk"
        ) from None
    for name in names:
        if not isinstance(name, str) or not is_plain_name(name):
            raise ObjcliError(
                f"input {folder}: its state.json names data file {name!r}, not a file inside the folder; "
                "name each data file by its plain name beside state.json (as save_to_disk writes it)"
            )
    return names


def _memmap(path: str, dtype, offset: int = 0) -> np.ndarray:
    size = os.path.getsize(path) - offset
    if size % np.dtype(dtype).itemsize:
        raise ValueError(f"its {size:,} bytes are no whole number of {np.dtype(dtype).itemsize}-byte tokens")
    if size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset)


def open_megatron(path: str, ids_key: str, eos: int | None = None) -> TokenFile:
    base = megatron_prefix(path)
    if base is None:
        raise ValueError("no PREFIX.idx beside it")
    from ..formats.megatron import read_megatron_index

    dtype, _, sentence_offsets, document_index = read_megatron_index(Path(base + ".idx"))
    tokens = _memmap(base + ".bin", dtype)
    if len(tokens) < sentence_offsets[-1]:
        raise ValueError(
            f"{base}.bin is cut short: {len(tokens):,} tokens, its index needs {int(sentence_offsets[-1]):,}"
        )
    if len(tokens) > sentence_offsets[-1]:  # another run's .bin, or an index cut short: never silently cut
        raise ValueError(
            f"{base}.bin holds {len(tokens):,} tokens, {len(tokens) - int(sentence_offsets[-1]):,} past the "
            f"{int(sentence_offsets[-1]):,} its index lists (the pair is not one run's)"
        )
    tokens = tokens[: sentence_offsets[-1]]
    split = bool(np.any(np.diff(document_index) > 1))  # --split-sentences: documents of several sequences
    offsets = sentence_offsets[document_index]
    return TokenFile(base, "megatron", tokens, offsets, *((sentence_offsets, document_index) if split else ()))


def open_datatrove(path: str, ids_key: str, eos: int | None = None) -> TokenFile:
    size = 2
    try:
        with open(path + ".metadata", encoding="utf-8") as f:
            size = int(f.readline().strip().rsplit("|", 1)[1])
    except FileNotFoundError:
        pass  # datatrove's default token size
    except (ValueError, IndexError):
        raise ValueError(f"{path}.metadata does not say the token size (tokenizer|size on its first line)") from None
    if size not in (2, 4):
        raise ValueError(f"token size {size} in {path}.metadata; datatrove writes 2 or 4")
    tokens = _memmap(path, np.dtype(np.uint16 if size == 2 else np.uint32).newbyteorder("<"))
    ends = np.fromfile(path + ".index", "<u8").astype(np.int64)
    if os.path.getsize(path + ".index") % 8 or np.any(np.diff(ends) < 0) or (len(ends) and ends[0] < 0):
        raise ValueError(f"{path}.index is not uint64 document ends in order")
    if len(ends) and ends[-1] != len(tokens):
        raise ValueError(
            f"its index ends at token {int(ends[-1]):,} and the file holds {len(tokens):,} (token size {size}?)"
        )
    return TokenFile(path, "datatrove", tokens, np.concatenate([[0], ends]))


def _split_at(tokens: np.ndarray, eos: int | None) -> np.ndarray:
    """Document offsets of ids separated by EOS: each run up to and with an EOS (the reader takes the
    EOS off). nanoGPT ends each document with one, llm.c starts each with one: the same runs, llm.c's
    first one empty (framing, not a document)."""
    if eos is None:
        return np.array([0, len(tokens)], dtype=np.int64)
    cuts = np.flatnonzero(np.asarray(tokens) == eos).astype(np.int64) + 1
    return np.unique(np.concatenate([[0], cuts, [len(tokens)]]))


def open_llmc(path: str, ids_key: str, eos: int | None = None) -> TokenFile:
    header = np.fromfile(path, "<i4", 256)
    if len(header) < 256 or int(header[0]) not in LLMC_MAGIC:
        raise ValueError("no llm.c header (magic 20240520 or 20240801)")
    dtype = np.dtype(LLMC_MAGIC[int(header[0])]).newbyteorder("<")
    tokens = _memmap(path, dtype, offset=1024)
    if len(tokens) != int(header[2]):
        raise ValueError(f"its header counts {int(header[2]):,} tokens and the file holds {len(tokens):,} (cut short?)")
    return TokenFile(path, "llmc", tokens, _split_at(tokens, eos))


def open_nanogpt(path: str, ids_key: str, eos: int | None = None) -> TokenFile:
    tokens = _memmap(path, np.dtype(np.uint16).newbyteorder("<"))
    return TokenFile(path, "nanogpt", tokens, _split_at(tokens, eos))


def open_input_ids(path: str, ids_key: str, eos: int | None = None) -> TokenFile:
    """A ``datasets`` save_to_disk folder, or Arrow (stream or file) or Parquet files, by their column."""
    import pyarrow as pa

    from ..formats.arrow_columns import MissingColumn, list_ragged, read_parquet, single_array

    if os.path.isdir(path):
        with open(os.path.join(path, "state.json"), encoding="utf-8") as f:
            files = [os.path.join(path, name) for name in saved_data_files(f.read(), path)]
    else:
        files = [path]
    tables = []
    for name in files:
        if name.endswith(".parquet"):
            try:
                tables.append(read_parquet(name, [ids_key]))
            except MissingColumn as missing:
                raise ValueError(f"{missing} (name the ids column with --text-key)") from None
            continue
        source = pa.memory_map(name)
        try:
            tables.append(pa.ipc.open_stream(source).read_all())
        except pa.ArrowInvalid:
            tables.append(pa.ipc.open_file(pa.memory_map(name)).read_all())
    if any(ids_key not in t.column_names for t in tables):
        raise ValueError(f"no column {ids_key!r} (name the ids column with --text-key)")
    column = pa.chunked_array([c for t in tables for c in t.column(ids_key).chunks])
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)) or not pa.types.is_integer(
        column.type.value_type
    ):
        raise ValueError(f"column {ids_key!r} is {column.type}, not a list of integers")
    ids = single_array(column)
    if ids.values.null_count:
        raise ValueError(f"column {ids_key!r} holds null ids")
    values, offsets = list_ragged(ids)
    if ids.null_count:
        raise ValueError(f"column {ids_key!r} holds null rows")
    return TokenFile(path, "input-ids", values, offsets)


OPENERS = {
    "megatron": open_megatron,
    "datatrove": open_datatrove,
    "llmc": open_llmc,
    "nanogpt": open_nanogpt,
    "input-ids": open_input_ids,
}
