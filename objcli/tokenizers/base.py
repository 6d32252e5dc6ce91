"""What objcli needs of a tokenizer, and special-token resolution, the same for every kind.

Special tokens are looked up in the model first; a token the model lacks is allocated after the
model's vocabulary (ids ``vocab_size``, ``vocab_size + 1``, … in request order) and recorded in
the manifest (REFERENCE §1). SentencePiece never produces control pieces from text, so a corpus
that spells ``</s>`` or ``<pad>`` gets those characters as plain text, never the control id.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..kernels.ragged import lengths_to_offsets
from ..storage.files import file_sha256
from .cutting import TextCutter
from .specials import SpecialTokens

# Roles a model may define itself, and the piece names allocated for them when it does not.
MODEL_ROLES = ("bos", "eos", "pad", "unk")
DEFAULT_PIECES = {"bos": "<s>", "eos": "</s>", "pad": "<pad>", "unk": "<unk>"}


LONG_TEXT_CHARS = 200_000  # longer texts are encoded in pieces (Tokenizer.encode)


class Tokenizer(TextCutter):
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
        self.engine = None  # what encodes (engines.py); each kind starts with its reference
        self.engine_choice = None  # how the run chose it (engine_probe.EngineChoice), in the main process

    # ---- engines (engine_probe.choose_engine picks one per run) ----
    def engine_order(self) -> list[str]:
        """Engine names for ``--engine auto``, fastest first; the last one is a reference."""
        return [self.reference_engine_name()]

    def reference_engine_name(self) -> str:
        raise NotImplementedError

    def make_engine(self, name: str):
        """The engine ``name`` for this file, or ``bpe_spec.Unsupported`` saying why not."""
        raise NotImplementedError

    def deferred_reference(self):
        """The reference engine, made when first used, where making it costs (``engines.DeferredEngine``); else None."""
        return None

    def probe_reference(self, engine):
        """An engine independent of ``engine`` that is trusted as it is, to probe it against; or None."""
        return None

    def special_texts(self) -> list[str]:
        """The texts of the model's own special tokens (the probe encodes them as plain text)."""
        return []

    def use_engine(self, engine) -> None:
        self.engine = engine

    def _encode_texts(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        """Batched encode of texts no longer than LONG_TEXT_CHARS into (int32 tokens, int64 offsets)."""
        return self.engine.encode_batch(texts, num_threads)

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        raise NotImplementedError

    def decode_ranges(self, tokens: np.ndarray, offsets: np.ndarray) -> list[str]:
        """The text of every item of a ragged batch (``tokens[offsets[i]:offsets[i + 1]]``)."""
        return self.decode_batch([tokens[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])])

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

    def template_bos(self) -> str | None:
        """The BOS piece the tokenizer's own template puts before a text, if it has one (``--bos``
        not given follows it). SentencePiece models carry no template: none."""
        return None

    def encode_chat(self, texts: list[str], encode=None):
        """Rendered conversations: (int32 tokens, int64 offsets, int64 char starts, int64 char
        ends; positions in the texts joined end to end), special-token texts read as the special
        tokens (``chat_encode``). ``encode`` is the run's batched encode, for kinds that can use it."""
        raise ObjcliError(f"tokenizer {self.path}: --objective chat does not support {self.kind} tokenizers")

    # ---- shared ----
    def encode(self, texts: list[str], num_threads: int = 1, specials: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Batched encode into (int32 tokens, int64 offsets); ``specials``: special-token texts
        become their tokens (engines that say ``matches_specials``; texts whole). Texts longer than
        LONG_TEXT_CHARS are encoded in pieces cut where the tokens cannot change (``boundary``): a
        tokenizer's memory and time on one input grow faster than its length (SentencePiece's
        lattice, some BPEs), except for engines that say ``whole_texts`` (linear in time and
        memory: a 10-million-character text takes them 0.04-0.07 s and under 20 MB)."""
        if not texts:
            return np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64)
        if specials:  # whole texts: a cut could fall inside a special-token text
            if not getattr(self.engine, "matches_specials", False):
                raise ValueError(f"the {self.engine.name} engine does not read special-token texts as the tokens")
            return self.engine.encode_batch(texts, num_threads, specials=True)
        # An engine that takes whole texts first: no scan of every text's length (tiny documents: 7 % of the call).
        if getattr(self.engine, "whole_texts", False) or max(map(len, texts)) <= LONG_TEXT_CHARS:
            return self._encode_texts(texts, num_threads)
        pieces, owners = [], []
        for index, text in enumerate(texts):
            parts = list(self.exact_pieces(text, LONG_TEXT_CHARS)) if len(text) > LONG_TEXT_CHARS else [text]
            pieces += parts
            owners += [index] * len(parts)
        tokens, offsets = self._encode_texts(pieces, num_threads)
        lengths = np.bincount(np.asarray(owners), weights=np.diff(offsets), minlength=len(texts)).astype(np.int64)
        return tokens, np.concatenate([[0], np.cumsum(lengths)])

    def token_char_spans(self, texts: list[str], tokens: np.ndarray, offsets: np.ndarray):
        """(starts, ends): where each token's characters start and end in its own text (int32; the
        caller clips them to the text). A byte-level BPE says them exactly from the tokens' bytes (its
        override; a token that starts inside a character belongs to it); here they are measured on
        the pieces: a piece's characters with its word mark (``▁``) a space, a text's first mark not
        counted where the text does not start with a space, specials none, a byte piece one: exact
        where the tokenizer's normalization leaves the text as it is."""
        chars, marked = self._piece_chars
        lengths = chars[tokens]
        counts = np.diff(offsets)
        firsts = offsets[:-1][counts > 0]
        plain_start = np.fromiter((not t[:1].isspace() for t in texts), bool, len(texts))[counts > 0]
        lengths[firsts[plain_start & marked[tokens[firsts]]]] -= 1
        running = np.cumsum(lengths, dtype=np.int64)
        ends = (running - np.repeat(np.concatenate([[0], running])[offsets[:-1]], counts)).astype(np.int32)
        return ends - lengths, ends

    @cached_property
    def _piece_chars(self) -> tuple[np.ndarray, np.ndarray]:
        """Per model id: the characters of its piece in text, and whether it starts with a word mark."""
        pieces, control = self.pieces(), self.control_mask()
        chars = np.array([len(p.replace("\u2581", " ")) for p in pieces], np.int32)
        chars[[i for i, p in enumerate(pieces) if len(p) == 6 and p.startswith("<0x") and p.endswith(">")]] = 1
        chars[control[: len(chars)]] = 0
        marked = np.array([p.startswith("\u2581") for p in pieces], bool)
        extra = self.total_vocab_size - len(chars)  # ids added past the model: specials, never in text
        return np.concatenate([chars, np.zeros(max(extra, 0), np.int32)]), np.concatenate(
            [marked, np.zeros(max(extra, 0), bool)]
        )

    def piece_char_table(self) -> np.ndarray:
        """Per id, the characters its piece stands for (uint8, 255 at most): what a store's token places
        are predicted from (``kernels/places.py``); a function of the model's pieces alone, so every worker
        of a run makes the same."""
        return np.clip(self._piece_chars[0], 0, 255).astype(np.uint8)

    def side_files(self) -> dict[str, Path]:
        """Files read beside the tokenizer file whose content changes what a run writes (a run's
        identity, ``storage/identity.py``), by what they are."""
        return {}

    @cached_property
    def sha256(self) -> str:
        return file_sha256(self.path)  # once per tokenizer: a 32k model takes milliseconds to hash

    @property
    def total_vocab_size(self) -> int:
        return self.vocab_size + len(self.special.added)

    def allocation_warning(self) -> str | None:
        """One line on every special this run allocates past the model's vocabulary, which a model
        trained on the shards needs embedding rows for: never silent (a Llama 3 rank file converted
        without its specials gave every document a new EOS one past the vocabulary, said only in
        the manifest). None when the model has them all."""
        added = self.special.added
        if not added:
            return None
        role_of = {piece: role for role, piece in self.special.pieces.items()}
        sentinels = {p: i for p, i in added.items() if p.startswith("<extra_id_") and p not in role_of}
        named = [f"{role_of.get(p, 'special')} {p!r} as id {i}" for p, i in added.items() if p not in sentinels]
        if sentinels:
            ids = list(sentinels.values())
            named.append(f"{len(sentinels)} T5 sentinels <extra_id_N> as ids {min(ids)}-{max(ids)}")
        own = {"bos": "--bos-token", "eos": "--eos-token", "pad": "--pad-token"}
        flags = sorted({own[role_of[p]] for p in added if role_of.get(p) in own})
        fix = f"name one of the tokenizer's own pieces ({', '.join(flags)}), or give" if flags else "give"
        if "--pad-token" in flags:  # padding is told apart by its id, so it needs a piece text never gives
            fix = fix.replace("pieces (", "pieces that no text produces, such as a reserved special (", 1)
        return (
            f"the tokenizer's vocabulary ({self.vocab_size:,} ids) has no {', '.join(named)}; a model trained on "
            f"these shards needs embedding rows for them: {fix} the trainer the tokenizer with them added "
            "('objcli export-tokenizer OUT -o DIR')"
        )

    def word_start_mask(self) -> np.ndarray:
        """Per model id: the piece begins a word (whole-word masking, BART spans). A copy of the table made once
        a tokenizer: each partition's objective asks (a pass over 8k pieces 0.75 ms, 128k some 12 ms)."""
        return self._word_starts.copy()

    @cached_property
    def _word_starts(self) -> np.ndarray:
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
        if piece is None and role in MODEL_ROLES:
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
        """Use a table resolved elsewhere (workers get the table the main process resolved)."""
        self.special = special

    def piece(self, token_id: int) -> str:
        """Piece text for display; allocated specials show their recorded name."""
        if token_id < self.vocab_size:
            return self.pieces()[int(token_id)]
        for piece, allocated in self.special.added.items():
            if allocated == token_id:
                return piece
        return f"<id {token_id}>"

    @cached_property
    def _control(self) -> np.ndarray:
        return self.control_mask()

    def is_special(self, token_id: int) -> bool:
        # The mask is built once: inspect asks for every token of every row shown.
        return token_id >= self.vocab_size or bool(self._control[int(token_id)])

    def decode(self, token_ids: np.ndarray) -> str:
        """Decode, showing control and allocated specials as their names instead of dropping them."""
        out: list[str] = []
        run: list[int] = []
        for token_id in map(int, token_ids):
            if self.is_special(token_id):
                if run:
                    out.append(self._decode_run(run, not out))
                    run = []
                out.append(self.piece(token_id))
            else:
                run.append(token_id)
        if run:
            out.append(self._decode_run(run, not out))
        return "".join(out)

    def _decode_run(self, run: list[int], first: bool) -> str:
        """A run of ordinary ids as the whole sequence decodes it (``first``: at the start of it)."""
        return self.decode_batch([run])[0]


def flatten_arrays(arrays) -> tuple[np.ndarray, np.ndarray]:
    offsets = lengths_to_offsets(np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays)))
    tokens = np.concatenate(arrays) if len(arrays) else np.zeros(0, np.int32)
    if tokens.dtype == np.uint32:  # tokenizers 1.0's ids: below 2**31, the same bits, no second copy
        return tokens.view(np.int32), offsets
    return tokens.astype(np.int32, copy=False), offsets
