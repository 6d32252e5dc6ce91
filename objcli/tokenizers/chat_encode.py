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
from ..kernels.ragged import gather_ranges, lengths_to_offsets


def _flat(ids: list, spans: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    offsets = lengths_to_offsets(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)))
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


def special_pattern(texts, capture: bool = False) -> re.Pattern | None:
    """Special-token texts as one pattern, longest first (leftmost-longest, as the library's added
    vocabulary matches them); ``capture``: one group, for ``split`` to keep them."""
    names = sorted({t for t in texts if t}, key=len, reverse=True)
    alternatives = "|".join(map(re.escape, names))
    return re.compile(f"({alternatives})" if capture else alternatives) if names else None


def encode_sentencepiece(processor, specials: dict[str, int], texts: list[str]):
    splitter = special_pattern(specials, capture=True)
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


def encode_split_at_specials(texts: list[str], specials: dict[str, int], encode, token_bytes: np.ndarray):
    """The fast path for byte-level BPE: split each text at special-token texts (leftmost-longest,
    as the library's added vocabulary matches them), encode every plain part in one batched call
    of the run's engine, and derive each token's character span from the byte lengths of the
    tokens (a byte-level token is its bytes; nothing normalizes the text). Returns None where the
    tokens' bytes do not add up to a text's UTF-8 (the caller falls back to the library)."""
    splitter = special_pattern(specials, capture=True)
    plain: list[str] = []  # every text's plain parts, in order (empty ones too): one engine call
    names: list[str] = []  # every text's special-token texts, in order
    counts = []
    for text in texts:
        parts = splitter.split(text) if splitter else [text]
        plain += parts[0::2]
        names += parts[1::2]
        counts.append(len(parts) // 2)
    part_tokens, part_offsets = encode(plain)
    # A text is items plain, special, plain, …, plain: 2k + 1 of them for k specials.
    per_text = 2 * np.array(counts, np.int64) + 1
    item_offsets = lengths_to_offsets(per_text)
    is_special = (np.arange(item_offsets[-1]) - np.repeat(item_offsets[:-1], per_text)) % 2 == 1
    plain_index = np.cumsum(~is_special, dtype=np.int64) - 1
    special_index = np.cumsum(is_special, dtype=np.int64) - 1
    special_ids = np.array([specials[name] for name in names], np.int32)
    pool = np.concatenate([part_tokens, special_ids])
    part_lengths = np.diff(part_offsets)
    starts = np.where(is_special, len(part_tokens) + special_index, part_offsets[:-1][plain_index])
    lengths = np.where(is_special, 1, part_lengths[plain_index])
    tokens = gather_ranges(pool, starts, lengths).astype(np.int32)
    # Every text has at least one item, so each reduceat range is non-empty.
    offsets = lengths_to_offsets(np.add.reduceat(lengths, item_offsets[:-1])) if texts else np.zeros(1, np.int64)
    sizes = token_bytes[tokens]
    before = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)  # bytes before each token, in the joined texts
    joined = "".join(texts).encode("utf-8", "surrogatepass")
    utf8 = np.array([len(t) if t.isascii() else len(t.encode("utf-8", "surrogatepass")) for t in texts], np.int64)
    if not np.array_equal(before[offsets[1:]] - before[offsets[:-1]], utf8):
        return None
    byte_starts, byte_ends = before[:-1], before[1:]
    owner = np.repeat(np.arange(len(texts)), np.diff(offsets))
    text_start = lengths_to_offsets(utf8)[:-1][owner]
    if len(joined) == sum(map(len, texts)):  # ASCII: a byte is a character
        return tokens, offsets, byte_starts - text_start, byte_ends - text_start
    lead = (np.frombuffer(joined, dtype=np.uint8) & 0xC0) != 0x80
    leads_before = np.concatenate([[0], np.cumsum(lead, dtype=np.int64)])  # characters before byte p (a bool cumsum without dtype is 10x slower)
    text_chars = leads_before[lengths_to_offsets(utf8)[:-1]]
    char_starts = leads_before[byte_starts + 1] - 1 - text_chars[owner]  # the character holding the first byte
    char_ends = leads_before[byte_ends] - text_chars[owner]
    return tokens, offsets, char_starts, char_ends
