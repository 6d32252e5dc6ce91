"""A small, readable byte-level BPE in pure Python: the independent reference of the parity probe.

It follows the ``BPESpec`` step by step, as the papers and the libraries define them: non-special
added tokens are cut out of the text first (Hugging Face), the rest is NFC-normalized if the file
says so, split by each pattern in turn, written as bytes, and each piece is merged pair by pair,
always the pair of lowest priority, the leftmost on a tie (Hugging Face's merges by their order in
the file; tiktoken's any two pieces whose join is a token, by that token's rank). ``ignore_merges``
(and tiktoken always) takes a piece that is itself a token whole. Pieces repeat, so their tokens
are cached. It is slow (about 1 MB/s) and is meant to be: fast engines are checked against it;
only its merge loop keeps a heap, so that no piece costs more than n log n.
"""

from __future__ import annotations

import heapq
import unicodedata

import numpy as np

from ..kernels.ragged import lengths_to_offsets
from .bpe_spec import BPESpec


class PythonBPE:
    name = "python"

    def __init__(self, spec: BPESpec):
        import regex  # the same Unicode classes (\p{L}, \s as White_Space) as the Rust engines

        self.spec = spec
        self.patterns = [regex.compile(p) for p in spec.patterns]
        added = sorted(spec.plain_added, key=len, reverse=True)  # the longest match wins
        self.added = regex.compile("|".join(map(regex.escape, added))) if added else None
        self.cache: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        start = 0
        for match in self.added.finditer(text) if self.added else ():
            ids += self._encode_segment(text[start : match.start()])
            ids.append(self.spec.plain_added[match.group()])
            start = match.end()
        return ids + self._encode_segment(text[start:])

    def encode_batch(self, texts: list[str], num_threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        encoded = [self.encode(t) for t in texts]
        offsets = lengths_to_offsets(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        return np.array([i for e in encoded for i in e], dtype=np.int32), offsets

    def _encode_segment(self, text: str) -> list[int]:
        if not text:
            return []
        if self.spec.nfc:
            text = unicodedata.normalize("NFC", text)
        if self.spec.add_prefix_space and not text.startswith(" "):
            text = " " + text
        pieces = [text]
        for pattern in self.patterns:
            pieces = [part for piece in pieces for part in self._split(pattern, piece)]
        ids = []
        for piece in pieces:
            if piece not in self.cache:
                self.cache[piece] = self._merge(self.spec.symbols(piece.encode("utf-8")))
            ids += self.cache[piece]
        return ids

    def _split(self, pattern, text: str) -> list[str]:
        """The matches, and with ``isolated`` the text between them too, in order."""
        parts, start = [], 0
        for match in pattern.finditer(text):
            if self.spec.isolated and match.start() > start:
                parts.append(text[start : match.start()])
            parts.append(match.group())
            start = match.end()
        if self.spec.isolated and start < len(text):
            parts.append(text[start:])
        return parts

    def _priority(self, left: bytes, right: bytes) -> int | None:
        if self.spec.merges is None:
            return self.spec.vocab.get(left + right)
        return self.spec.merges.get((left, right))

    def _merge(self, raw) -> list[int]:
        """BPE over one piece, written as the vocabulary writes tokens (bytes, or byte characters):
        the pair of lowest priority merges first, the leftmost on a tie. Pairs wait in a heap keyed
        by (priority, where the left part starts), so a piece of n symbols takes n log n steps (the
        scan of every pair after every merge took n squared: minutes for one 50,000-letter word)."""
        vocab = self.spec.vocab
        if (self.spec.ignore_merges or self.spec.merges is None) and raw in vocab:
            return [vocab[raw]]
        parts = [raw[i : i + 1] for i in range(len(raw))]
        after = list(range(1, len(parts) + 1))  # the next live part (len(parts): none)
        before = list(range(-1, len(parts) - 1))
        heap = [(p, i) for i in range(len(parts) - 1) if (p := self._priority(parts[i], parts[i + 1])) is not None]
        heapq.heapify(heap)
        while heap:
            priority, left = heapq.heappop(heap)
            right = after[left]
            # A pair that changed since it was queued is stale: a merged part has a new priority.
            if parts[left] is None or right >= len(parts) or self._priority(parts[left], parts[right]) != priority:
                continue
            parts[left], parts[right] = parts[left] + parts[right], None
            after[left] = after[right]
            if after[left] < len(parts):
                before[after[left]] = left
            for i in (before[left], left):
                if i >= 0 and after[i] < len(parts):
                    queued = self._priority(parts[i], parts[after[i]])
                    if queued is not None:
                        heapq.heappush(heap, (queued, i))
        return [vocab[p] for p in parts if p is not None]
