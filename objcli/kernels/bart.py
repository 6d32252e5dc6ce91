"""BART noising (fairseq ``DenoisingDataset`` semantics, REFERENCE §9), vectorized over a batch.

Examples are ragged (flat tokens + offsets, no BOS/EOS: they are added around the result).
Steps, in fairseq's order: sentence permutation -> span masking -> insertion -> rotation.

Span masking: the budget is ``ceil(word_starts * mask)`` *words*. Span lengths (in words) are drawn
from Poisson(lambda) until they cover the budget, the last one trimmed so the lengths sum to it
exactly (fairseq's rule); a length-0 span inserts one mask. Spans are placed at word starts, in a
random order, on non-overlapping words (a uniform random arrangement): every example masks exactly
its budget. (fairseq picks span starts independently, so its spans may overlap and mask less.)
``replace_length`` 1: a span becomes one ``<mask>``; 0: it is deleted; -1: every token becomes
``<mask>``. A masked span becomes a random token instead with probability ``mask_random``.

Worked example: words [a][b c][d][e] (tokens a b c d e), spans: 2 words at word 1 -> tokens b c d,
replace_length 1 -> [a <mask> e].
"""

from __future__ import annotations

import numpy as np

from .ragged import item_index, lengths_to_offsets


def rank_within(groups: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Rank of each element among those of its group, by increasing key in [0, 1).

    One stable sort of ``group + key`` (group ids are small non-negative integers, keys uniform
    floats); in that order the groups are consecutive, so each group starts where the counts of the
    groups before it end.
    """
    order = np.argsort(groups + keys, kind="stable")
    counts = np.bincount(groups)
    group_start = np.repeat(lengths_to_offsets(counts)[:-1], counts)
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[order] = np.arange(len(keys)) - group_start
    return ranks


def permute_sentences(
    sentence_offsets: np.ndarray, example_sentences: np.ndarray, ratio: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """New sentence order: in each example, ``ceil(n * ratio)`` sentences chosen at random trade
    places among themselves. Returns (token starts, token lengths) of the sentences in new order."""
    count = len(sentence_offsets) - 1
    example_of = item_index(example_sentences)
    per_example = np.diff(example_sentences)
    chosen = rank_within(example_of, rng.random(count)) < np.ceil(per_example * ratio)[example_of]
    # Chosen slots (in text order) receive the chosen sentences in a random order, per example.
    slots = np.flatnonzero(chosen)
    shuffled = slots[np.lexsort((rng.random(len(slots)), example_of[slots]))]
    order = np.arange(count)
    order[slots] = shuffled
    return sentence_offsets[:-1][order], np.diff(sentence_offsets)[order]


def poisson_spans(budgets: np.ndarray, lam: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Span lengths per example, drawn from Poisson(lam) until they cover the budget, the last
    trimmed to fit: (lengths, example of each span); the lengths of an example sum to its budget."""
    examples = len(budgets)
    if examples == 0 or budgets.max(initial=0) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    width = int(budgets.max() / max(lam, 0.25) * 2) + 8
    draws = rng.poisson(lam, size=(examples, width))
    while np.any(draws.sum(axis=1) < budgets):
        draws = np.concatenate([draws, rng.poisson(lam, size=(examples, width))], axis=1)
    totals = np.cumsum(draws, axis=1)
    spans = np.where(budgets > 0, np.sum(totals < budgets[:, None], axis=1) + 1, 0)
    last = np.maximum(spans - 1, 0)
    before = np.where(last > 0, np.take_along_axis(totals, np.maximum(last - 1, 0)[:, None], axis=1)[:, 0], 0)
    rows = np.flatnonzero(spans > 0)
    draws[rows, last[rows]] = budgets[rows] - before[rows]
    keep = np.arange(draws.shape[1])[None, :] < spans[:, None]
    return draws[keep].astype(np.int64), np.repeat(np.arange(examples), spans)


def place_spans(
    span_lengths: np.ndarray, span_example: np.ndarray, words: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Start word of each span: the spans of an example in a random order, on non-overlapping
    words, every arrangement equally likely (k span markers shuffled among free + k slots)."""
    examples = len(words)
    spans = np.bincount(span_example, minlength=examples)
    budget = np.bincount(span_example, weights=span_lengths, minlength=examples).astype(np.int64)
    slots = words - budget + spans
    slot_example = np.repeat(np.arange(examples), slots)
    chosen = rank_within(slot_example, rng.random(len(slot_example))) < spans[slot_example]
    slot_index = np.arange(len(slot_example)) - np.repeat(lengths_to_offsets(slots)[:-1], slots)
    marker_slots = slot_index[chosen]  # per example, in slot order
    order = np.lexsort((rng.random(len(span_lengths)), span_example))  # spans of an example, shuffled
    lengths_in_order = span_lengths[order]
    group_start = np.repeat(lengths_to_offsets(spans)[:-1], spans)
    rank = np.arange(len(order)) - group_start
    exclusive = np.cumsum(lengths_in_order) - lengths_in_order
    masked_before = exclusive - exclusive[group_start] if len(order) else exclusive
    starts = np.empty(len(span_lengths), dtype=np.int64)
    starts[order] = marker_slots - rank + masked_before  # free words before + masked words before
    return starts


def mask_spans(
    tokens: np.ndarray,
    offsets: np.ndarray,
    word_start: np.ndarray,
    span_lengths: np.ndarray,
    span_example: np.ndarray,
    span_start_word: np.ndarray,
    replacement: np.ndarray,
    replace_length: int,
    random_span: np.ndarray | None = None,
    token_random: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Apply placed spans; ``word_start`` must be set on the first token of every example.

    ``replacement`` holds each span's token (``<mask>``, or a random id for a random span). With
    ``replace_length`` -1 every token of a span becomes ``<mask>``, or, in a ``random_span``, the
    random id ``token_random`` holds at its position.
    """
    examples = len(offsets) - 1
    example_of = item_index(offsets)
    first, end = _span_bounds(word_start, offsets, example_of, span_example, span_start_word, span_lengths)
    real = span_lengths > 0
    values = tokens.copy()
    change = np.zeros(len(tokens) + 1, dtype=np.int64)  # difference array over affected tokens
    if replace_length == -1:  # token masking: every token of a span is replaced
        span_number = np.arange(1, len(span_lengths) + 1)[real]  # spans never overlap: a running
        np.add.at(change, first[real], span_number)  # sum marks each token with its span + 1
        np.add.at(change, end[real], -span_number)
        span_at = np.cumsum(change[:-1]) - 1
        covered = span_at >= 0
        span = span_at[covered]
        values[covered] = np.where(random_span[span], token_random[covered], replacement[span])
        keep = np.ones(len(tokens), dtype=bool)
    else:  # 1: the first token becomes the replacement, the rest go; 0: all go
        np.add.at(change, first[real] + replace_length, 1)
        np.add.at(change, end[real], -1)
        if replace_length == 1:
            values[first[real]] = replacement[real]
        keep = np.cumsum(change[:-1]) <= 0
    inserts = ~real  # a length-0 span inserts its replacement before its word
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    out = np.insert(values[keep], kept_before[first[inserts]], replacement[inserts])
    new_lengths = np.bincount(example_of[keep], minlength=examples) + np.bincount(
        span_example[inserts], minlength=examples
    )
    return out, lengths_to_offsets(new_lengths)


def _span_bounds(word_start, offsets, example_of, span_example, span_start_word, span_lengths):
    """Each span's first token and the token after it: the first token of its start word and of the
    word its length reaches (or its example's end)."""
    word_positions = np.flatnonzero(word_start)
    words = np.bincount(example_of[word_positions], minlength=len(offsets) - 1)
    word_base = lengths_to_offsets(words)[:-1]
    padded_positions = np.concatenate([word_positions, [0]])

    def token_of(word_index, example):  # first token of a word, or the example's end
        inside = word_index < words[example]
        return np.where(
            inside, padded_positions[np.where(inside, word_base[example] + word_index, -1)], offsets[1:][example]
        )

    return token_of(span_start_word, span_example), token_of(span_start_word + span_lengths, span_example)


def insert_noise(
    tokens: np.ndarray,
    offsets: np.ndarray,
    ratio: float,
    mask_id: int,
    random_ratio: float,
    random_pool: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """fairseq's insertion noise: ``ceil(n * ratio)`` new tokens per example at random positions,
    ``<mask>`` or (with ``random_ratio``) random tokens."""
    lengths = np.diff(offsets)
    added = np.ceil(lengths * ratio).astype(np.int64)
    total = lengths + added
    example_of = np.repeat(np.arange(len(lengths)), total)
    noise = rank_within(example_of, rng.random(len(example_of))) < added[example_of]
    out = np.empty(len(example_of), dtype=tokens.dtype)
    out[~noise] = tokens
    count = int(noise.sum())
    out[noise] = np.where(
        rng.random(count) < random_ratio, random_pool[rng.integers(len(random_pool), size=count)], mask_id
    )
    return out, lengths_to_offsets(total)


def rotate(
    tokens: np.ndarray, offsets: np.ndarray, ratio: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """With probability ``ratio`` an example starts at a token chosen uniformly (BOS/EOS are added
    around it afterwards, so they stay in place): fairseq's rolling noise."""
    lengths = np.diff(offsets)
    rotated = rng.random(len(lengths)) < ratio
    shift = np.where(rotated, rng.integers(0, lengths + 1), 0)
    position = np.arange(len(tokens)) - np.repeat(offsets[:-1], lengths)
    source = np.repeat(offsets[:-1], lengths) + (position + np.repeat(shift, lengths)) % np.maximum(
        np.repeat(lengths, lengths), 1
    )
    return tokens[source], rotated
