"""Engines: what encodes a batch under a ``Tokenizer``, chosen for speed and proven exact.

A tokenizer file says what the tokens are; an engine computes them. Several exact engines read the
same file at very different speeds (a byte-level BPE ``tokenizer.json``: ``tokenizers`` 1.0,
gigatoken or quicktok at 20-80x ``tokenizers`` 0.2x). Each engine gives one flat int32 array and
int64 offsets.

- A **reference** engine is the file's own stable library (SentencePiece, ``tokenizers`` 0.x,
  tiktoken) or, where that cannot be installed beside a pre-release of the same name, objcli's
  readable byte-level BPE (``python_bpe.py``). It is trusted as it is.
- Any other engine must pass the **parity probe** first (``engine_probe.py``, where the run's engine
  is chosen).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..storage.user_cache import cache_folder, write_quietly
from .base import flatten_arrays
from .bpe_spec import BPESpec, Unsupported


class Missing(Unsupported):
    """The engine's library is not installed here."""


def is_prerelease(version: str) -> bool:
    """``1.0.0-rc.3``, ``1.0.0rc3``, ``0.24.0.dev0``: a letter in the version."""
    return re.search(r"[a-z]", version.lower()) is not None


def tokenizers_version() -> str:
    """The installed ``tokenizers`` library's version (``Missing`` where it is not installed), known
    without reading a file."""
    try:
        import tokenizers
    except ImportError:
        raise Missing("install it with: pip install 'objcli[hf]'") from None
    return tokenizers.__version__


class TokenizersEngine:
    """The ``tokenizers`` library: 0.x through ``encode_batch_fast``, 1.0 through ``encode_batch``
    with ``encode_special_tokens`` per call and NumPy ids (1.0 has no other encode)."""

    name = "tokenizers"

    def __init__(self, path: Path):
        self.version = tokenizers_version()
        import tokenizers

        self.library = tokenizers.Tokenizer.from_file(str(path))
        self.reference = not is_prerelease(self.version)
        self.legacy = hasattr(self.library, "encode_batch_fast")
        # 1.0 is linear in a text's length; 0.x's encodings hold ~120 bytes a character (1.2 GB for 10 M)
        self.whole_texts = not self.legacy
        self.matches_specials = not self.legacy  # 1.0 reads special-token texts as the tokens on request
        if self.legacy:
            self.library.encode_special_tokens = True
        self._threads: int | None = None

    def encode_batch(self, texts: list[str], num_threads: int, specials: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``specials``: special-token texts become their tokens, as the library's added vocabulary
        matches them (1.0 only: ``matches_specials``); else they are text like any other."""
        if self._threads is None:  # the library sizes its pool on first use
            os.environ.setdefault("RAYON_NUM_THREADS", str(num_threads))
            self._threads = num_threads
        if self.legacy:
            arrays = [
                np.asarray(e.ids, dtype=np.int32)
                for e in self.library.encode_batch_fast(texts, add_special_tokens=False)
            ]
        else:
            arrays = [
                e.ids_array
                for e in self.library.encode_batch(texts, add_special_tokens=False, encode_special_tokens=not specials)
            ]
        return flatten_arrays(arrays)

    def decode(self, ids: list[list[int]]) -> list[str]:
        if self.legacy:
            return self.library.decode_batch(ids, skip_special_tokens=False)
        return [self.library.decode(i, skip_special_tokens=False) for i in ids]


class DeferredEngine:
    """An engine named and versioned now, made when first used: a run that encodes nothing (token stores) records
    the tokenizer's reference, whose library reads a 128k tokenizer.json in 0.46 s, and makes it only where
    something encodes after all (UL2's mode tokens)."""

    def __init__(self, name: str, version: str, make, where: str):
        self.name, self.version, self._make, self._made, self._where = name, version, make, None, where
        self._lock = threading.Lock()  # a thread pool's partitions share it: made once

    def __getattr__(self, attribute: str):  # what the engine has besides its name and version: made now
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        with self._lock:
            if self._made is None:
                try:
                    self._made = self._make()
                except Unsupported as why:  # a run that encodes a piece after all (regex missing, say)
                    raise ObjcliError(
                        f"{self._where}: its reference engine, {self.name}, cannot encode ({why})"
                    ) from None
        return getattr(self._made, attribute)


# Split patterns quicktok has scanners for: its own table, and tiktoken's spelling of cl100k.
def quicktok_scanners() -> dict[str, str]:
    from quicktok import _import_core

    from .bpe_spec import CL100K_PATTERN

    return {**_import_core.KNOWN_PATTERNS, CL100K_PATTERN: "cl100k"}


class QuicktokEngine:
    """quicktok-v1 (C++, exact backtracking BPE) for the split patterns it has compiled scanners for:
    cl100k, o200k, Llama 3, Qwen. Its data files are written once per tokenizer digest into a cache."""

    name = "quicktok"
    reference = False
    whole_texts = True  # flat arrays, linear in time and memory (tests/tokenizers/test_whole_texts.py)

    def __init__(self, spec_of, digest: str):
        """``spec_of()`` gives the file's ``BPESpec``; it is asked for only the first time a file is
        seen: what was decided for this digest and quicktok version (the data files, or the reason
        for refusing) is kept in the cache, so a 128k tokenizer.json is not checked on every run."""
        try:
            import quicktok
        except ImportError:
            raise Missing("install it with: pip install 'objcli[fast]'") from None
        self.version = quicktok.__version__
        folder = _cache_folder(digest, self.version)
        refused = folder.with_name(folder.name + ".refused")
        if refused.is_file():
            raise Unsupported(refused.read_text(encoding="utf-8"))
        if not (folder / "objcli.enc").is_file():
            try:
                spec = spec_of()
                _quicktok_data(spec, _scanner(spec), folder)
            except Unsupported as why:
                write_quietly(refused, str(why))
                raise
        try:
            self.encoding = quicktok.Tokenizer("objcli", str(folder))
        except RuntimeError as error:  # its own checks (ranks with gaps): the next engine takes the file
            why = f"quicktok refuses its data ({str(error).split(':')[1].strip() if ':' in str(error) else error})"
            write_quietly(refused, why)
            raise Unsupported(why) from None

    def encode_batch(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        tokens, offsets = self.encoding.encode_batch(texts, max(1, num_threads), False)
        return tokens.view(np.int32), offsets  # ids are below 2**18: the same bits


def _scanner(spec: BPESpec) -> str:
    """quicktok's scanner for the file, or Unsupported saying why it cannot take it."""
    scanner = quicktok_scanners().get(spec.patterns[0]) if len(spec.patterns) == 1 else None
    if scanner is None:
        raise Unsupported("quicktok has no scanner for this split pattern")
    if spec.add_prefix_space or spec.plain_added:
        raise Unsupported("quicktok takes no prefix space and no non-special added tokens")
    if spec.merges is not None:
        check_merges_are_ranks(spec)
    if max(spec.vocab.values(), default=0) >= 1 << 18:
        raise Unsupported("quicktok takes ids below 262,144")
    return scanner


def _cache_folder(digest: str, version: str) -> Path:
    return cache_folder("quicktok") / f"{digest[:24]}-{version}"


def _quicktok_data(spec: BPESpec, scanner: str, folder: Path) -> None:
    """quicktok's data files for this tokenizer, written once into the user's cache (atomically:
    a folder renamed into place), keyed by the tokenizer's digest and quicktok's version."""
    from quicktok import _import_core

    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".writing-"))
    try:
        specials = {s: i for s, i in spec.special.items() if 0 < len(s.encode()) <= 64}
        _import_core.write_files(str(work), "objcli", spec.byte_vocab(), specials, scanner, spec.nfc)
        _import_core.ensure_tables(str(work), str(Path(_import_core.__file__).parent / "data"), scanner, spec.nfc)
        os.replace(work, folder)
    except OSError:
        if not (folder / "objcli.enc").is_file():
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_merges_are_ranks(spec: BPESpec) -> None:
    """Merges by their order in the file give rank BPE's tokens (quicktok's, tiktoken's) only when
    every split of a token into two tokens is a merge, later merges never make earlier tokens, and no
    token is made by two merges that can overlap ([x, q, y] with x+q = q+y) in the opposite order of
    leftmost-first. Files converted from rank files (Llama 3, Qwen) satisfy all three."""
    if not spec.ignore_merges:
        raise Unsupported("merges without ignore_merges can split a piece that is itself a token")
    vocab, merges = spec.vocab, spec.merges
    made: dict[bytes, dict[tuple[bytes, bytes], int]] = {}
    last = -1
    for (left, right), rank in sorted(merges.items(), key=lambda m: m[1]):
        token = vocab.get(left + right)
        if token is None or token < last:
            raise Unsupported("the merges are not in the order of the tokens they make")
        last = token
        made.setdefault(left + right, {})[left, right] = rank
    for token in vocab:
        splits = [(token[:k], token[k:]) for k in range(1, len(token)) if token[:k] in vocab and token[k:] in vocab]
        own = made.get(token, {})
        if any(s not in own for s in splits):
            raise Unsupported("a token can be split into two tokens that no merge joins")
        for (_left, middle), rank in own.items():
            right = token[len(middle) :] if token.startswith(middle) else None
            if right is not None and own.get((middle, right), rank) < rank:
                raise Unsupported("two merges make one token in an order rank BPE does not follow")


class TiktokenEngine:
    name = "tiktoken"
    reference = True
    whole_texts = True  # linear in time and memory on long texts (tests/tokenizers/test_whole_texts.py)

    def __init__(self, ranks: dict[bytes, int], pattern: str, specials: dict[str, int], label: str):
        try:
            import tiktoken
        except ImportError:
            raise Missing("install it with: pip install 'objcli[tiktoken]'") from None
        self.version = tiktoken.__version__
        try:
            self.encoding = tiktoken.Encoding(
                name=label, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials
            )
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # a pattern its regex engine refuses; a Rust panic is a BaseException
            raise Unsupported(
                f"tiktoken refuses it: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
            ) from None

    def encode_batch(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        ids = self.encoding.encode_ordinary_batch(texts, num_threads=max(1, num_threads))
        return flatten_arrays([np.asarray(i, dtype=np.int32) for i in ids])


class PythonEngine:
    """objcli's readable byte-level BPE (``python_bpe.py``): the reference of last resort."""

    name = "python"
    reference = True

    def __init__(self, spec: BPESpec):
        try:
            import regex  # noqa: F401
        except ImportError:
            raise Missing("it needs the regex module: pip install 'objcli[fast]'") from None
        from .. import __version__
        from .python_bpe import PythonBPE

        self.version = __version__
        self.bpe = PythonBPE(spec)

    def encode_batch(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        return self.bpe.encode_batch(texts)
