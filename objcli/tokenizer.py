"""SentencePiece tokenizer: batched encode into flat arrays, and special-token resolution.

Special tokens are looked up in the model first; a token the model lacks is allocated after the
model's vocabulary (ids ``vocab_size``, ``vocab_size + 1``, … in request order) and recorded in
the manifest (REFERENCE §1). SentencePiece never produces control pieces from text, so a corpus
that spells ``</s>`` or ``<pad>`` gets those characters as plain text, never the control id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from .errors import ObjcliError

# SentencePiece's own accessors for the roles it knows, and the piece names we allocate otherwise.
MODEL_ROLE_ACCESSORS = {"bos": "bos_id", "eos": "eos_id", "pad": "pad_id", "unk": "unk_id"}
DEFAULT_PIECES = {"bos": "<s>", "eos": "</s>", "pad": "<pad>", "unk": "<unk>"}


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


LONG_TEXT_CHARS = 200_000  # longer texts are encoded in pieces (Tokenizer.encode)


@dataclass
class SpecialTokens:
    """Role -> id for every special token a run uses, and which ids were allocated by objcli."""

    ids: dict[str, int] = field(default_factory=dict)
    pieces: dict[str, str] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)  # piece -> allocated id
    sentinels: list[int] = field(default_factory=list)  # id of <extra_id_i> at index i

    def __getitem__(self, role: str) -> int:
        return self.ids[role]

    def get(self, role: str) -> int | None:
        return self.ids.get(role)

    def to_json(self) -> dict:
        return {"ids": self.ids, "pieces": self.pieces, "added": self.added, "sentinels": self.sentinels}


class Tokenizer:
    """What objcli needs of a tokenizer; subclasses wrap SentencePiece and Hugging Face tokenizers.

    Special tokens are resolved here, the same way for every kind of tokenizer.
    """

    kind = "base"
    # Pieces that begin a word: SentencePiece's U+2581, byte-level BPE's "Ġ" (a space byte).
    WORD_MARKERS = ("\u2581", "\u0120")

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.special = SpecialTokens()
        self.vocab_size = 0
        self.role_pieces: dict[str, str] = {}  # --bos-token / --eos-token overrides

    # ---- what each kind provides ----
    def _encode_texts(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        """Batched encode of texts no longer than LONG_TEXT_CHARS into (int32 tokens, int64 offsets)."""
        raise NotImplementedError

    def cut_point(self, window: str) -> int:
        """Where to cut ``window`` (an index > 0) so that encoding the two sides separately gives
        the tokens of encoding them together; 0 when there is no such place."""
        raise NotImplementedError

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        raise NotImplementedError

    def model_id(self, piece: str) -> int | None:
        """The model's id for ``piece``, or None when the model has no such piece."""
        raise NotImplementedError

    def model_role_id(self, role: str) -> int | None:
        """The model's own id for bos / eos / pad / unk, if it declares one."""
        raise NotImplementedError

    def pieces(self) -> list[str]:
        raise NotImplementedError

    def control_mask(self) -> np.ndarray:
        """Model ids that are control/special tokens (never produced from text)."""
        raise NotImplementedError

    def unusable_mask(self) -> np.ndarray:
        """Model ids not to use as random replacements besides the controls (unknown, unused)."""
        raise NotImplementedError

    # ---- shared ----
    def encode(self, texts: list[str], num_threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Batched encode into (int32 tokens, int64 offsets). Texts longer than LONG_TEXT_CHARS are
        encoded in pieces cut where the tokens cannot change (``cut_point``): a tokenizer's memory
        and time on one input grow faster than its length (SentencePiece's lattice, some BPEs)."""
        if not texts:
            return np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64)
        if max(map(len, texts)) <= LONG_TEXT_CHARS:
            return self._encode_texts(texts, num_threads)
        pieces, owners = [], []
        for index, text in enumerate(texts):
            parts = self.split_text(text, LONG_TEXT_CHARS)
            pieces += parts
            owners += [index] * len(parts)
        tokens, offsets = self._encode_texts(pieces, num_threads)
        lengths = np.bincount(np.asarray(owners), weights=np.diff(offsets), minlength=len(texts)).astype(np.int64)
        return tokens, np.concatenate([[0], np.cumsum(lengths)])

    def split_text(self, text: str, limit: int) -> list[str]:
        return list(self.iter_pieces(text, limit))

    def iter_pieces(self, text: str, limit: int) -> Iterator[str]:
        """``text`` in pieces of at most ``limit`` characters, cut at ``cut_point``s (or, where a
        window has none, at the limit, which may change the tokens at that one place)."""
        start = 0
        while len(text) - start > limit:
            cut = self.cut_point(text[start : start + limit]) or limit
            yield text[start : start + cut]
            start += cut
        yield text[start:]

    @property
    def sha256(self) -> str:
        return file_sha256(self.path)

    @property
    def total_vocab_size(self) -> int:
        return self.vocab_size + len(self.special.added)

    def word_start_mask(self) -> np.ndarray:
        """Per model id: the piece begins a word (whole-word masking, BART spans)."""
        return np.array([p.startswith(self.WORD_MARKERS) for p in self.pieces()], dtype=bool)

    def ordinary_ids(self) -> np.ndarray:
        """Ids that may replace a token at random: neither special, unknown nor unused."""
        return np.flatnonzero(~self.control_mask() & ~self.unusable_mask()).astype(np.int32)

    def resolve(self, role: str, piece: str | None = None) -> int:
        """Id for a special-token role, from the model when it has one, else newly allocated."""
        if role in self.special.ids:
            return self.special.ids[role]
        token_id = None
        piece = piece or self.role_pieces.get(role)
        if piece is None and role in MODEL_ROLE_ACCESSORS:
            token_id = self.model_role_id(role)
            if token_id is not None:
                piece = self.piece(token_id)
        piece = piece or DEFAULT_PIECES.get(role, role)
        if token_id is None:
            token_id = self.model_id(piece)
        if token_id is None:
            token_id = self.special.added.get(piece)
        if token_id is None:
            token_id = self.total_vocab_size
            self.special.added[piece] = token_id
        self.special.ids[role] = token_id
        self.special.pieces[role] = piece
        return token_id

    def resolve_sentinels(self, needed: int, extra_ids: int | None) -> list[int]:
        """Ids of ``<extra_id_0>``, ``<extra_id_1>``, … (T5 sentinels, REFERENCE §1).

        From the model when it has ``<extra_id_N>`` pieces; otherwise ``extra_ids`` ids are appended
        past the vocabulary (``None``: 100, or ``needed`` if more), the first sentinel getting the
        highest id (T5's convention).
        """
        if self.special.sentinels:
            return self.special.sentinels
        in_model = []
        while (piece_id := self.model_id(f"<extra_id_{len(in_model)}>")) is not None:
            in_model.append(piece_id)
        if in_model:
            if len(in_model) < needed:
                raise ObjcliError(
                    f"tokenizer {self.path}: has {len(in_model)} <extra_id_N> sentinels but a row needs "
                    f"{needed}; lower --seq-len or --noise-density, or raise --mean-span"
                )
            self.special.sentinels = in_model
            return in_model
        if extra_ids is None:
            extra_ids = max(100, needed)  # T5 appends 100; more when a row needs more
        if extra_ids < needed:
            raise ObjcliError(f"--extra-ids {extra_ids}: a row needs {needed} sentinels; raise --extra-ids")
        base = self.total_vocab_size
        ids = [base + extra_ids - 1 - i for i in range(extra_ids)]
        for i, sentinel in enumerate(ids):
            self.special.added[f"<extra_id_{i}>"] = sentinel
        self.special.sentinels = ids
        return ids

    def adopt(self, special: SpecialTokens) -> None:
        """Use a table resolved elsewhere (workers get the table the main process planned)."""
        self.special = special

    def piece(self, token_id: int) -> str:
        """Piece text for display; allocated specials show their recorded name."""
        if token_id < self.vocab_size:
            return self.pieces()[int(token_id)]
        for piece, allocated in self.special.added.items():
            if allocated == token_id:
                return piece
        return f"<id {token_id}>"

    def is_special(self, token_id: int) -> bool:
        return token_id >= self.vocab_size or bool(self.control_mask()[int(token_id)])

    def decode(self, token_ids: np.ndarray) -> str:
        """Decode, showing control and allocated specials as their names instead of dropping them."""
        out: list[str] = []
        run: list[int] = []
        for token_id in map(int, token_ids):
            if self.is_special(token_id):
                if run:
                    out.append(self.decode_batch([run])[0])
                    run = []
                out.append(self.piece(token_id))
            else:
                run.append(token_id)
        if run:
            out.append(self.decode_batch([run])[0])
        return "".join(out)


def _flatten(arrays) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.concatenate(arrays).astype(np.int32, copy=False) if len(arrays) else np.zeros(0, np.int32)
    return tokens, offsets


class SentencePieceTokenizer(Tokenizer):
    """A SentencePiece ``.model``: batched encode with NumPy output and the library's threads."""

    kind = "sentencepiece"

    def __init__(self, path: str | Path):
        import sentencepiece as spm

        super().__init__(path)
        self.processor = spm.SentencePieceProcessor()
        try:
            self.processor.LoadFromFile(str(self.path))
        except (OSError, RuntimeError) as error:
            raise ObjcliError(
                f"tokenizer {self.path}: neither a SentencePiece model nor a tokenizer.json ({str(error).strip()}); "
                "pass a .model written by SentencePiece or 'objcli train-tokenizer', or a Hugging Face tokenizer.json"
            ) from None
        self.vocab_size = self.processor.get_piece_size()
        self._pieces: list[str] | None = None

    def _encode_texts(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        return _flatten(self.processor.encode(texts, return_type="numpy", num_threads=num_threads))

    def cut_point(self, window: str) -> int:
        """Before a space that follows non-space text. SentencePiece splits at whitespace before
        it segments (``split_by_whitespace``, on in every model objcli trains), and a piece that
        starts with a space encodes as it would after the text before it: with the dummy prefix
        the space is replaced by the prefix, without it the space itself becomes U+2581."""
        cut = window.rfind(" ")
        while cut > 0 and window[cut - 1].isspace():
            cut = window.rfind(" ", 0, cut)
        return max(cut, 0)

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        return self.processor.decode(ids) if ids else []

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
            self._pieces = [self.processor.id_to_piece(i) for i in range(self.vocab_size)]
        return self._pieces

    def control_mask(self) -> np.ndarray:
        return np.array([self.processor.is_control(i) for i in range(self.vocab_size)], dtype=bool)

    def unusable_mask(self) -> np.ndarray:
        return np.array(
            [self.processor.is_unknown(i) or self.processor.is_unused(i) for i in range(self.vocab_size)], dtype=bool
        )


def open_tokenizer(path: str | Path) -> Tokenizer:
    """A SentencePiece ``.model``, or a Hugging Face ``tokenizer.json`` (or a folder holding one)."""
    path = Path(path)
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise ObjcliError(f"tokenizer {path}: the folder holds no tokenizer.json; pass a .model or a tokenizer.json")
        path = path / "tokenizer.json"
    if not path.is_file():
        raise ObjcliError(f"tokenizer {path}: no such file; pass a SentencePiece .model or a tokenizer.json with --tokenizer")
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    if head.startswith(b"{"):
        from .hf_tokenizer import HuggingFaceTokenizer

        return HuggingFaceTokenizer(path)
    return SentencePieceTokenizer(path)


@lru_cache(maxsize=4)
def load_tokenizer(path: str) -> Tokenizer:
    """One loaded tokenizer per worker process and path."""
    return open_tokenizer(path)
