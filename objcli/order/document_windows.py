"""``--shuffle-documents``: documents permuted within windows of a partition's text, keyed to the
data's position (seed, partition, window number), never to workers or timing."""

from __future__ import annotations

import operator
from collections.abc import Iterator

import numpy as np


def take(texts: list[str], indices) -> list[str]:
    """``[texts[i] for i in indices]``, gathered in C by ``itemgetter`` instead of a Python loop per
    document (``itemgetter`` of one index returns the item, not a tuple)."""
    if len(indices) <= 1:
        return [texts[i] for i in indices]
    return list(operator.itemgetter(*indices)(texts))


def shuffled_windows(batches, window_bytes: int, batch_bytes: int, rng_of) -> Iterator[list[str]]:
    """``--shuffle-documents``: the documents of each window of about ``window_bytes`` of text (in
    partition order) permuted by a generator keyed to (seed, partition, window number), then cut
    into batches of about ``batch_bytes`` again. Memory holds one window; the result depends only on
    the data and the seed, never on workers or timing."""
    window: list[str] = []
    size = number = 0
    for texts in batches:
        window += texts
        size += sum(map(len, texts))
        if size >= window_bytes:
            yield from _rebatched(window, rng_of(number), batch_bytes)
            window, size, number = [], 0, number + 1
    if window:
        yield from _rebatched(window, rng_of(number), batch_bytes)


def _rebatched(window: list[str], rng, batch_bytes: int) -> Iterator[list[str]]:
    texts = take(window, rng.permutation(len(window)))
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    # A batch closes after the document that takes it to batch_bytes, as the readers' batches do.
    cuts = np.unique(np.searchsorted(ends, np.arange(batch_bytes, int(ends[-1]) + batch_bytes, batch_bytes)) + 1)
    start = 0
    for cut in [*cuts[cuts < len(texts)].tolist(), len(texts)]:
        yield texts[start:cut]
        start = cut
