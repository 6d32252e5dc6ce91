"""gigatoken: a Rust BPE engine for ``tokenizer.json`` files, a package of its own.

It installs beside the stable ``tokenizers`` (unlike ``tokenizers`` 1.0, a pre-release of the same
package name that ``transformers`` refuses), so ``objcli[fast]`` and a trainer share one environment,
and the stable release is then the parity probe's independent reference.

Two things differ from how objcli encodes, and both are settled here rather than trusted:

- gigatoken always matches special-token texts as the tokens; objcli keeps text that spells a
  special token as text (``encode_special_tokens``). The engine is built from the file with its
  special added tokens left out, so such text is encoded as the model would encode any text.
- Its batched call returns an awkward array; its flat content and offsets are taken as NumPy views.
  A batch of a few texts is encoded a text a call, which returns NumPy arrays (``FEW_TEXTS``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
from pathlib import Path

import numpy as np

from ..storage.user_cache import cache_folder, write_quietly
from .bpe_spec import Unsupported
from .engines import Missing


def gigatoken_json(path: Path) -> bytes:
    """The tokenizer.json gigatoken reads (``without_special_tokens``), kept in the user's cache by the
    file's sha256: re-serializing Llama 3's 8 MB file takes over 2 s, in every process that builds
    the engine (each pool worker does). The entry holds its own sha256 and is checked before use, so
    a damaged one is made again, never read."""
    from .. import __version__  # another objcli may write the file otherwise

    document = Path(path).read_bytes()
    entry = cache_folder("gigatoken") / f"{hashlib.sha256(document).hexdigest()[:32]}-{__version__}.json"
    try:
        digest, body = entry.read_bytes().split(b"\n", 1)
        if digest.decode("ascii") == hashlib.sha256(body).hexdigest():
            return body
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    body = without_special_tokens(document)
    write_quietly(entry, hashlib.sha256(body).hexdigest() + "\n" + body.decode("ascii"))
    return body


def without_special_tokens(document: bytes) -> bytes:
    """The tokenizer.json with its special added tokens left out: gigatoken has no option to read
    their texts as text, and objcli never produces them from text."""
    data = json.loads(document)
    data["added_tokens"] = [t for t in data.get("added_tokens") or [] if not t.get("special")]
    return json.dumps(data).encode("utf-8")


# A batch of at most this many texts is encoded one text a call: each call costs about a microsecond
# more than a text of a batched call (1.1 us, tiny documents), nothing beside a batch of long ones, and
# it returns NumPy arrays where the batched call returns an awkward array, whose import (0.12-0.14 s,
# under the GIL) outweighs what more threads save on a run's last partition of long documents (a 10 MB
# document: 25-38 ms on one thread, 20 ms on two). The call is the padded one on the text's UTF-8 bytes
# (``BytesSource``), one row, so nothing is padded: it releases the GIL, so a thread pool's other
# partitions go on beside it (``Tokenizer.encode`` holds it), and it imports nothing.
FEW_TEXTS = 64


class GigatokenEngine:
    """gigatoken's byte-level (and SentencePiece-style) BPE, probed against the stable library."""

    name = "gigatoken"
    reference = False
    whole_texts = True  # linear in time and memory on long texts (measured: tests/tokenizers/test_whole_texts.py)

    def __init__(self, path: Path):
        try:
            import gigatoken
        except ImportError:
            raise Missing("install it with: pip install 'objcli[fast]'") from None
        from importlib.metadata import version  # 8 ms to import: only where this engine is built

        self.version = version("gigatoken")  # the package has no __version__
        self._make = functools.partial(gigatoken.Tokenizer.from_json, gigatoken_json(path))
        try:
            self.library = self._make()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # its own refusals; a Rust panic is a BaseException
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise Unsupported(f"gigatoken refuses it: {first}") from None
        self._idle = [self.library]  # instances no thread is encoding with now
        self._idle_lock = threading.Lock()

    @contextlib.contextmanager
    def _instance(self):
        """An instance of the tokenizer that no other thread is encoding with: one shared by two
        threads encodes at half the speed or less (two threads on 50 MB, each with its own against one
        shared: dense 0.71-0.79 s against 1.32-1.64, tiny 0.66-0.71 against 1.05-1.08, long 0.21-0.26
        against 0.40-0.42; its caches are shared between calls). A thread that finds none idle makes
        one (0.06 s for a 32k file), kept for the next call of any thread: as many as threads encode
        at once, and a process forked from one that built it (a pool's worker) takes it ready."""
        with self._idle_lock:
            library = self._idle.pop() if self._idle else None
        if library is None:
            library = self._make()
        try:
            yield library
        finally:
            with self._idle_lock:
                self._idle.append(library)

    def encode_batch(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        os.environ.setdefault("RAYON_NUM_THREADS", str(num_threads))  # its pool is sized on first use
        if not texts:
            return np.zeros(0, np.int32), np.zeros(1, np.int64)
        with self._instance() as library:
            if len(texts) <= FEW_TEXTS:
                return _encode_each(library, texts)
            layout = library.encode_batch(texts, parallel=num_threads > 1).layout
        offsets = np.asarray(layout.offsets.data, dtype=np.int64)
        tokens = np.asarray(layout.content.data)[offsets[0] : offsets[-1]]
        return tokens.view(np.int32), offsets - offsets[0]  # ids are below 2**31: the same bits


def _encode_each(library, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A few texts one call each: the same ids at the same cost as a batched call on one thread (long
    documents), as NumPy arrays. ``encode_batch`` returns an awkward array, and importing awkward (and
    the fsspec it imports) is 0.12-0.14 s of a run's start-up: a run of long documents never pays it.
    gigatoken's calls on a list of ``str`` import awkward to test the list's type; on a ``BytesSource``
    they do not."""
    from gigatoken.gigatoken_rs import BytesSource, PadTruncate

    whole = PadTruncate(0)  # a row of one text: no padding, no truncation
    parts = []
    for text in texts:
        matrix, lengths = library.backend.encode_batch_padded(BytesSource(text.encode("utf-8")), whole, parallel=False)
        parts.append(matrix[0, : lengths[0]])
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(part) for part in parts], out=offsets[1:])
    return np.concatenate(parts).view(np.int32), offsets
