"""``--shuffle-documents``: documents permuted within windows of a partition's text, keyed to the
data's position (seed, partition, window number), never to workers or timing."""

from __future__ import annotations

import operator
from collections.abc import Iterator

import numpy as np


def take(texts: list[str], indices) -> list[str]:
    """``[texts[i] for i in indices]``, gathered in C by ``itemgetter`` instead of a Python loop per
    document (``itemgetter`` of one index returns the item, not a tuple). A token store's documents
    (``inputs/token_store.StoredDocuments``) gather themselves."""
    if not isinstance(texts, list):
        return texts.take(indices)
    if len(indices) <= 1:
        return [texts[i] for i in indices]
    return list(operator.itemgetter(*indices)(texts))


def shuffled_windows(batches, window_bytes: int, batch_bytes: int, rng_of) -> Iterator[list[str]]:
    """``--shuffle-documents``: the documents of each window of about ``window_bytes`` of text (in
    partition order) permuted by a generator keyed to (seed, partition, window number), then cut
    into batches of about ``batch_bytes`` again. Memory holds one window; the result depends only on
    the data and the seed, never on workers or timing."""
    window: list = []  # batches of texts (or of a token store's documents)
    size = number = 0
    for texts in batches:
        window.append(texts)
        size += int(char_lengths(texts).sum())
        if size >= window_bytes:
            yield from _rebatched(_joined(window), rng_of(number), batch_bytes)
            window, size, number = [], 0, number + 1
    if window:
        yield from _rebatched(_joined(window), rng_of(number), batch_bytes)


def char_lengths(texts) -> np.ndarray:
    """Each document's length in characters."""
    if not isinstance(texts, list):
        return texts.chars
    return np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))


def _joined(batches: list) -> list:
    if batches and not isinstance(batches[0], list):
        return type(batches[0]).concat(batches)
    return [text for texts in batches for text in texts]


def _rebatched(window: list[str], rng, batch_bytes: int) -> Iterator[list[str]]:
    if not len(window):
        return
    texts = take(window, rng.permutation(len(window)))
    ends = np.cumsum(char_lengths(texts))
    # A batch closes after the document that takes it to batch_bytes, as the readers' batches do.
    cuts = np.unique(np.searchsorted(ends, np.arange(batch_bytes, int(ends[-1]) + batch_bytes, batch_bytes)) + 1)
    start = 0
    for cut in [*cuts[cuts < len(texts)].tolist(), len(texts)]:
        yield texts[start:cut]
        start = cut
