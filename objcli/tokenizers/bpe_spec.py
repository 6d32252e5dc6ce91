"""What a byte-level BPE ``tokenizer.json`` or tiktoken rank file means, read once into plain data.

Every byte-level BPE in use (GPT-2, Llama 3, Qwen, cl100k, o200k) is the same pipeline: an optional
NFC normalizer, one or more regular expressions that split the text into pieces, the bytes of each
piece written as GPT-2's byte characters, then merges by rank inside each piece. ``BPESpec`` holds
that pipeline; the engines (``engines.py``), the readable reference (``python_bpe.py``) and the cut
points of long texts all read it, so they agree on what the file says. A file whose pipeline has a
step outside this shape (Metaspace, byte fallback, a normalizer other than NFC) is
``Unsupported``, with the reason: those stay with the ``tokenizers`` library alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# GPT-2's split pattern: ByteLevel's own when ``use_regex`` is on.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# The published encodings' patterns, as tiktoken spells them (tiktoken_bpe.PRESETS; engines.py's scanners).
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)


class Unsupported(ValueError):
    """The file holds a step that this reading of byte-level BPE does not cover."""


def byte_characters() -> list[str]:
    """GPT-2's byte-to-character table: byte-level vocabularies are written in these characters."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


TO_BYTE_CHARS = dict(enumerate(byte_characters()))  # latin-1 character (a byte) -> its byte character
FROM_BYTE_CHARS = {ord(c): b for b, c in enumerate(byte_characters())}


@dataclass
class BPESpec:
    """A byte-level BPE: ``patterns`` split in turn (each piece of one split by the next);
    ``isolated``: text between matches is a piece too (Hugging Face's Split) or dropped (tiktoken);
    ``merges``: pair -> priority (lower merges first) or None, where any two pieces whose join is a
    token merge at that token's rank (tiktoken); ``plain_added``: added tokens that are not special,
    which Hugging Face matches in the text before anything else. Tokens are written as the file
    writes them: ``bytes`` (a rank file) or GPT-2's byte characters (``byte_chars``, a
    tokenizer.json), so that reading a 128k file converts nothing."""

    vocab: dict
    patterns: list[str]
    merges: dict | None = None
    nfc: bool = False
    add_prefix_space: bool = False
    ignore_merges: bool = True
    isolated: bool = True
    plain_added: dict[str, int] = field(default_factory=dict)
    special: dict[str, int] = field(default_factory=dict)
    byte_chars: bool = False

    @property
    def cuttable(self) -> bool:
        """Pieces of the first pattern are encoded independently of each other: a long text can be
        cut at the start of any of them (no normalizer joins across, no prefix space is added)."""
        return not (self.nfc or self.add_prefix_space or self.plain_added)

    def symbols(self, raw: bytes):
        """A piece's bytes as the vocabulary writes them."""
        return raw.decode("latin-1").translate(TO_BYTE_CHARS) if self.byte_chars else raw

    def byte_vocab(self) -> dict[bytes, int]:
        """The vocabulary as bytes (what rank engines load)."""
        if not self.byte_chars:
            return self.vocab
        return {piece.translate(FROM_BYTE_CHARS).encode("latin-1"): i for piece, i in self.vocab.items()}


def spec_from_ranks(ranks: dict[bytes, int], pattern: str, special: dict[str, int]) -> BPESpec:
    return BPESpec(vocab=ranks, patterns=[pattern], merges=None, isolated=False, special=special)


def spec_from_tokenizer_json(document: dict) -> BPESpec:
    """The pipeline of a parsed ``tokenizer.json``, or ``Unsupported`` naming the first step outside it."""
    model = document.get("model") or {}
    if model.get("type") != "BPE":
        raise Unsupported(f"model {model.get('type')!r} is not BPE")
    for key in ("byte_fallback", "continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        if model.get(key):
            raise Unsupported(f"BPE with {key}")
    nfc = _normalizer_is_nfc(document.get("normalizer"))
    patterns, add_prefix_space = _pre_tokenizer(document.get("pre_tokenizer"))
    added = {t["content"] for t in document.get("added_tokens", [])}
    vocab = {p: i for p, i in model.get("vocab", {}).items() if p not in added}
    if any(TO_BYTE_CHARS[b] not in vocab for b in range(256)):
        raise Unsupported("the vocabulary lacks some of the 256 byte tokens")
    pairs = model.get("merges", [])
    if not all(type(p) is tuple for p in pairs):
        pairs = [tuple(p.split(" ", 1)) if isinstance(p, str) else tuple(p) for p in pairs]
    merges = dict(zip(pairs, range(len(pairs))))  # a repeated pair keeps its last rank, as the library's map
    plain = [t for t in document.get("added_tokens", []) if not t.get("special")]
    if any(t.get(k) for t in plain for k in ("lstrip", "rstrip", "single_word")):
        raise Unsupported("an added token strips or matches single words")
    return BPESpec(
        vocab=vocab,
        patterns=patterns,
        merges=merges,
        nfc=nfc,
        add_prefix_space=add_prefix_space,
        ignore_merges=bool(model.get("ignore_merges")),
        plain_added={t["content"]: t["id"] for t in plain},
        special={t["content"]: t["id"] for t in document.get("added_tokens", []) if t.get("special")},
        byte_chars=True,
    )


def _normalizer_is_nfc(normalizer: dict | None) -> bool:
    steps = normalizer.get("normalizers", []) if normalizer and normalizer.get("type") == "Sequence" else [normalizer]
    kinds = [s.get("type") for s in steps if s]
    if any(k != "NFC" for k in kinds):
        raise Unsupported(f"normalizer {', '.join(kinds)}")
    return bool(kinds)


def _pre_tokenizer(pre: dict | None) -> tuple[list[str], bool]:
    steps = pre.get("pretokenizers", []) if pre and pre.get("type") == "Sequence" else [pre]
    patterns, byte_level, add_prefix_space = [], False, False
    for step in steps:
        kind = (step or {}).get("type")
        if kind == "Split":
            regex = (step.get("pattern") or {}).get("Regex")
            if regex is None or step.get("behavior") != "Isolated" or step.get("invert"):
                raise Unsupported("a Split that is not an isolated regular expression")
            patterns.append(regex)
        elif kind == "ByteLevel" and not byte_level:
            byte_level, add_prefix_space = True, bool(step.get("add_prefix_space"))
            if step.get("use_regex", True):
                patterns.append(GPT2_PATTERN)
        else:
            raise Unsupported(f"pre-tokenizer {kind}")
    if not byte_level:
        raise Unsupported("no ByteLevel pre-tokenizer: not a byte-level BPE")
    return patterns, add_prefix_space
