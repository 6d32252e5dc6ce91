"""gigatoken instances a thread of its own (issue 73): an instance shared by two threads encodes at half
the speed or less, so a thread that finds none idle makes one, kept for later calls; the ids are the
same whichever instance encodes, and a process forked from one that built an instance takes it ready."""

from __future__ import annotations

import json
import multiprocessing
import threading

import numpy as np
import pytest
from bpe_files import trained_byte_level
from runs import SAMPLE

pytest.importorskip("gigatoken")

from objcli.tokenizers.gigatoken_engine import GigatokenEngine  # noqa: E402


@pytest.fixture(scope="module")
def engine_file(tmp_path_factory):
    texts = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").open()]
    return trained_byte_level(texts, tmp_path_factory.mktemp("bpe") / "tokenizer.json", vocab_size=600)


def _counted(engine: GigatokenEngine) -> list:
    made = []
    make = engine._make

    def counted():
        made.append(1)
        return make()

    engine._make = counted
    return made


TEXTS = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").open()][:200]


def test_a_thread_that_finds_the_instance_busy_makes_one_and_it_is_kept(engine_file):
    engine = GigatokenEngine(engine_file)
    expected = engine.encode_batch(TEXTS, 1)
    made = _counted(engine)
    got = {}
    with engine._instance() as busy:  # another thread is encoding with the one instance there is
        worker = threading.Thread(target=lambda: got.update(ids=engine.encode_batch(TEXTS, 1)))
        worker.start()
        worker.join()
        assert busy is engine.library
    assert len(made) == 1  # the worker made its own
    assert all(np.array_equal(a, b) for a, b in zip(got["ids"], expected))
    results = []
    threads = [threading.Thread(target=lambda: results.append(engine.encode_batch(TEXTS, 1))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1  # two instances idle now: none made again
    assert all(np.array_equal(a, b) for r in results for a, b in zip(r, expected))


def _encode_in_child(engine, queue) -> None:
    made = _counted(engine)
    tokens, offsets = engine.encode_batch(TEXTS, 1)
    queue.put((len(made), tokens.tolist(), offsets.tolist()))


def test_a_forked_process_takes_the_instance_built_before_the_fork(engine_file):
    engine = GigatokenEngine(engine_file)
    tokens, offsets = engine.encode_batch(TEXTS, 1)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_encode_in_child, args=(engine, queue))
    child.start()
    made, child_tokens, child_offsets = queue.get(timeout=120)
    child.join()
    assert made == 0 and child_tokens == tokens.tolist() and child_offsets == offsets.tolist()
