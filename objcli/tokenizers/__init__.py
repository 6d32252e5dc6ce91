"""Tokenizers, one file per kind behind one interface (``base.Tokenizer``).

``open_tokenizer`` tells the kinds apart by content: a JSON object is a Hugging Face
``tokenizer.json``; lines of ``base64 rank`` are a tiktoken rank file (Llama 3's ``tokenizer.model``
is one); anything else is tried as a SentencePiece model.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..errors import ObjcliError
from ..storage.copies import local_file_copy
from ..storage.remote import is_url
from .base import LONG_TEXT_CHARS, SpecialTokens, Tokenizer
from .bpe_spec import Unsupported

__all__ = ["LONG_TEXT_CHARS", "SpecialTokens", "Tokenizer", "load_tokenizer", "open_tokenizer", "remember_tokenizer"]


def open_tokenizer(path: str | Path) -> Tokenizer:
    """A SentencePiece ``.model``, or a Hugging Face ``tokenizer.json`` (or a folder holding one)."""
    if is_url(str(path)):
        path = local_file_copy(str(path))  # cached by URL and version: each worker downloads it once
    path = Path(path)
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise ObjcliError(
                f"tokenizer {path}: the folder holds no tokenizer.json; pass a .model or a tokenizer.json"
            )
        path = path / "tokenizer.json"
    if not path.is_file():
        raise ObjcliError(
            f"tokenizer {path}: no such file; pass a SentencePiece .model or a tokenizer.json with --tokenizer"
        )
    with open(path, "rb") as f:
        head = f.read(256).lstrip()
    if head.startswith(b"{"):
        from .huggingface import HuggingFaceTokenizer

        return HuggingFaceTokenizer(path)
    from .tiktoken_bpe import TiktokenTokenizer, looks_like_ranks

    if looks_like_ranks(head):
        return TiktokenTokenizer(path)
    from .sentencepiece import SentencePieceTokenizer

    return SentencePieceTokenizer(path)


_LOADED: dict[tuple[str, str], Tokenizer] = {}
_OPENED: dict[str, Tokenizer] = {}  # opened before the run chose its engine (preload_tokenizer)
_BUILT: dict[tuple[str, str], object] = {}  # (path, engine name) -> the engine preload_tokenizer built
_LOCK = threading.Lock()


def preload_tokenizer(path: str, engine: str = "auto") -> None:
    """Open a tokenizer before the run has chosen its engine (a fork server started early): the
    first ``load_tokenizer`` of that path in this process, or a process forked from it, takes it and
    gives it the engine named then. ``engine``: "auto", with the first engine ``--engine auto`` tries, built
    and warmed; "reference", opened alone, for a run that encodes nothing (a token store's), whose workers take
    the reference made where something encodes (``load_tokenizer``; a fast engine built and warmed here for it
    took 60 ms of its pool's start, the reference 0.46 s at 128k)."""
    with _LOCK:
        if path not in _OPENED:
            _OPENED[path] = opened = open_tokenizer(path)
            # The engine --engine auto tries first, built and warmed here once, on this thread (no
            # engine thread pool exists in a process that forks): a worker forked from here that is
            # given it starts ready (gigatoken's first encode of a tokenizer.json took each worker 0.25 s).
            for name in opened.engine_order() if engine == "auto" else []:
                try:
                    made = opened.make_engine(name)
                except Unsupported:  # not installed, or not for this file: the next in the order
                    continue
                sized = "RAYON_NUM_THREADS" in os.environ
                made.encode_batch(["warm up"], 1)
                if not sized:  # the engine sized its pool for this call: each worker sizes its own
                    os.environ.pop("RAYON_NUM_THREADS", None)
                _BUILT[path, name] = made
                break


def load_tokenizer(path: str, engine: str = "auto") -> Tokenizer:
    """One loaded tokenizer per process, path and engine. The engine is the one the main process
    chose and probed (``engine_probe.choose_engine``): workers take it as named. A pool of threads
    shares the tokenizer the main process set up with (``remember_tokenizer``): a 128k-token
    tokenizer.json takes most of a second to load."""
    with _LOCK:
        if (path, engine) not in _LOADED:
            if len(_LOADED) >= 4:
                _LOADED.pop(next(iter(_LOADED)))
            tokenizer = _OPENED.pop(path, None) or open_tokenizer(path)
            if engine not in ("auto", "reference"):
                try:
                    built = _BUILT.pop((path, engine), None)
                    if built is None and engine == tokenizer.reference_engine_name():  # made where it encodes
                        built = tokenizer.deferred_reference()
                    tokenizer.use_engine(built if built is not None else tokenizer.make_engine(engine))
                except Unsupported as why:
                    raise ObjcliError(f"--engine {engine}: cannot encode {Path(path).name} here ({why})") from None
            _LOADED[path, engine] = tokenizer
        return _LOADED[path, engine]


def remember_tokenizer(path: str, engine: str, tokenizer: Tokenizer) -> None:
    with _LOCK:
        _LOADED[path, engine] = tokenizer
