"""A keyed permutation of ``range(count)`` computed one index at a time, in constant memory: row ``i`` of a
shuffled run is row ``permuted(i)`` of the run in order, whoever computes it (the run writing its shards, a
reader making a plan's rows in any order).

A Feistel network of ``ROUNDS`` rounds over the smallest domain of ``2 * half`` bits holding ``count`` (``half``
at least 1), each round mixing one half into the other with SplitMix64's finalizer keyed by the round's key; a
value past ``count`` is mapped again until it falls inside (cycle walking: the domain is under four times
``count``, so under four mappings are expected). Each round is a bijection, so their composition is one, and
cycle walking keeps a bijection of the domain one of ``range(count)``. Luby and Rackoff: four rounds of
pseudorandom functions give a pseudorandom permutation; six are used."""

from __future__ import annotations

import numpy as np

ROUNDS = 6
_GOLDEN, _MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(values: np.ndarray, key: np.uint64) -> np.ndarray:
    """SplitMix64's finalizer of ``values + key``: every output bit depends on every input bit."""
    z = values + key + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _rounds(values: np.ndarray, half: int, keys: np.ndarray) -> np.ndarray:
    shift, mask = np.uint64(half), np.uint64((1 << half) - 1)
    left, right = values >> shift, values & mask
    for key in keys:
        left, right = right, left ^ (_mix(right, key) & mask)
    return (left << shift) | right


def permuted(indices: np.ndarray, count: int, keys: np.ndarray) -> np.ndarray:
    """Where each of ``indices`` (0 to ``count`` - 1) goes under the permutation ``keys`` name (int64)."""
    half = max(1, (max(count - 1, 1).bit_length() + 1) // 2)
    keys = np.asarray(keys, np.uint64)
    with np.errstate(over="ignore"):
        values = _rounds(np.asarray(indices, np.uint64), half, keys)
        outside = values >= np.uint64(count)
        while outside.any():
            values[outside] = _rounds(values[outside], half, keys)
            outside = values >= np.uint64(count)
    return values.astype(np.int64)


def permutation_keys(rng: np.random.Generator) -> np.ndarray:
    """The rounds' keys, drawn from a generator keyed to the data (``kernels/rng.derive_rng``)."""
    return rng.integers(0, 2**63, size=ROUNDS, dtype=np.int64).astype(np.uint64)
