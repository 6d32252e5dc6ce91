"""Hugging Face ``tokenizer.json`` (byte-level BPE and friends), through the ``tokenizers`` library.

- BOS/EOS/PAD/UNK come from ``tokenizer_config.json`` beside the file when it names them, else from
  the usual special-token names the model has (``<|endoftext|>``, ``</s>``, …); ``--bos-token`` and
  ``--eos-token`` override both.
- Text that spells a special token stays text (``encode_special_tokens``), as with SentencePiece.
- Batches are encoded with the library's own thread pool, sized to objcli's per-worker thread
  count (``RAYON_NUM_THREADS``) so processes and threads never oversubscribe the cores.
- Documents longer than ``LONG_TEXT_CHARS`` are encoded in pieces (``Tokenizer.encode``), because
  some BPE implementations slow down sharply on very long inputs. Each cut is placed just before a
  whitespace run holding a line break, so the next piece starts with the whole run. The tokens are
  the same as for the whole text whenever the pre-tokenizer never joins non-space text with the
  whitespace that follows it (the GPT-2 and Llama-3 byte-level patterns and Metaspace do not); a
  document with no line break in 200,000 characters is cut at the limit, which can change the
  tokens at that one point.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from .base import Tokenizer, cut_before_line_break, flatten_arrays

ROLE_NAMES = {
    "bos": ("<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>"),
    "eos": ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|im_end|>"),
    "pad": ("<pad>", "<|pad|>", "[PAD]"),
    "unk": ("<unk>", "[UNK]"),
}


class HuggingFaceTokenizer(Tokenizer):
    kind = "huggingface"

    def __init__(self, path: str | Path):
        super().__init__(path)
        try:
            from tokenizers import Tokenizer as LibraryTokenizer
        except ImportError:
            raise ObjcliError(
                f"tokenizer {self.path} is a Hugging Face tokenizer.json; install support with: pip install 'objcli[hf]'"
            ) from None
        try:
            self.library = LibraryTokenizer.from_file(str(self.path))
        except Exception as error:  # the library raises a bare Exception for malformed files
            raise ObjcliError(
                f"tokenizer {self.path}: neither a SentencePiece model nor a valid tokenizer.json ({error})"
            ) from None
        self.library.encode_special_tokens = True
        self.vocab_size = self.library.get_vocab_size(with_added_tokens=True)
        self.add_bos = False
        self.config = self._read_config()
        self._pieces: list[str] | None = None
        self._threads: int | None = None

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

    def _encode_texts(self, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray]:
        if self._threads is None:  # the library sizes its pool on first use
            os.environ.setdefault("RAYON_NUM_THREADS", str(num_threads))
            self._threads = num_threads
        encodings = self.library.encode_batch_fast(texts, add_special_tokens=False)
        return flatten_arrays([np.asarray(e.ids, dtype=np.int32) for e in encodings])

    def cut_point(self, window: str) -> int:
        return cut_before_line_break(window)

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        return self.library.decode_batch(ids, skip_special_tokens=False) if ids else []

    def model_id(self, piece: str) -> int | None:
        return self.library.token_to_id(piece)

    def model_role_id(self, role: str) -> int | None:
        for name in ((self.config[role],) if role in self.config else ROLE_NAMES[role]):
            token_id = self.library.token_to_id(name)
            if token_id is not None:
                return token_id
        return None

    def template_bos(self) -> str | None:
        """The special token that the post-processor's single-text template starts with (Llama 3's
        ``<|begin_of_text|>``), or the BOS of a ``tokenizer_config.json`` with ``add_bos_token``."""
        post = json.loads(self.library.to_str()).get("post_processor") or {}
        steps = post.get("processors", []) if post.get("type") == "Sequence" else [post]
        for step in steps:
            first = (step.get("single") or [{}])[0] if step.get("type") == "TemplateProcessing" else {}
            if "SpecialToken" in first:
                return first["SpecialToken"]["id"]
        if self.add_bos and self.model_role_id("bos") is not None:
            return self.piece(self.model_role_id("bos"))
        return None

    def pieces(self) -> list[str]:
        if self._pieces is None:
            self._pieces = [self.library.id_to_token(i) or "" for i in range(self.vocab_size)]
        return self._pieces

    def control_mask(self) -> np.ndarray:
        mask = np.zeros(self.vocab_size, dtype=bool)
        for token_id, token in self.library.get_added_tokens_decoder().items():
            if token.special and token_id < self.vocab_size:
                mask[token_id] = True
        return mask

    def unusable_mask(self) -> np.ndarray:
        mask = np.zeros(self.vocab_size, dtype=bool)
        unk = self.model_role_id("unk")
        if unk is not None:
            mask[unk] = True
        return mask
