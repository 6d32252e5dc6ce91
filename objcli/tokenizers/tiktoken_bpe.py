"""tiktoken BPE rank files (OpenAI's encodings, Llama 3's ``tokenizer.model``, Qwen's ``qwen.tiktoken``),
loaded offline through ``tiktoken.Encoding``, the fastest BPE encoder in Python (it releases the GIL
and encodes batches with threads).

A rank file holds only the merges: one ``base64(token bytes) rank`` line per token. The split pattern
and the special tokens come from a side file ``<rank file>.json`` when there is one::

    {"pattern": "...", "special_tokens": {"<|endoftext|>": 100257}, "bos": null, "eos": "<|endoftext|>"}

or else from the published encoding with that many ranks (``PRESETS``: cl100k, o200k, Llama 3). Text
that spells a special token stays text (``encode_ordinary``), as with the other kinds.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cached_property
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from .base import Tokenizer
from .bpe_spec import CL100K_PATTERN, LLAMA3_PATTERN, O200K_PATTERN, Unsupported, spec_from_ranks
from .chat_encode import TokenBytes, encode_split_at_specials, encode_tiktoken, spans_within_texts
from .engines import PythonEngine, QuicktokEngine, TiktokenEngine


def _llama3_specials(base: int) -> dict[str, int]:
    """Meta's llama3 ``tokenizer.py``: 256 specials after the 128,000 ranks."""
    names = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>",
        "<|reserved_special_token_2|>",
        "<|reserved_special_token_3|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|reserved_special_token_4|>",
        "<|eot_id|>",
    ]
    names += [f"<|reserved_special_token_{i}|>" for i in range(5, 256 - 5)]
    return {name: base + i for i, name in enumerate(names)}


# Published encodings, by their number of ranks: (name, pattern, specials, bos, eos).
PRESETS = {
    100_256: (
        "cl100k_base",
        CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        None,
        "<|endoftext|>",
    ),
    199_998: ("o200k_base", O200K_PATTERN, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}, None, "<|endoftext|>"),
    128_000: ("llama3", LLAMA3_PATTERN, _llama3_specials(128_000), "<|begin_of_text|>", "<|end_of_text|>"),
}


def looks_like_ranks(head: bytes) -> bool:
    """The first line of a rank file: base64 text, one space, a decimal rank."""
    first = head.split(b"\n", 1)[0].strip()
    token, _, rank = first.partition(b" ")
    try:
        base64.b64decode(token, validate=True)
    except ValueError:
        return False
    return bool(token) and rank.isdigit()


MAX_ID = 2**31 - 1  # token ids are written as int32


def _read_ranks(path: Path) -> dict[bytes, int]:
    """Every ``base64 rank`` line; a token or a rank given twice, or a single byte without a rank
    (tiktoken would stop the process on such text), is a one-line error."""
    ranks, tokens_of = {}, {}
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            token, rank = base64.b64decode(token, validate=True), int(rank)
        except ValueError:
            raise ObjcliError(
                f"tokenizer {path}: line {number} is not 'base64-token rank'; pass an intact rank file"
            ) from None
        if not 0 <= rank <= MAX_ID or not token:
            raise ObjcliError(
                f"tokenizer {path}: line {number} has rank {rank} for {token!r}; ranks are 0 to {MAX_ID:,} "
                "for non-empty tokens"
            )
        if token in ranks or rank in tokens_of:
            first = ranks.get(token, rank)
            raise ObjcliError(
                f"tokenizer {path}: line {number} repeats {'token ' + repr(token) if token in ranks else 'rank'} "
                f"{first}; pass an intact rank file"
            )
        ranks[token], tokens_of[rank] = rank, token
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ObjcliError(
            f"tokenizer {path}: no rank for the byte {bytes([missing[0]])!r} ({len(missing)} of 256 "
            "bytes missing); a byte-level rank file ranks every single byte"
        )
    return ranks


def _check_side(side: Path, spec, ranks: dict[bytes, int]) -> tuple[str, dict[str, int], str | None, str | None]:
    """A side file's pattern, specials, BOS and EOS, each checked: the pattern must compile, specials
    map non-empty texts to ids outside the ranks, BOS/EOS name one of them."""
    import regex

    if not isinstance(spec, dict):
        raise ObjcliError(
            f"{side}: holds {type(spec).__name__}, not an object; write "
            '{"pattern": …, "special_tokens": {…}, "bos": …, "eos": …}'
        )
    pattern, specials = spec.get("pattern"), spec.get("special_tokens", {})
    if not isinstance(pattern, str) or not pattern:
        raise ObjcliError(f"{side}: 'pattern' must be a non-empty string (the split pattern), not {pattern!r}")
    try:
        regex.compile(pattern)
    except regex.error as error:
        raise ObjcliError(f"{side}: 'pattern' is not a valid regular expression ({error}); fix it") from None
    if not isinstance(specials, dict):
        raise ObjcliError(f"{side}: 'special_tokens' must be an object of text -> id, not {type(specials).__name__}")
    ranked, seen = set(ranks.values()), set()
    for text, token_id in specials.items():
        if not text or isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id <= MAX_ID:
            raise ObjcliError(
                f"{side}: special {text!r} has id {token_id!r}; give a non-empty text an integer id "
                f"from 0 to {MAX_ID:,}"
            )
        if token_id in ranked:
            raise ObjcliError(
                f"{side}: special {text!r} has id {token_id}, which the rank file gives a token; "
                "give it an id past the ranks"
            )
        if token_id in seen:
            raise ObjcliError(f"{side}: two specials share an id ({token_id}); give each its own")
        seen.add(token_id)
    for role in ("bos", "eos"):
        value = spec.get(role)
        if value is not None and (not isinstance(value, str) or value not in specials):
            raise ObjcliError(
                f"{side}: '{role}' is {value!r}, which is not one of its special_tokens; name one, or null"
            )
    return pattern, specials, spec.get("bos"), spec.get("eos")


class TiktokenTokenizer(Tokenizer):
    kind = "tiktoken"

    def __init__(self, path: str | Path):
        super().__init__(path)
        try:
            import tiktoken  # noqa: F401 (decodes, and is the reference engine)
        except ImportError:
            raise ObjcliError(
                f"tokenizer {self.path} is a tiktoken rank file; install support with: pip install 'objcli[tiktoken]'"
            ) from None
        self.ranks = _read_ranks(self.path)
        name, self.pattern, specials, self.bos, self.eos = self._settings(self.ranks)
        try:
            self.reference = TiktokenEngine(self.ranks, self.pattern, specials, name)
        except Unsupported as why:
            raise ObjcliError(f"tokenizer {self.path}: {why}; fix the pattern in its side file") from None
        self.encoding = self.reference.encoding  # decodes, whichever engine encodes
        self.specials = specials
        self.vocab_size = self.encoding.n_vocab
        self.use_engine(self.reference)  # until the run chooses (engine_probe.choose_engine)

    # ---- engines ----
    def engine_order(self) -> list[str]:
        return ["quicktok", "tiktoken", "python"]

    def reference_engine_name(self) -> str:
        return "tiktoken"

    def make_engine(self, name: str):
        if name == "quicktok":
            return QuicktokEngine(self._spec, self.sha256)
        if name == "python":
            return PythonEngine(self._spec())
        if name == "tiktoken":
            return self.reference
        raise Unsupported("a rank file is encoded by tiktoken, quicktok or python")

    def _spec(self):
        return spec_from_ranks(self.ranks, self.pattern, self.specials)

    def probe_reference(self, engine):
        return self.reference

    def special_texts(self) -> list[str]:
        return list(self.specials)

    @cached_property
    def cut_pattern(self):
        import regex

        return regex.compile(self.pattern)

    def _settings(self, ranks: dict[bytes, int]):
        side = self.path.with_name(self.path.name + ".json")
        if side.is_file():
            try:
                spec = json.loads(side.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise ObjcliError(f"{side}: not valid JSON ({error}); fix it") from None
            return (self.path.stem, *_check_side(side, spec, ranks))
        if len(ranks) not in PRESETS:
            raise ObjcliError(
                f"tokenizer {self.path}: a rank file of {len(ranks):,} tokens matches no published encoding; "
                f"give its split pattern and special tokens in {side.name}"
            )
        return PRESETS[len(ranks)]

    def side_files(self) -> dict[str, Path]:
        side = self.path.with_name(self.path.name + ".json")  # the pattern and the specials
        return {"tiktoken side file": side} if side.is_file() else {}

    @cached_property
    def sha256(self) -> str:
        """The rank file and its side file: the pattern changes the tokens as much as the ranks."""
        digest = hashlib.sha256(self.path.read_bytes())
        side = self.path.with_name(self.path.name + ".json")
        if side.is_file():
            digest.update(side.read_bytes())
        return digest.hexdigest()

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        return self.encoding.decode_batch(ids) if ids else []

    def model_id(self, piece: str) -> int | None:
        if piece in self.specials:
            return self.specials[piece]
        try:
            return self.encoding.encode_single_token(piece.encode("utf-8"))
        except KeyError:
            return None

    def model_role_id(self, role: str) -> int | None:
        name = {"bos": self.bos, "eos": self.eos}.get(role)
        return self.specials.get(name) if name else None

    def template_bos(self) -> str | None:
        return self.bos  # Llama 3 begins every text with <|begin_of_text|>; OpenAI's encodings have none

    @cached_property
    def _pieces(self) -> list[str]:
        pieces = [""] * self.vocab_size
        for token, rank in self.encoding._mergeable_ranks.items():
            pieces[rank] = token.decode("utf-8", errors="replace")
        for name, token_id in self.specials.items():
            pieces[token_id] = name
        return pieces

    def pieces(self) -> list[str]:
        return self._pieces

    @cached_property
    def _word_starts(self) -> np.ndarray:
        """A byte-level piece starts a word when its bytes start with a space."""
        return np.array([p.startswith(" ") for p in self.pieces()], dtype=bool)

    def encode_chat(self, texts: list[str], encode=None):
        if encode is not None:  # the run's engine; a token's span follows from its bytes
            encoded = encode_split_at_specials(texts, self.specials, encode, self._token_bytes)
            if encoded is not None:
                return encoded
        return encode_tiktoken(self.encoding, texts)

    def token_char_spans(self, texts, tokens, offsets):
        spans = spans_within_texts(texts, tokens, offsets, self._token_bytes)
        return super().token_char_spans(texts, tokens, offsets) if spans is None else spans

    @cached_property
    def _token_bytes(self) -> TokenBytes:
        raw = {rank: token for token, rank in self.ranks.items()}
        raw.update({token_id: name.encode("utf-8") for name, token_id in self.specials.items()})
        return TokenBytes.of(raw, self.vocab_size)

    def control_mask(self) -> np.ndarray:
        mask = np.zeros(self.vocab_size, dtype=bool)
        mask[list(self.specials.values())] = True
        return mask

    def unusable_mask(self) -> np.ndarray:
        """Ids no rank and no special holds (cl100k's gaps between its ranks and its specials)."""
        used = np.zeros(self.vocab_size, dtype=bool)
        used[list(self.encoding._mergeable_ranks.values())] = True
        return ~used & ~self.control_mask()
