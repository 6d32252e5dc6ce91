"""T5 span corruption (REFERENCE §5), vectorized over a batch of equal-length examples.

Composed of small pure functions, as SeqIO composes them: a length calculator, a noise-mask
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


def t5_raw_lengths(inputs_length: int, noise_density: float, mean_span: float) -> tuple[int, int]:
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
    become cuts (a uniformly random subset, as T5's shuffle of cut markers gives); equal keys rank
    by position. keys [[9, 1, 5]] (total 4), parts 2 -> cut after item 1 -> [[2, 2]].
    """
    rows, gaps = keys.shape
    total = gaps + 1
    if parts == 1:
        return np.full((rows, 1), total, dtype=np.int64)
    # The (parts - 1)-th smallest key of each row; everything at or below it is a cut. A partition
    # of the values is several times faster than an argpartition.
    threshold = np.partition(keys, parts - 2, axis=1)[:, parts - 2, None]
    chosen = keys <= threshold
    tied_rows = np.flatnonzero(chosen.sum(axis=1) != parts - 1)
    if len(tied_rows):  # equal keys at the threshold: keep the first ones by position
        order = np.argsort(keys[tied_rows], axis=1, kind="stable")[:, : parts - 1]
        chosen[tied_rows] = False
        chosen[tied_rows[:, None], order] = True
    cuts = np.nonzero(chosen)[1].reshape(rows, parts - 1) + 1
    bounds = np.concatenate(
        [np.zeros((rows, 1), dtype=np.int64), cuts, np.full((rows, 1), total, dtype=np.int64)], axis=1
    )
    return np.diff(bounds, axis=1)


def random_keys(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Uniform uint32 keys straight from the bit generator: a few times faster than floats, and a
    tie inside a row of 500 keys is a 1-in-35,000 event (handled exactly when it happens)."""
    count = shape[0] * shape[1]
    raw = rng.bit_generator.random_raw((count + 1) // 2).astype("<u8", copy=False)
    return raw.view("<u4")[:count].reshape(shape)


def noise_mask_from_spans(nonnoise_lengths: np.ndarray, noise_lengths: np.ndarray) -> np.ndarray:
    """Interleave non-noise, noise, non-noise, noise, … into a (rows, T) boolean noise mask."""
    rows, spans = noise_lengths.shape
    interleaved = np.empty((rows, 2 * spans), dtype=np.int64)
    interleaved[:, 0::2] = nonnoise_lengths
    interleaved[:, 1::2] = noise_lengths
    # Span 0 is non-noise: odd-numbered spans are noise.
    is_noise_span = np.tile(np.array([False, True]), rows * spans)
    return np.repeat(is_noise_span, interleaved.ravel()).reshape(rows, -1)


def random_spans(
    rows: int, length: int, noise_density: float, mean_span: float, rng_noise, rng_nonnoise
) -> tuple[np.ndarray, np.ndarray]:
    """T5's ``random_spans_noise_mask`` as span lengths: (non-noise lengths, noise lengths), each
    (rows, num_spans), for ``rows`` examples of ``length`` tokens at once.

    Noise and non-noise compositions draw from separate generators, so one never shifts the other.
    """
    num_noise, num_spans = span_counts(length, noise_density, mean_span)
    noise = composition_from_keys(random_keys(rng_noise, (rows, num_noise - 1)), num_spans)
    nonnoise = composition_from_keys(random_keys(rng_nonnoise, (rows, length - num_noise - 1)), num_spans)
    return nonnoise, noise


def random_spans_noise_mask(
    rows: int, length: int, noise_density: float, mean_span: float, rng_noise, rng_nonnoise
) -> np.ndarray:
    """The (rows, length) boolean noise mask of :func:`random_spans`."""
    return noise_mask_from_spans(*random_spans(rows, length, noise_density, mean_span, rng_noise, rng_nonnoise))


def _with_sentinels(
    kept: np.ndarray, span_lengths: np.ndarray, sentinels: np.ndarray, eos_id: int, sentinel_first: bool
) -> np.ndarray:
    """Rows of ``kept`` tokens cut into spans of ``span_lengths``, with sentinel j placed before
    (``sentinel_first``) or after span j, then EOS."""
    rows, spans = span_lengths.shape
    width = kept.shape[1] + spans + 1
    ends = np.cumsum(span_lengths, axis=1)
    positions = (ends - span_lengths if sentinel_first else ends) + np.arange(spans)
    out = np.empty((rows, width), dtype=kept.dtype)
    is_token = np.ones((rows, width), dtype=bool)
    np.put_along_axis(is_token, positions, False, axis=1)
    is_token[:, -1] = False
    out[is_token] = kept.ravel()
    np.put_along_axis(out, positions, np.broadcast_to(sentinels[:spans], (rows, spans)), axis=1)
    out[:, -1] = eos_id
    return out


def corrupt_spans(
    tokens: np.ndarray, nonnoise_lengths: np.ndarray, noise_lengths: np.ndarray, sentinels: np.ndarray, eos_id: int
) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) for a batch of equal-length examples with equal span counts.

    ``sentinels[i]`` is the id of ``<extra_id_i>``. Inputs replace each noise span with a sentinel;
    targets replace each non-noise span with one, so they read ``<X0> noise_0 <X1> noise_1 … EOS``.
    Every example starts with non-noise and ends with noise, so non-noise span j is followed by
    sentinel j in the inputs, and noise span j is preceded by it in the targets.
    """
    rows = len(tokens)
    mask = noise_mask_from_spans(nonnoise_lengths, noise_lengths)
    sentinels = np.asarray(sentinels, dtype=tokens.dtype)
    inputs = _with_sentinels(tokens[~mask].reshape(rows, -1), nonnoise_lengths, sentinels, eos_id, False)
    targets = _with_sentinels(tokens[mask].reshape(rows, -1), noise_lengths, sentinels, eos_id, True)
    return inputs, targets


def raw_lengths_for(inputs_length: int, noise_density: float, mean_span: float) -> tuple[int, int] | None:
    """(raw length, targets length) whose corrupted inputs are exactly ``inputs_length`` long.

    T5's length calculation first (it gives every value of REFERENCE §5). Where T5's calculation and its own
    span counting disagree (round(n / mu) = 0 in the calculation, 1 in the mask), the largest raw
    length that does give exactly ``inputs_length`` is used; None if there is none.
    """
    raw, targets = t5_raw_lengths(inputs_length, noise_density, mean_span)
    if raw >= 2 and example_lengths(raw, noise_density, mean_span) == (inputs_length, targets):
        return raw, targets
    for raw in range(int(inputs_length / max(1 - noise_density, 1e-3)) + 2, 1, -1):
        produced, targets = example_lengths(raw, noise_density, mean_span)
        if produced == inputs_length:
            return raw, targets
    return None
