"""Held-out splits: ``--split validation=0.5%,test=0.1%`` sends each document to a split by a hash of
its text keyed to the seed, so a document lands in the same split whatever the file layout, the
workers or the order, and no document is in two splits. The rest is ``train``.

The hash is CRC-32 of the UTF-8 text, started from a seed-derived value (C code, called once per
document by ``map``), then mixed by SplitMix64 in NumPy into a uniform in [0, 1).
"""

from __future__ import annotations

import re
import zlib
from itertools import repeat

import numpy as np

from .errors import ObjcliError

TRAIN = "train"
NAME = re.compile(r"[a-z][a-z0-9_]*")


def parse_splits(spec: str) -> list[tuple[str, float]]:
    """``validation=0.5%,test=0.001`` -> [("validation", 0.005), ("test", 0.001)]."""
    splits: list[tuple[str, float]] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        try:
            fraction = float(value[:-1]) / 100 if value.endswith("%") else float(value)
        except ValueError:
            fraction = -1.0
        if not NAME.fullmatch(name) or name == TRAIN or name in dict(splits) or not 0 < fraction < 1:
            raise ObjcliError(f"--split {spec}: '{part}' must be NAME=FRACTION (validation=0.5% or test=0.001) with a "
                              "lower-case name other than train, each once")
        splits.append((name, fraction))
    if sum(f for _, f in splits) >= 1:
        raise ObjcliError(f"--split {spec}: the fractions sum to 1 or more; leave some documents to train")
    return splits


def split_names(spec: str) -> list[str]:
    return [TRAIN, *(name for name, _ in parse_splits(spec))]


def _mix(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: 64 well-mixed bits from each input."""
    z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def assign_splits(texts: list[str], splits: list[tuple[str, float]], seed: int) -> np.ndarray:
    """Index into ``[train, *splits]`` for each text."""
    start = zlib.crc32(str(seed).encode())
    crc = np.fromiter(map(zlib.crc32, map(str.encode, texts, repeat("utf-8"), repeat("surrogatepass")), repeat(start)),
                      dtype=np.uint64, count=len(texts))
    with np.errstate(over="ignore"):
        uniform = (_mix(crc ^ np.uint64(seed)) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    bounds = np.cumsum([f for _, f in splits])
    held_out = np.searchsorted(bounds, uniform, side="right")  # 0 for the first split, len(splits): none
    return np.where(held_out < len(splits), held_out + 1, 0)
