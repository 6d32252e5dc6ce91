"""Whether an engine runs threads of its own inside one encode call, measured rather than assumed
from its name (``--pool auto`` asks, ``executors/pools.py``).

An engine asked for one thread that still keeps more than one core busy (``tokenizers`` 1.0's
pre-releases: 1.6 to 2.0 cores a call on this project's 2-core machine, whatever
``RAYON_NUM_THREADS`` says) gives Python threads of one process nothing to share out: they queue on
the same engine threads (two threads encoded at 1.0-1.3x one). One engine per worker process is
then the way to every core. The measure: the process's CPU time over the wall time of a call on
one thread, the least of a few calls (a first call may warm a pool up); 1.4 or more is an engine
with threads of its own (SentencePiece, tiktoken, quicktok and ``tokenizers`` 0.x measure 1.0 to 1.1).

The answer is kept in the user's cache per engine, engine version and objcli version (a property of
the library, not of a tokenizer file), so a run measures it once.
"""

from __future__ import annotations

import json
import time
from importlib import resources

from .user_cache import cache_folder, write_quietly

OWN_THREADS_AT_LEAST = 1.4  # cores a one-thread call keeps busy
CALLS = 7
BUDGET_SECONDS = 0.25  # a slower engine (the readable python one) stops early: one call at least


def _path(engine):
    from .. import __version__

    return cache_folder("engine-threads") / f"{engine.name}-{engine.version}-objcli-{__version__}.json"


def runs_own_threads(engine) -> bool:
    """Whether ``engine`` keeps more than one core busy on a one-thread call (kept, or measured now)."""
    path = _path(engine)
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(kept, dict) and isinstance(kept.get("cores_per_call"), float):
            return kept["cores_per_call"] >= OWN_THREADS_AT_LEAST
    except (OSError, ValueError):
        pass
    cores = cores_per_call(engine)
    write_quietly(path, json.dumps({"engine": engine.name, "version": engine.version, "cores_per_call": cores}) + "\n")
    return cores >= OWN_THREADS_AT_LEAST


def cores_per_call(engine) -> float:
    """The least ratio of process CPU time to wall time over a few one-thread calls on the shipped
    probe text (about 0.5 MB of it)."""
    probe = resources.files("objcli.tokenizers").joinpath("probe.txt").read_text(encoding="utf-8")
    texts = probe.split("\n\n") * 128
    least, started = float("inf"), time.perf_counter()
    for _ in range(CALLS):
        wall, cpu = time.perf_counter(), time.process_time()
        engine.encode_batch(texts, 1)
        seconds = time.perf_counter() - wall
        least = min(least, (time.process_time() - cpu) / max(seconds, 1e-9))
        if time.perf_counter() - started > BUDGET_SECONDS:
            break
    return round(least, 3)
