"""Randomness keyed to the position of the data, never to processing order.

Every generator is derived from (seed, partition, …) through ``numpy.random.SeedSequence``, so
the same input gives the same draws whatever the number of workers, the executor, or a resume.
A stochastic step passes its own ``stream`` name so that adding a draw to one step never shifts
another step's stream.
"""

from __future__ import annotations

import zlib

import numpy as np


def derive_rng(seed: int, partition: int, batch: int, stream: str) -> np.random.Generator:
    stream_key = zlib.crc32(stream.encode("utf-8"))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, partition, batch, stream_key])))
