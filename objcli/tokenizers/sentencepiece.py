"""A SentencePiece ``.model``: batched encode with NumPy output and the library's threads."""

from __future__ import annotations

import threading
from functools import cached_property
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..kernels.ragged import lengths_to_offsets
from .base import Tokenizer, flatten_arrays
from .bpe_spec import Unsupported
from .chat_encode import encode_sentencepiece

# SentencePiece's own accessors for the roles it knows.
MODEL_ROLE_ACCESSORS = {"bos": "bos_id", "eos": "eos_id", "pad": "pad_id", "unk": "unk_id"}


def _buffer_encoder(processor):
    """SentencePiece's batched C++ encode that gives one int32 ``bytes`` buffer per text, or None.

    The public ``encode(..., return_type="numpy")`` wraps each buffer in its own NumPy array (about
    1 µs per text: a tenth of a sentence-level run's CPU); joining the buffers once costs a few ns
    per text. The buffer method is private (SentencePiece >= 0.2.2, the floor pyproject.toml sets,
    dispatches to it by name), so it is used only when it exists and encodes a probe exactly as the
    public call does.
    """
    import sentencepiece as spm

    name = getattr(spm, "_ENCODE_DISPATCH", {}).get(True, {}).get("numpy")
    method = getattr(getattr(processor, "_processor", None), name or "", None)
    if method is None:
        return None

    def buffers(texts: list[str], num_threads: int) -> list:
        # texts, threads, thread pool, sampling, nbest size, alpha, add BOS, add EOS, reverse
        return method(texts, num_threads, None, False, -1, 0.1, False, False, False)

    probe = ["SentencePiece probe: ünïcode, digits 123 and\nlines.", "", "x"]
    try:
        expected = [a.tolist() for a in processor.encode(probe, return_type="numpy")]
        if [np.frombuffer(b, dtype=np.int32).tolist() for b in buffers(probe, 1)] == expected:
            return buffers
    except (TypeError, ValueError, RuntimeError):
        pass
    return None


def join_buffers(buffers: list) -> tuple[np.ndarray, np.ndarray]:
    """One token array and the offsets of each text's tokens from per-text int32 buffers (the
    memoryview of a buffer counts its int32 items)."""
    offsets = lengths_to_offsets(np.fromiter(map(len, map(memoryview, buffers)), dtype=np.int64, count=len(buffers)))
    return np.frombuffer(b"".join(buffers), dtype=np.int32), offsets


_VIEWS_LOCK = threading.Lock()
_MODELS: dict[str, object] = {}  # a model's sha256 -> its loaded processor (encoding never changes it)


def _loaded_model(path: Path, sha256: str, spm):
    """The model loaded once a process for its bytes: a run opens its tokenizer about three times (6 ms
    each for a 32k model), and SentencePiece encodes from any number of threads on one processor."""
    with _VIEWS_LOCK:
        if sha256 in _MODELS:
            return _MODELS[sha256]
    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromFile(str(path))
    except (OSError, RuntimeError) as error:
        raise ObjcliError(
            f"tokenizer {path}: neither a SentencePiece model nor a tokenizer.json ({str(error).strip()}); "
            "pass a .model written by SentencePiece or 'objcli train-tokenizer', or a Hugging Face tokenizer.json"
        ) from None
    with _VIEWS_LOCK:
        if len(_MODELS) >= 8:  # a process that opens many models keeps the latest few
            _MODELS.pop(next(iter(_MODELS)))
        return _MODELS.setdefault(sha256, processor)


_MODEL_VIEWS: dict[str, dict] = {}  # a model's sha256 -> its pieces and masks (SentencePieceTokenizer)


class SentencePieceEngine:
    name = "sentencepiece"
    reference = True

    def __init__(self, processor):
        import sentencepiece as spm

        self.version = spm.__version__
        self.processor = processor
        self._buffers = _buffer_encoder(processor)

    def encode_batch(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        if self._buffers is None:
            return flatten_arrays(self.processor.encode(texts, return_type="numpy", num_threads=num_threads))
        return join_buffers(self._buffers(texts, num_threads))


class SentencePieceTokenizer(Tokenizer):
    """A SentencePiece ``.model``: batched encode with NumPy output and the library's threads."""

    kind = "sentencepiece"

    def __init__(self, path: str | Path):
        import sentencepiece as spm

        super().__init__(path)
        self.processor = _loaded_model(self.path, self.sha256, spm)
        self.vocab_size = self.processor.get_piece_size()
        self._pieces: list[str] | None = None
        self.use_engine(SentencePieceEngine(self.processor))

    whole_without_boundary = False  # unspaced text (CJK) would build one lattice for all of it

    def reference_engine_name(self) -> str:
        return "sentencepiece"  # no other engine reproduces a .model exactly and faster

    def make_engine(self, name: str):
        if name != "sentencepiece":
            raise Unsupported("a SentencePiece .model is encoded by sentencepiece alone")
        return self.engine

    def cut_point(self, window: str) -> int:
        """Before a space that follows non-space text. SentencePiece splits at whitespace before
        it segments (``split_by_whitespace``, on in every model objcli trains), and a piece that
        starts with a space encodes as it would after the text before it: with the dummy prefix
        the space is replaced by the prefix, without it the space itself becomes U+2581."""
        cut = window.rfind(" ")
        while cut > 0 and window[cut - 1].isspace():
            cut = window.rfind(" ", 0, cut)
        return max(cut, 0)

    @cached_property
    def _anchor(self) -> tuple[int, str] | None:
        """An ordinary piece that decodes to itself, to put before a run that follows a special token."""
        for token_id, piece in enumerate(self.pieces()):
            if piece.isalpha() and self.decode_batch([[token_id]])[0] == piece:
                return token_id, piece
        return None

    def _decode_run(self, run: list[int], first: bool) -> str:
        """SentencePiece drops the whitespace a text starts with, not that of text after a special
        token: a run after one is decoded behind an anchor piece, then the anchor is cut off, so the
        text matches what the whole sequence (the exported tokenizer) decodes to."""
        if first or self._anchor is None:
            return self.decode_batch([run])[0]
        anchor, text = self._anchor
        return self.decode_batch([[anchor, *run]])[0][len(text) :]

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        return self.processor.decode(ids) if ids else []

    def decode_ranges(self, tokens: np.ndarray, offsets: np.ndarray) -> list[str]:
        # SentencePiece reads int32 arrays as they are: half the cost of converting to lists.
        if len(offsets) < 2:
            return []
        return self.processor.decode(np.split(tokens[offsets[0] : offsets[-1]], offsets[1:-1] - offsets[0]))

    def model_id(self, piece: str) -> int | None:
        piece_id = self.processor.piece_to_id(piece)
        unk = self.processor.unk_id()
        if piece_id == unk and piece != self.processor.id_to_piece(unk):
            return None
        return piece_id

    def model_role_id(self, role: str) -> int | None:
        token_id = getattr(self.processor, MODEL_ROLE_ACCESSORS[role])()
        return token_id if token_id >= 0 else None

    def pieces(self) -> list[str]:
        if self._pieces is None:
            self._pieces = list(self._model_view("pieces", lambda p, n: tuple(map(p.id_to_piece, range(n)))))
        return self._pieces

    # Asked for by every partition's objective, each of which opens the tokenizer again: one pass over
    # the vocabulary per process and model (a 32k-piece model takes 10 ms a pass); callers get copies.
    @cached_property
    def _control(self) -> np.ndarray:
        return self._model_view("control", lambda p, n: np.fromiter(map(p.is_control, range(n)), bool, count=n))

    @cached_property
    def _unusable(self) -> np.ndarray:
        def unusable(check, n: int) -> np.ndarray:
            return np.fromiter((check.is_unknown(i) or check.is_unused(i) for i in range(n)), bool, count=n)

        return self._model_view("unusable", unusable)

    def _model_view(self, name: str, compute):
        """What follows from the model's bytes alone, computed once a process for each model (by its
        sha256; the arrays are never written to)."""
        with _VIEWS_LOCK:  # a run's worker threads open the tokenizer at once
            views = _MODEL_VIEWS.setdefault(self.sha256, {})
            if len(_MODEL_VIEWS) > 8:  # a process that opens many models keeps the latest few
                _MODEL_VIEWS.pop(next(iter(_MODEL_VIEWS)))
            if name not in views:
                views[name] = compute(self.processor, self.vocab_size)
                if isinstance(views[name], np.ndarray):
                    views[name].setflags(write=False)
            return views[name]

    def control_mask(self) -> np.ndarray:
        return self._control.copy()

    def encode_chat(self, texts: list[str], encode=None):
        controls = np.flatnonzero(self._control)
        specials = {self.processor.id_to_piece(int(i)): int(i) for i in controls}
        specials.update(self.special.added)  # pieces objcli allocated past the vocabulary
        return encode_sentencepiece(self.processor, specials, texts)

    def unusable_mask(self) -> np.ndarray:
        return self._unusable.copy()
