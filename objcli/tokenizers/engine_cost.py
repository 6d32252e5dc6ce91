"""What an engine's encode costs, measured rather than assumed from its name (``--pool auto`` asks,
``executors/pools.py``: the faster the engine, the fewer workers a thread pool feeds before the GIL
binds it).

Measured on the shipped probe text (about 0.5 MB of it, every script the tests cover): the process's
CPU time per MB, the least of a few one-thread calls (a first call may warm a pool up), so an engine
that keeps more cores busy than it was asked for (``tokenizers`` 1.0's pre-releases: 1.6-1.7 on a
one-thread call whatever ``RAYON_NUM_THREADS`` says) is charged for them. On this project's machine:
a 32k byte-level BPE on ``tokenizers`` 1.0 rc3 9.1 ms/MB, quicktok 9.6, SentencePiece 26, tiktoken
and ``tokenizers`` 0.x over 200. The answer is kept in the user's cache per engine, its version, the
tokenizer file (an engine's speed depends on the vocabulary) and objcli's version: a run measures
it once.
"""

from __future__ import annotations

import json
import math
import time
from importlib import resources

from ..storage.user_cache import cache_folder, write_quietly

CALLS = 7
BUDGET_SECONDS = 0.25  # a slower engine (the readable python one) stops early: one call at least


def _path(engine, tokenizer_sha256: str):
    from .. import __version__

    name = f"{engine.name}-{engine.version}-{tokenizer_sha256[:16]}-objcli-{__version__}.json"
    return cache_folder("engine-cost") / name


def engine_cost(engine, tokenizer_sha256: str) -> dict:
    """``{"ms_per_mb": ...}`` for ``engine`` (kept, or measured now)."""
    path = _path(engine, tokenizer_sha256)
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        value = kept.get("ms_per_mb") if isinstance(kept, dict) else None
        # A damaged entry (NaN, Infinity, a negative or a string) is measured again, as a damaged verdict is.
        if isinstance(value, float) and math.isfinite(value) and value > 0:
            return {"ms_per_mb": value}
    except (OSError, ValueError):
        pass
    cost = measure(engine)
    write_quietly(path, json.dumps({"engine": engine.name, "version": engine.version, **cost}) + "\n")
    return cost


def measure(engine) -> dict:
    """The least CPU per MB over a few one-thread calls on the probe text."""
    probe = resources.files("objcli.tokenizers").joinpath("probe.txt").read_text(encoding="utf-8")
    texts = probe.split("\n\n") * 128
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    least, started = float("inf"), time.perf_counter()
    for _ in range(CALLS):
        cpu = time.process_time()
        engine.encode_batch(texts, 1)
        least = min(least, time.process_time() - cpu)
        if time.perf_counter() - started > BUDGET_SECONDS:
            break
    return {"ms_per_mb": max(round(1000 * least / megabytes, 3), 0.001)}  # never 0: a clock's coarse tick
