"""Held-out splits: ``--split validation=0.5%,test=1000`` sends each document to a split by a hash of
its text keyed to the seed, so a document lands in the same split whatever the file layout, the
workers or the order, and no document is in two splits. The rest is ``train``.

The hash is CRC-32 of the UTF-8 text, started from a seed-derived value (C code, called once per
document by ``map``), then mixed by SplitMix64 in NumPy into a uniform ``u`` in [0, 1). Each held-out
split owns an interval of ``u``: splits given as a count come first, and own the lowest values, up to
the (k + 1)-th smallest ``u`` of the corpus (found by a first pass that keeps only the smallest
values: ``smallest``); splits given as a fraction follow, each owning an interval of its width.
Copies of one text share its ``u``, so they always land in the same split (a count can be off by the
copies that straddle its cut).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from ..errors import ObjcliError

TRAIN = "train"
NAME = re.compile(r"[a-z][a-z0-9_]*")
# Any name loads back by `load_dataset(OUT)`: the output's dataset card (README.md) names each split's
# files. (`load_dataset("arrow", data_dir=OUT)`, which ignores the card, infers splits from file names
# and knows only validation, valid, dev, val, test, testing, eval and evaluation.)
SMALLEST_FRACTION = 1e-9  # below this a split takes no document of any real corpus


@dataclass(frozen=True)
class SplitSpec:
    name: str
    fraction: float | None = None  # of the documents, in expectation
    count: int | None = None  # documents, exactly (but for copies of one text)


def parse_splits(spec: str) -> list[SplitSpec]:
    """``validation=0.5%,test=1000`` -> [validation: 0.005 of the documents, test: 1,000 documents]."""
    splits: list[SplitSpec] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        split = _parse_value(name, value.strip())
        if not NAME.fullmatch(name) or name == TRAIN or name in {s.name for s in splits} or split is None:
            raise ObjcliError(
                f"--split {spec}: '{part}' must be NAME=FRACTION (validation=0.5% or test=0.001) or "
                "NAME=COUNT (test=1000) with a lower-case name other than train, each once"
            )
        splits.append(split)
    _check_loadable(spec, splits)
    if sum(s.fraction or 0 for s in splits) >= 1:
        raise ObjcliError(f"--split {spec}: the fractions sum to 1 or more; leave some documents to train")
    return splits


def _check_loadable(spec: str, splits: list[SplitSpec]) -> None:
    """A split must be named, and able to hold a document."""
    if not splits:
        raise ObjcliError(f"--split {spec}: names no split; give NAME=SHARE pairs (validation=0.5%), or drop --split")
    for split in splits:
        if split.fraction is not None and split.fraction < SMALLEST_FRACTION:
            raise ObjcliError(
                f"--split {spec}: '{split.name}' takes a share of {split.fraction:g}, which holds no "
                f"document of any real corpus; give at least {SMALLEST_FRACTION:g}, or a count"
            )


def _parse_value(name: str, value: str) -> SplitSpec | None:
    if re.fullmatch(r"\d+", value):
        return SplitSpec(name, count=int(value)) if int(value) > 0 else None
    try:
        fraction = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        return None
    return SplitSpec(name, fraction=fraction) if 0 < fraction < 1 else None


def split_names(spec: str) -> list[str]:
    """``train`` then the held-out splits, in the order given: index i of ``assign_splits``."""
    return [TRAIN, *(s.name for s in parse_splits(spec))]


def counted(spec: str) -> int:
    """Documents the count splits take together (0: none is a count, no first pass needed)."""
    return sum(s.count or 0 for s in parse_splits(spec))


def plan_bounds(spec: str, smallest_u: np.ndarray | None = None) -> list[tuple[int, float]]:
    """(index into ``split_names``, upper bound of its interval of ``u``), in increasing ``u``: count
    splits first, cut at the ``smallest_u`` of the corpus (sorted; as many as ``counted``, or all
    the documents if fewer), then fraction splits."""
    splits = parse_splits(spec)
    bounds, taken, low = [], 0, 0.0
    for index, split in enumerate(splits, start=1):
        if split.count:
            taken += split.count
            # The next value after the last one taken (1.0 if the corpus has no more documents).
            bound = float(np.nextafter(smallest_u[taken - 1], 1.0)) if taken <= len(smallest_u) else 1.0
            bounds.append((index, low := max(low, bound)))
    for index, split in enumerate(splits, start=1):
        if split.fraction:
            bounds.append((index, low := min(1.0, low + split.fraction)))
    return bounds


def uniforms(texts: list[str], seed: int) -> np.ndarray:
    """The keyed uniform ``u`` of each text."""
    start = zlib.crc32(str(seed).encode())
    if not isinstance(texts, list):  # a token store's documents: their CRC from a seeded start, from the stored one
        crc = texts.keyed_crc(start)
    else:
        crc = np.fromiter(
            map(zlib.crc32, map(str.encode, texts, repeat("utf-8"), repeat("surrogatepass")), repeat(start)),
            dtype=np.uint64,
            count=len(texts),
        )
    with np.errstate(over="ignore"):
        return (_mix(crc ^ np.uint64(seed)) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def smallest(values: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` smallest values, sorted (all of them if fewer): what a first pass keeps of each batch."""
    if len(values) > k:
        values = np.partition(values, k - 1)[:k]
    return np.sort(values)


def _mix(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: 64 well-mixed bits from each input."""
    z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def assign_splits(texts: list[str], bounds: list[tuple[int, float]], seed: int) -> np.ndarray:
    """Index into ``split_names`` for each text (0: train)."""
    u = uniforms(texts, seed)
    uppers = np.array([b for _, b in bounds])
    interval = np.searchsorted(uppers, u, side="right")  # len(bounds): past every held-out interval
    owners = np.array([0, *(i for i, _ in bounds)])
    return owners[np.where(interval < len(bounds), interval + 1, 0)]
