"""Where one worker's time goes, stage by stage: run in a process of its own pinned to one core (so a
stage's wall time is the CPU it costs, helper threads included: the hash thread's sha256 shows in
"write", rc3's own encode thread in "encode"), the run's functions wrapped with timers.

    python stage_costs.py TOKENIZER OBJECTIVE FILE... -> one JSON line: seconds per stage

Stages: start-up (imports, the tokenizer's load, planning: until the first batch is read), read
(files to texts: JSON decoding), encode (the engine), objective (examples from tokens), pack (rows),
write (the format's writer, sha256, fsync, the commit), other (the manifest, card and renames at the
end; routing and progress between stages).
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager

SPENT: dict[str, float] = {}
_STACK: list[str] = []


@contextmanager
def stage(name: str):
    """Time spent inside, less what inner stages took (so stages nest without counting twice)."""
    started = time.perf_counter()
    _STACK.append(name)
    inner_before = SPENT.get(f"inner:{name}", 0.0)
    try:
        yield
    finally:
        _STACK.pop()
        took = time.perf_counter() - started
        inner = SPENT.get(f"inner:{name}", 0.0) - inner_before
        SPENT[name] = SPENT.get(name, 0.0) + took - inner
        if _STACK:
            SPENT[f"inner:{_STACK[-1]}"] = SPENT.get(f"inner:{_STACK[-1]}", 0.0) + took


def timed(owner, attribute: str, name: str) -> None:
    function = getattr(owner, attribute)

    def wrapper(*args, **kwargs):
        with stage(name):
            return function(*args, **kwargs)

    setattr(owner, attribute, wrapper)


def timed_generator(owner, attribute: str, name: str) -> None:
    function = getattr(owner, attribute)

    def wrapper(*args, **kwargs):
        iterator = function(*args, **kwargs)
        while True:
            with stage(name):
                try:
                    item = next(iterator)
                except StopIteration:
                    return
            yield item

    setattr(owner, attribute, wrapper)


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    started = time.perf_counter()
    tokenizer, objective, *files = sys.argv[1:]
    from objcli.__main__ import _kept_heap, _no_blas_threads

    _no_blas_threads()  # the command's own process settings: without its kept heap, a batch's
    _kept_heap()  # arrays fault their pages in anew and the packer alone costs 2-5x what a run pays
    from objcli.formats.sink import ShardSink
    from objcli.packing import PACKERS
    from objcli.recipe import config_from_values
    from objcli.run import chain, pipeline
    from objcli.tokenizers.base import Tokenizer
    from objcli.transform import transform

    first_batch = []
    timed_generator(pipeline, "documents_of_pass", "read")
    original_feed = chain.SplitChain.feed

    def feed(self, texts, batch_index, encode):
        if not first_batch:  # until here, less the first batch's reading
            first_batch.append(time.perf_counter() - started - SPENT.get("read", 0.0))
        with stage("objective"):
            return original_feed(self, texts, batch_index, encode)

    chain.SplitChain.feed = feed
    timed(chain.SplitChain, "close", "objective")
    timed(Tokenizer, "encode", "encode")
    for packer in PACKERS.values():
        timed(packer, "process", "pack")
        timed(packer, "finish", "pack")
    timed(ShardSink, "write", "write")
    timed(ShardSink, "close", "write")
    values = {"inputs": files, "tokenizer": tokenizer, "output": os.environ["STAGE_OUT"], "objective": objective}
    values["seq_len"] = 2048 if objective == "clm" else 512
    transform(config_from_values(values), workers=1, overwrite=True, pool="threads")
    total = time.perf_counter() - started
    costs = {k: v for k, v in SPENT.items() if not k.startswith("inner:")}
    costs["start-up"] = first_batch[0] if first_batch else total
    costs["other"] = total - sum(costs.values())  # the manifest, card and renames; routing, progress
    print(json.dumps({**costs, "total": total}))


if __name__ == "__main__":
    main()
