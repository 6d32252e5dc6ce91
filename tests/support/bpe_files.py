"""Byte-level BPE files for tests and the bench, built here from real vocabularies.

- ``rank_file_to_tokenizer_json``: a tiktoken rank file as a Hugging Face ``tokenizer.json``, with
  merges derived from the ranks as ``transformers``' ``TikTokenConverter`` derives them (every split of
  a token into two vocabulary pieces, ordered by the token's rank, then the pieces' ranks), the split
  pattern and ByteLevel as Llama 3's file has them, and ``ignore_merges`` (tiktoken's whole-piece
  lookup).
- ``llama3_ranks``: Llama 3's 128,000 published ranks, from the data ``quicktok-v1``'s wheel ships.
- ``trained_byte_level``: a GPT-2-style byte-level BPE trained here by the stable library on texts.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

from objcli.tokenizers.bpe_spec import byte_characters


def read_rank_file(path: Path) -> dict[bytes, int]:
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def write_rank_file(ranks: dict[bytes, int], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(ranks.items(), key=lambda x: x[1]))
    )
    return path


def llama3_ranks() -> dict[bytes, int]:
    """Meta's Llama 3 ranks as quicktok-v1 ships them."""
    return shipped_ranks("llama3")


def shipped_ranks(name: str) -> dict[bytes, int]:
    """A published encoding's ranks as quicktok-v1 ships them (``data/<name>.vocab``: a count, then
    per token its byte length, its bytes and its rank, little-endian): llama3, cl100k, o200k."""
    import quicktok

    data = (Path(quicktok.__file__).parent / "data" / f"{name}.vocab").read_bytes()
    (count,), at, ranks = struct.unpack_from("<I", data), 4, {}
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, at)
        token = data[at + 2 : at + 2 + length]
        (rank,) = struct.unpack_from("<I", data, at + 2 + length)
        ranks[token] = rank
        at += 6 + length
    return ranks


def merges_from_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    merges = []
    for token, rank in ranks.items():
        local = [
            (ranks[token[:k]], ranks[token[k:]], token[:k], token[k:])
            for k in range(1, len(token))
            if token[:k] in ranks and token[k:] in ranks
        ]
        merges += [(rank, *m) for m in sorted(local)]
    merges.sort(key=lambda m: m[0])
    return [(m[3], m[4]) for m in merges]


def rank_file_to_tokenizer_json(
    ranks: dict[bytes, int], pattern: str, specials: dict[str, int], path: Path, normalizer: dict | None = None
) -> Path:
    table = byte_characters()

    def text(token: bytes) -> str:
        return "".join(table[b] for b in token)

    model = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": True,
        "vocab": {text(t): r for t, r in sorted(ranks.items(), key=lambda x: x[1])},
        "merges": [[text(a), text(b)] for a, b in merges_from_ranks(ranks)],
    }
    added = [
        {
            "id": i,
            "content": s,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for s, i in sorted(specials.items(), key=lambda x: x[1])
    ]
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": model,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, ensure_ascii=False))
    return path


def trained_byte_level(texts, path: Path, vocab_size: int = 2000) -> Path:
    """A GPT-2-style byte-level BPE ``tokenizer.json`` (``<|endoftext|>`` its one special token)
    trained by the stable ``tokenizers`` library on ``texts``, saved at ``path``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trained.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    trained.train_from_iterator(texts, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    trained.save(str(path))
    return path
