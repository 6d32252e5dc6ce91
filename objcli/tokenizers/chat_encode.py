"""Encoding rendered conversations: special-token texts become their tokens (the template writes
``<|im_start|>``, ``[INST]``, ``<start_of_turn>`` as text), and every token keeps the character span
of the text it came from, so assistant spans map to tokens.

- ``tokenizer.json``: the ``tokenizers`` library's own encode and offsets, exactly what
  ``transformers``' ``apply_chat_template`` uses (0.x; the 1.0 pre-release reports no offsets).
- SentencePiece: the text is split at special pieces, each plain part encoded with its character
  offsets (``encode_as_offset_mapping``), as slow ``transformers`` tokenizers split at added tokens.
- tiktoken rank files: ``encode(allowed_special="all")`` and ``decode_with_offsets``.

Each returns flat (int32 tokens, int64 offsets per text, int64 char starts, int64 char ends).
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import ObjcliError


def _flat(ids: list, spans: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = np.fromiter((t for one in ids for t in one), dtype=np.int32, count=int(offsets[-1]))
    bounds = np.array([edge for one in spans for pair in one for edge in pair], dtype=np.int64).reshape(-1, 2)
    return tokens, offsets, bounds[:, 0].copy(), bounds[:, 1].copy()


def encode_with_library(library, texts: list[str]):
    """A ``tokenizers.Tokenizer`` that matches special tokens in text (its default)."""
    if not hasattr(library, "encode_batch_fast"):
        raise ObjcliError("--objective chat maps assistant text to tokens by character offsets, which the tokenizers "
                          "1.0 pre-release does not report; install the stable release: pip install 'tokenizers<1'")
    encodings = library.encode_batch(texts, add_special_tokens=False)
    return _flat([e.ids for e in encodings], [e.offsets for e in encodings])


def _special_splitter(specials: dict[str, int]) -> re.Pattern | None:
    names = sorted((s for s in specials if s), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, names))) if names else None


def encode_sentencepiece(processor, specials: dict[str, int], texts: list[str]):
    splitter = _special_splitter(specials)
    all_ids, all_spans = [], []
    for text in texts:
        ids, spans, position = [], [], 0
        for match in [*(splitter.finditer(text) if splitter else ()), None]:
            end = match.start() if match else len(text)
            if end > position:
                mapped = processor.encode_as_offset_mapping(text[position:end])  # character offsets
                ids += mapped["ids"]
                spans += [(position + a, position + b) for a, b in mapped["offsets"]]
            if match:
                ids.append(specials[match.group()])
                spans.append(match.span())
                position = match.end()
        all_ids.append(ids)
        all_spans.append(spans)
    return _flat(all_ids, all_spans)


def encode_tiktoken(encoding, texts: list[str]):
    all_ids, all_spans = [], []
    for ids in encoding.encode_batch(texts, allowed_special="all"):
        text, starts = encoding.decode_with_offsets(ids)
        ends = [*starts[1:], len(text)]
        all_ids.append(ids)
        all_spans.append(list(zip(starts, ends)))
    return _flat(all_ids, all_spans)
