"""T5 span corruption (REFERENCE §5), vectorized over a batch of equal-length examples.

Composed of small pure functions, as SeqIO composes them: a length planner, a noise-mask
function (random compositions -> interleaved spans), and the inputs/targets functions (one
sentinel per span). Random draws come in as arguments, so a per-example reference loop fed the
same draws must give the same answer.

Worked example (T = 10, r = 0.3, mu = 1.5): num_noise = 3, num_spans = 2, num_nonnoise = 7.
Noise spans [1, 2], non-noise spans [4, 3] interleave as non, noise, non, noise:

    tokens   10 11 12 13 14 15 16 17 18 19
    noise     .  .  .  .  N  .  .  .  N  N
    inputs   10 11 12 13 <X0> 15 16 17 <X1> EOS          length T - n + s + 1 = 10
    targets  <X0> 14 <X1> 18 19 EOS                       length n + s + 1 = 6
"""

from __future__ import annotations

import numpy as np


def span_counts(length: int, noise_density: float, mean_span: float) -> tuple[int, int]:
    """(num_noise, num_spans) for one example of ``length`` >= 2 raw tokens, as T5 clips them.

    NumPy's and Python's round both round half to even, as T5 does. One addition: the span count
    is also capped by the non-noise count, where T5 would ask for more non-noise spans than there
    are non-noise tokens (only in tiny examples, e.g. 3 tokens at density 0.5).
    """
    num_noise = min(max(int(round(length * noise_density)), 1), length - 1)
    num_spans = max(int(round(num_noise / mean_span)), 1)
    return num_noise, min(num_spans, num_noise, length - num_noise)


def _lengths_for(raw_length: int, noise_density: float, mean_span: float) -> tuple[int, int]:
    num_noise = int(round(raw_length * noise_density))
    num_spans = int(round(num_noise / mean_span))
    return raw_length - num_noise + num_spans + 1, num_noise + num_spans + 1


def plan_lengths(inputs_length: int, noise_density: float, mean_span: float) -> tuple[int, int]:
    """T5's ``random_spans_helper``: the raw length T whose inputs are exactly ``inputs_length``
    (the largest such T), and the resulting targets length. 512, 0.15, 3 -> (568, 114)."""
    raw_length = inputs_length - 1
    while _lengths_for(raw_length + 1, noise_density, mean_span)[0] <= inputs_length:
        raw_length += 1
    _, targets_length = _lengths_for(raw_length, noise_density, mean_span)
    if noise_density == 0.5 and targets_length > inputs_length:
        raw_length -= 1
        targets_length -= 1
    return raw_length, targets_length


def example_lengths(raw_length: int, noise_density: float, mean_span: float) -> tuple[int, int]:
    """(inputs, targets) lengths of one corrupted example of ``raw_length`` tokens, EOS included."""
    num_noise, num_spans = span_counts(raw_length, noise_density, mean_span)
    return raw_length - num_noise + num_spans + 1, num_noise + num_spans + 1


def composition_from_keys(keys: np.ndarray, parts: int) -> np.ndarray:
    """Random compositions of ``total = keys.shape[1] + 1`` into ``parts`` positive parts, one per row.

    The gaps between the ``total`` items are ranked by their keys; the ``parts - 1`` lowest-keyed gaps
    become cuts (a uniformly random subset, as T5's shuffle of cut markers gives).
    keys [[0.9, 0.1, 0.5]] (total 4), parts 2 -> cut after item 1 -> [[2, 2]].
    """
    rows, gaps = keys.shape
    total = gaps + 1
    if parts == 1:
        return np.full((rows, 1), total, dtype=np.int64)
    cuts = np.sort(np.argpartition(keys, parts - 2, axis=1)[:, : parts - 1], axis=1) + 1
    bounds = np.concatenate(
        [np.zeros((rows, 1), dtype=np.int64), cuts, np.full((rows, 1), total, dtype=np.int64)], axis=1
    )
    return np.diff(bounds, axis=1)


def noise_mask_from_spans(nonnoise_lengths: np.ndarray, noise_lengths: np.ndarray) -> np.ndarray:
    """Interleave non-noise, noise, non-noise, noise, … into a (rows, T) boolean noise mask."""
    rows, spans = noise_lengths.shape
    interleaved = np.empty((rows, 2 * spans), dtype=np.int64)
    interleaved[:, 0::2] = nonnoise_lengths
    interleaved[:, 1::2] = noise_lengths
    ends = np.cumsum(interleaved, axis=1)
    length = int(ends[0, -1]) if rows else 0
    starts_indicator = np.zeros((rows, length + 1), dtype=np.int8)
    np.put_along_axis(starts_indicator, ends, 1, axis=1)
    span_number = np.cumsum(starts_indicator[:, :length], axis=1)
    # Span 0 is non-noise; a token is noise when it lies in an odd-numbered span.
    return (span_number % 2) == 1


def random_spans_noise_mask(
    rows: int, length: int, noise_density: float, mean_span: float, rng_noise, rng_nonnoise
) -> np.ndarray:
    """T5's ``random_spans_noise_mask`` for ``rows`` examples of ``length`` tokens at once.

    Noise and non-noise compositions draw from separate generators, so one never shifts the other.
    """
    num_noise, num_spans = span_counts(length, noise_density, mean_span)
    noise = composition_from_keys(rng_noise.random((rows, num_noise - 1)), num_spans)
    nonnoise = composition_from_keys(rng_nonnoise.random((rows, length - num_noise - 1)), num_spans)
    return noise_mask_from_spans(nonnoise, noise)


def _replace_spans(tokens: np.ndarray, span_mask: np.ndarray, sentinels: np.ndarray, eos_id: int) -> np.ndarray:
    """Keep tokens outside ``span_mask``; each span becomes one sentinel (numbered in order); append EOS."""
    rows = tokens.shape[0]
    previous = np.zeros_like(span_mask)
    previous[:, 1:] = span_mask[:, :-1]
    first_of_span = span_mask & ~previous
    span_index = np.cumsum(first_of_span, axis=1) - 1
    values = np.where(first_of_span, sentinels[np.maximum(span_index, 0)], tokens)
    keep = ~span_mask | first_of_span
    kept = values[keep].reshape(rows, -1)  # every row keeps the same count (same span counts)
    return np.concatenate([kept, np.full((rows, 1), eos_id, dtype=kept.dtype)], axis=1)


def corrupt_spans(
    tokens: np.ndarray, noise_mask: np.ndarray, sentinels: np.ndarray, eos_id: int
) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) for a batch of equal-length examples with equal span counts.

    ``sentinels[i]`` is the id of ``<extra_id_i>``. Inputs replace each noise span with a sentinel;
    targets replace each non-noise span with one, so they read ``<X0> noise_0 <X1> noise_1 … EOS``.
    """
    sentinels = np.asarray(sentinels, dtype=tokens.dtype)
    return (
        _replace_spans(tokens, noise_mask, sentinels, eos_id),
        _replace_spans(tokens, ~noise_mask, sentinels, eos_id),
    )


def plan_example(inputs_length: int, noise_density: float, mean_span: float) -> tuple[int, int] | None:
    """(raw length, targets length) whose corrupted inputs are exactly ``inputs_length`` long.

    T5's planner first (it gives every value of REFERENCE §5). Where T5's planner and its own
    span counting disagree (round(n / mu) = 0 in the planner, 1 in the mask), the largest raw
    length that does give exactly ``inputs_length`` is used; None if there is none.
    """
    raw, targets = plan_lengths(inputs_length, noise_density, mean_span)
    if raw >= 2 and example_lengths(raw, noise_density, mean_span) == (inputs_length, targets):
        return raw, targets
    for raw in range(int(inputs_length / max(1 - noise_density, 1e-3)) + 2, 1, -1):
        produced, targets = example_lengths(raw, noise_density, mean_span)
        if produced == inputs_length:
            return raw, targets
    return None
