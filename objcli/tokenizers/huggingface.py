"""Hugging Face ``tokenizer.json`` (byte-level BPE and friends).

- The vocabulary, added tokens and templates are read from the file itself, so every engine and
  every release of the ``tokenizers`` library (0.x, and 1.0, which has no vocabulary methods) sees
  the same ones; the library decodes.
- Engines (``engines.py``), fastest first: ``tokenizers`` 1.0 where it is installed, quicktok where
  the split pattern is one it compiles (Llama 3, Qwen, cl100k, o200k) and the merges are rank BPE's,
  gigatoken (``gigatoken_engine.py``), ``tokenizers`` 0.x (the reference), and objcli's readable
  byte-level BPE.
- BOS/EOS/PAD/UNK come from ``tokenizer_config.json`` beside the file when it names them, else from
  the usual special-token names the model has (``<|endoftext|>``, ``</s>``, …); ``--bos-token`` and
  ``--eos-token`` override both.
- Text that spells a special token stays text (``encode_special_tokens``), as with SentencePiece.
- Documents longer than ``LONG_TEXT_CHARS`` are encoded in pieces cut at the start of a piece of the
  file's own first split pattern (``bpe_spec``), where the tokens cannot change; a file whose
  pipeline could join text across such a place (a normalizer, a prefix space, non-special added
  tokens, a pre-tokenizer other than regular expressions) is encoded whole.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import msgspec
import numpy as np

from ..errors import ObjcliError
from .base import Tokenizer
from .bpe_spec import FROM_BYTE_CHARS, BPESpec, Unsupported, spec_from_tokenizer_json
from .chat_encode import (
    TokenBytes,
    encode_split_at_specials,
    encode_with_library,
    spans_from_token_bytes,
    spans_within_texts,
)
from .engines import Missing, PythonEngine, QuicktokEngine, TokenizersEngine, is_prerelease, tokenizers_version
from .gigatoken_engine import GigatokenEngine
from .library_reads import read_by_library_before, remember_read_by_library

ROLE_NAMES = {
    "bos": ("<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>"),
    "eos": ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|im_end|>"),
    "pad": ("<pad>", "<|pad|>", "[PAD]"),
    "unk": ("<unk>", "[UNK]"),
}


class _Model(msgspec.Struct):
    """What objcli reads of a tokenizer.json's model; its merges (a third of a 128k file) stay
    undecoded until an engine needs them."""

    type: str | None = None
    vocab: dict[str, int] | list = {}  # BPE and WordPiece: piece -> id; Unigram: [piece, score] by id
    merges: msgspec.Raw = msgspec.Raw(b"[]")
    ignore_merges: bool | None = None
    byte_fallback: bool | None = None
    dropout: float | None = None
    continuing_subword_prefix: str | None = None
    end_of_word_suffix: str | None = None


def _read_document(data: bytes) -> tuple[dict, bytes]:
    """The file as a dict (its model's merges left out) and the merges' undecoded JSON."""
    top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    document = {key: msgspec.json.decode(raw) for key, raw in top.items() if key != "model"}
    model = msgspec.json.decode(top["model"], type=_Model)
    fields = {f: getattr(model, f) for f in model.__struct_fields__ if f != "merges"}
    if isinstance(model.vocab, list):
        fields["vocab"] = {entry[0]: i for i, entry in enumerate(model.vocab)}
    return {**document, "model": fields}, bytes(model.merges)


class HuggingFaceTokenizer(Tokenizer):
    kind = "huggingface"

    def __init__(self, path: str | Path):
        super().__init__(path)
        try:
            self.document, self._merges = _read_document(self.path.read_bytes())
            model = self.document["model"]
            self.ids = {
                **model.get("vocab", {}),
                **{t["content"]: t["id"] for t in self.document.get("added_tokens", [])},
            }
        # msgspec before 0.23 raises UnicodeDecodeError on a string of invalid UTF-8, 0.23 DecodeError.
        except (msgspec.DecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as error:
            raise ObjcliError(
                f"tokenizer {self.path}: neither a SentencePiece model nor a valid tokenizer.json ({error})"
            ) from None
        if not isinstance(self.ids, dict) or not all(isinstance(i, int) for i in self.ids.values()):
            raise ObjcliError(
                f"tokenizer {self.path}: neither a SentencePiece model nor a valid tokenizer.json "
                "(its vocabulary is not a table of ids)"
            )
        self.vocab_size = max(self.ids.values(), default=-1) + 1
        if not self.vocab_size:  # every text would encode to nothing: rows of end-of-document tokens only
            raise ObjcliError(
                f"tokenizer {self.path}: its vocabulary is empty; pass a trained tokenizer.json "
                "(or train one with 'objcli train-tokenizer')"
            )
        self.add_bos = False
        self.config = self._read_config()
        try:
            self._library_version = tokenizers_version()
        except Missing as why:
            raise ObjcliError(f"tokenizer {self.path} is a Hugging Face tokenizer.json; {why}") from None
        if not read_by_library_before(self.sha256, self._library_version):
            self.library_engine  # noqa: B018 - the library checks the whole file, once for its bytes

    @property
    def engine(self):
        """What encodes: the run's choice (engine_probe.choose_engine), until then the library."""
        return self._engine if self._engine is not None else self.library_engine

    @engine.setter
    def engine(self, engine) -> None:
        self._engine = engine

    @cached_property
    def library_engine(self) -> TokenizersEngine:
        """The stable library: it decodes whichever engine encodes, and is the probe's reference. It
        reads the file when first needed (0.05 s of a run's start-up on a 32k file): at the file's
        first opening (its check: a file it refuses is one line), then only where something needs it."""
        try:
            engine = TokenizersEngine(self.path)  # the library is installed: the opening checked
        except Exception as error:  # the library raises a bare Exception for malformed files
            raise ObjcliError(
                f"tokenizer {self.path}: neither a SentencePiece model nor a valid tokenizer.json ({error})"
            ) from None
        remember_read_by_library(self.sha256, engine.version)
        return engine

    @cached_property
    def _chat_library(self):
        """A second library instance that reads special-token texts as the tokens (the engines
        keep them text), as ``transformers`` tokenizes a rendered chat."""
        import tokenizers

        return tokenizers.Tokenizer.from_file(str(self.path))

    def encode_chat(self, texts: list[str], encode=None):
        """With the run's engine (``encode``) where offsets follow from the tokens' bytes, else
        the library's own encode and offsets."""
        if encode is not None and self._offsets_from_bytes:
            if getattr(self.engine, "matches_specials", False):  # the library matches them in one call
                encoded = spans_from_token_bytes(texts, *encode(texts, specials=True), self._token_bytes)
            else:
                encoded = encode_split_at_specials(texts, self._added_ids, encode, self._token_bytes)
            if encoded is not None:
                return encoded
        return encode_with_library(self._chat_library, texts)

    def token_char_spans(self, texts, tokens, offsets):
        spans = spans_within_texts(texts, tokens, offsets, self._token_bytes) if self._offsets_from_bytes else None
        return super().token_char_spans(texts, tokens, offsets) if spans is None else spans

    @cached_property
    def _added_ids(self) -> dict[str, int]:
        return {t["content"]: t["id"] for t in self.document.get("added_tokens", [])}

    @cached_property
    def _token_bytes(self) -> TokenBytes:
        """Each id's bytes: a byte-level piece has one character per byte."""
        raw = {
            token_id: piece.translate(FROM_BYTE_CHARS).encode("latin-1", "replace")  # one byte a character
            for piece, token_id in self.document["model"].get("vocab", {}).items()
        }
        raw.update({token_id: content.encode("utf-8") for content, token_id in self._added_ids.items()})
        return TokenBytes.of(raw, self.vocab_size)

    @cached_property
    def _offsets_from_bytes(self) -> bool:
        """Whether a token's character span follows from its bytes: byte-level BPE, no normalizer,
        no prefix space, added tokens matched as written, no post-processor that trims offsets."""
        document, model = self.document, self.document["model"]
        pre = document.get("pre_tokenizer") or {}
        steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
        post = document.get("post_processor") or {}
        posts = post.get("processors", []) if post.get("type") == "Sequence" else [post]
        return (
            model.get("type") == "BPE"
            and not document.get("normalizer")
            and not any(model.get(k) for k in ("byte_fallback", "continuing_subword_prefix", "end_of_word_suffix"))
            and {s.get("type") for s in steps} <= {"ByteLevel", "Split"}
            and "ByteLevel" in {s.get("type") for s in steps}
            and not any(s.get("add_prefix_space") for s in steps)
            and not any(p.get("trim_offsets") for p in posts)
            and not any(t.get(k) for t in document.get("added_tokens", []) for k in ("lstrip", "rstrip", "single_word"))
        )

    @cached_property
    def full_document(self) -> dict:
        """The document with the model's merges (decoded only when an engine needs them)."""
        try:  # pairs as two-item lists (tokenizers >= 0.20): typed, three times faster to decode
            merges = msgspec.json.decode(self._merges, type=list[tuple[str, str]])
        except msgspec.ValidationError:  # "left right" strings (older files)
            merges = msgspec.json.decode(self._merges)
        return {**self.document, "model": {**self.document["model"], "merges": merges}}

    @cached_property
    def _spec_or_reason(self) -> BPESpec | Unsupported:
        try:
            return spec_from_tokenizer_json(self.full_document)
        except Unsupported as why:
            return why

    @property
    def spec(self) -> BPESpec | None:
        return self._spec_or_reason if isinstance(self._spec_or_reason, BPESpec) else None

    def side_files(self) -> dict[str, Path]:
        config = self.path.with_name("tokenizer_config.json")  # BOS/EOS/PAD names, add_bos_token
        return {"tokenizer config": config} if config.is_file() else {}

    def _read_config(self) -> dict:
        config_path = self.path.with_name("tokenizer_config.json")
        if not config_path.is_file():
            return {}
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ObjcliError(f"{config_path}: not valid JSON ({error}); fix or remove it") from None
        self.add_bos = config.get("add_bos_token") is True
        roles = {}
        for role in ROLE_NAMES:
            value = config.get(f"{role}_token")
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str):
                roles[role] = value
        return roles

    # ---- engines ----
    @property
    def _library_is_reference(self) -> bool:
        """The stable release is the reference; a pre-release (1.0, installed by hand) is probed."""
        return not is_prerelease(self._library_version)

    def engine_order(self) -> list[str]:
        if not self._library_is_reference:  # tokenizers 1.0, installed by hand, outruns the others here
            return ["tokenizers", "quicktok", "gigatoken", "python"]
        return ["quicktok", "gigatoken", "tokenizers", "python"]

    def reference_engine_name(self) -> str:
        return "tokenizers" if self._library_is_reference else "python"

    def deferred_reference(self):
        from .. import __version__
        from .engines import DeferredEngine  # here: the import line above is at its width

        name = self.reference_engine_name()  # the library, or objcli's readable engine (a spec of 128k: 0.18 s)
        version = self._library_version if name == "tokenizers" else __version__
        return DeferredEngine(name, version, lambda: self.make_engine(name), f"tokenizer {self.path}")

    def make_engine(self, name: str):
        if name == "tokenizers":
            return self.library_engine
        if name not in ("quicktok", "gigatoken", "python"):
            raise Unsupported("a tokenizer.json is encoded by tokenizers, quicktok, gigatoken or python")
        if name == "gigatoken":
            return GigatokenEngine(self.path)
        if name == "quicktok":
            return QuicktokEngine(self._checked_spec, self.sha256)
        return PythonEngine(self._checked_spec())

    def _checked_spec(self) -> BPESpec:
        if self.spec is None:
            raise self._spec_or_reason
        return self.spec

    def probe_reference(self, engine):
        if engine.name != "tokenizers" and self._library_is_reference:
            return self.library_engine
        try:
            return None if engine.name == "python" else self.make_engine("python")
        except Unsupported:
            return None

    def special_texts(self) -> list[str]:
        return [t["content"] for t in self.document.get("added_tokens", [])]

    @cached_property
    def cut_pattern(self):
        if self.spec is None or not self.spec.cuttable:
            return None
        import regex

        return regex.compile(self.spec.patterns[0])

    # ---- vocabulary ----
    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        return self.library_engine.decode(ids) if ids else []

    def model_id(self, piece: str) -> int | None:
        return self.ids.get(piece)

    def model_role_id(self, role: str) -> int | None:
        for name in (self.config[role],) if role in self.config else ROLE_NAMES[role]:
            if name in self.ids:
                return self.ids[name]
        return None

    def template_bos(self) -> str | None:
        """The special token that the post-processor's single-text template starts with (Llama 3's
        ``<|begin_of_text|>``), or the BOS of a ``tokenizer_config.json`` with ``add_bos_token``."""
        post = self.document.get("post_processor") or {}
        steps = post.get("processors", []) if post.get("type") == "Sequence" else [post]
        for step in steps:
            first = (step.get("single") or [{}])[0] if step.get("type") == "TemplateProcessing" else {}
            if "SpecialToken" in first:
                return first["SpecialToken"]["id"]
        if self.add_bos and self.model_role_id("bos") is not None:
            return self.piece(self.model_role_id("bos"))
        return None

    def pieces(self) -> list[str]:
        return self._pieces

    @cached_property
    def _pieces(self) -> list[str]:
        pieces = [""] * self.vocab_size
        for piece, token_id in self.ids.items():
            if 0 <= token_id < self.vocab_size:
                pieces[token_id] = piece
        return pieces

    def control_mask(self) -> np.ndarray:
        mask = np.zeros(self.vocab_size, dtype=bool)
        for token in self.document.get("added_tokens", []):
            if token.get("special") and 0 <= token["id"] < self.vocab_size:
                mask[token["id"]] = True
        return mask

    def unusable_mask(self) -> np.ndarray:
        mask = np.zeros(self.vocab_size, dtype=bool)
        unk = self.model_role_id("unk")
        if unk is not None:
            mask[unk] = True
        return mask
