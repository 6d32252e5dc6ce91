"""Encoding rendered conversations: special-token texts become their tokens (the template writes
``<|im_start|>``, ``[INST]``, ``<start_of_turn>`` as text), and every token keeps the character span
of the text it came from, so assistant spans map to tokens.

- ``tokenizer.json``: the ``tokenizers`` library's own encode and offsets, exactly what
  ``transformers``' ``apply_chat_template`` uses (0.x; the 1.0 pre-release reports no offsets).
- SentencePiece: the text is split at special pieces, each plain part encoded with its character
  offsets (``encode_as_offset_mapping``), as slow ``transformers`` tokenizers split at added tokens.
- tiktoken rank files: ``encode(allowed_special="all")`` and ``decode_with_offsets``.

Each returns flat (int32 tokens, int64 offsets per text, int64 char starts, int64 char ends), the
character spans in the batch's coordinate: positions in the texts joined end to end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels.ragged import gather_ranges, lengths_to_offsets


def _flat(texts: list[str], ids: list, spans: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-text token lists and character spans as flat arrays, the spans moved into the batch's
    coordinate (the texts joined end to end): each text's spans shifted by where the text starts."""
    offsets = lengths_to_offsets(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)))
    tokens = np.fromiter((t for one in ids for t in one), dtype=np.int32, count=int(offsets[-1]))
    bounds = np.array([edge for one in spans for pair in one for edge in pair], dtype=np.int64).reshape(-1, 2)
    text_starts = lengths_to_offsets(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))[:-1]
    shift = np.repeat(text_starts, np.diff(offsets))
    return tokens, offsets, bounds[:, 0] + shift, bounds[:, 1] + shift


def encode_with_library(library, texts: list[str]):
    """A ``tokenizers.Tokenizer`` that matches special tokens in text (its default)."""
    if not hasattr(library, "encode_batch_fast"):
        raise ObjcliError(
            "--objective chat maps assistant text to tokens by character offsets, which the tokenizers "
            "1.0 pre-release does not report; install the stable release: pip install 'tokenizers<1'"
        )
    encodings = library.encode_batch(texts, add_special_tokens=False)
    return _flat(texts, [e.ids for e in encodings], [e.offsets for e in encodings])


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
    return _flat(texts, all_ids, all_spans)


def encode_tiktoken(encoding, texts: list[str]):
    all_ids, all_spans = [], []
    for ids in encoding.encode_batch(texts, allowed_special="all"):
        text, starts = encoding.decode_with_offsets(ids)
        ends = [*starts[1:], len(text)]
        all_ids.append(ids)
        all_spans.append(list(zip(starts, ends)))
    return _flat(texts, all_ids, all_spans)


@dataclass(frozen=True)
class TokenBytes:
    """What the chat path needs of each id's bytes: their number, the characters that start in
    them (UTF-8 lead bytes), and whether the first byte starts one."""

    sizes: np.ndarray  # int64
    characters: np.ndarray  # int64
    lead_first: np.ndarray  # bool

    @classmethod
    def of(cls, byte_strings: dict[int, bytes], vocab_size: int) -> TokenBytes:
        ids = np.fromiter(byte_strings, dtype=np.int64, count=len(byte_strings))
        joined = np.frombuffer(b"".join(byte_strings.values()), dtype=np.uint8)
        offsets = lengths_to_offsets(np.fromiter(map(len, byte_strings.values()), np.int64, len(byte_strings)))
        leads_before = lengths_to_offsets((joined & 0xC0) != 0x80)
        sizes, characters = np.zeros(vocab_size, np.int64), np.zeros(vocab_size, np.int64)
        lead_first = np.ones(vocab_size, bool)
        sizes[ids], characters[ids] = np.diff(offsets), np.diff(leads_before[offsets])
        lead_first[ids] = leads_before[np.minimum(offsets[:-1] + 1, len(joined))] > leads_before[offsets[:-1]]
        lead_first[ids[sizes[ids] == 0]] = True
        return cls(sizes, characters, lead_first)


def encode_split_at_specials(texts: list[str], specials: dict[str, int], encode, table: TokenBytes):
    """The fast path for byte-level BPE: split each text at special-token texts (leftmost-longest,
    as the library's added vocabulary matches them), encode every plain part in one batched call
    of the run's engine, and derive each token's character span from its bytes
    (``spans_from_token_bytes``; None: the caller falls back to the library). For engines that
    cannot read special-token texts as the tokens themselves (``matches_specials``)."""
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
    return spans_from_token_bytes(texts, tokens, offsets, table)


def spans_within_texts(texts: list[str], tokens: np.ndarray, offsets: np.ndarray, table: TokenBytes):
    """``spans_from_token_bytes``' (starts, ends), counted in each token's own text (int32); None where
    the tokens' bytes do not add up to the texts'."""
    spans = spans_from_token_bytes(texts, tokens, offsets, table)
    if spans is None:
        return None
    shift = np.repeat(lengths_to_offsets(np.fromiter(map(len, texts), np.int64, len(texts)))[:-1], np.diff(offsets))
    return (spans[2] - shift).astype(np.int32), (spans[3] - shift).astype(np.int32)


def spans_from_token_bytes(texts: list[str], tokens: np.ndarray, offsets: np.ndarray, table: TokenBytes):
    """Each token's character span, from its bytes: a byte-level token is its bytes and nothing
    normalizes the text. None where the tokens' bytes do not add up to a text's UTF-8."""
    bytes_before = lengths_to_offsets(table.sizes[tokens])
    utf8 = np.array([len(t) if t.isascii() else len(t.encode("utf-8", "surrogatepass")) for t in texts], np.int64)
    if not np.array_equal(bytes_before[offsets[1:]] - bytes_before[offsets[:-1]], utf8):
        return None
    # The tokens' bytes are the texts' bytes, so characters are counted token by token (one per
    # UTF-8 lead byte in the token); a token that starts inside a character belongs to it. The
    # count runs over the texts joined end to end: the batch's coordinate.
    chars_before = lengths_to_offsets(table.characters[tokens])
    return tokens, offsets, chars_before[:-1] - (~table.lead_first[tokens]), chars_before[1:]
