"""``--pool auto`` weighs the engine's cost, measured (CPU per MB of the probe text) and kept per
engine, version and tokenizer: the faster the engine, the fewer workers a thread pool feeds before
the part of the pipeline that holds the GIL binds it, and the sooner processes take over."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from paths import SAMPLE_DATA
from runs import prerelease_env

from objcli.executors import pools
from objcli.objectives.supply import DOCUMENTS_READ
from objcli.tokenizers import engine_cost

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class _Clock:
    """The clocks engine_cost reads, advanced by the fake engines alone: a cost is the seconds an engine
    says it spends, not a measured time a busy machine would move."""

    now = 0.0

    @classmethod
    def process_time(cls) -> float:
        return cls.now

    perf_counter = process_time


class _Engine:
    """Spends ``seconds`` of CPU a call, on the fake clock."""

    version = "1"

    def __init__(self, name: str, seconds: float):
        self.name, self.seconds, self.calls = name, seconds, 0

    def encode_batch(self, texts, num_threads):
        self.calls += 1
        _Clock.now += self.seconds
        return np.zeros(0, np.int32), np.zeros(len(texts) + 1, np.int64)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_cost, "time", _Clock)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_cost_is_measured_once_and_kept(cache):
    slow, fast = _Engine("slow", 0.02), _Engine("fast", 0.002)
    costs = engine_cost.engine_cost(slow, "ab" * 32), engine_cost.engine_cost(fast, "ab" * 32)
    assert costs[0]["ms_per_mb"] == pytest.approx(10 * costs[1]["ms_per_mb"], rel=1e-3) and costs[1]["ms_per_mb"] > 0
    kept = json.loads(next((cache / "objcli" / "engine-cost").glob("slow-1-*.json")).read_text())
    assert kept["ms_per_mb"] == costs[0]["ms_per_mb"]
    calls = slow.calls
    assert engine_cost.engine_cost(slow, "ab" * 32) == costs[0] and slow.calls == calls  # not measured again
    assert engine_cost.engine_cost(slow, "cd" * 32) and slow.calls > calls  # another tokenizer: measured


@pytest.mark.parametrize(("engine_ms", "bound"), [(2.0, 3), (9.1, 4), (26.0, 8), (260.0, 8), (0.0, 2)])
def test_a_thread_pool_feeds_fewer_workers_the_faster_the_engine(engine_ms, bound):
    assert pools.threads_bound(engine_ms) == bound


class _Tokenizer:
    def __init__(self, engine, path):
        self.engine, self.path, self.sha256 = engine, path, "ef" * 32


class _Objective:
    tokenizes_itself = False


def test_auto_weighs_the_engine_and_hints_the_next_run(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(pools, "_cores", lambda: 16)
    monkeypatch.setattr(engine_cost, "measure", lambda engine: {"ms_per_mb": {"fast": 9.1, "slow": 26.0}[engine.name]})
    (tmp_path / "tok.json").write_text("{}")
    source = str(tmp_path / "tok.json")
    fast, slow = _Tokenizer(_Engine("fast", 0), source), _Tokenizer(_Engine("slow", 0), source)
    assert pools.choose_pool("auto", _Objective(), fast, 2, source) == "threads"  # two: never bound
    assert pools.choose_pool("auto", _Objective(), fast, 4, source) == "threads"
    assert not pools.will_fork(DOCUMENTS_READ, "auto", 6, 8, source)
    assert pools.choose_pool("auto", _Objective(), fast, 6, source) == "processes"
    assert pools.will_fork(DOCUMENTS_READ, "auto", 6, 8, source)  # the fork server starts early next time
    assert pools.choose_pool("auto", _Objective(), slow, 8, source) == "threads"
    assert pools.choose_pool("auto", _Objective(), slow, 9, source) == "processes"  # past THREADS_AT_MOST
    assert pools.choose_pool("threads", _Objective(), fast, 6, source) == "threads"  # asked for
    monkeypatch.setattr(pools, "_cores", lambda: 2)
    assert pools.choose_pool("auto", _Objective(), fast, 6, source) == "threads"  # two cores: two busy
    (tmp_path / "tok.json").write_text("{ }")  # the file changed: no hint
    monkeypatch.setattr(pools, "_cores", lambda: 16)
    assert not pools.will_fork(DOCUMENTS_READ, "auto", 6, 8, source)


@pytest.mark.slow  # a timing, on the real engines
def test_the_pinned_pre_release_costs_a_fraction_of_the_stable_library(tmp_path):
    """Measured on the real engines (the bench's 32k byte-level BPE is 9 ms/MB on rc3): 1.0's
    pre-release encodes the sample tokenizer.json at a fraction of 0.x's CPU per MB."""
    code = (
        "import sys; from objcli.tokenizers import open_tokenizer; "
        "from objcli.tokenizers.engine_cost import measure; "
        "print(measure(open_tokenizer(sys.argv[1]).library_engine)['ms_per_mb'])"
    )
    tokenizer = str(SAMPLE_DATA / "llama-style" / "tokenizer.json")
    runs = [
        subprocess.run([sys.executable, "-c", code, tokenizer], capture_output=True, text=True, env=env, check=True)
        for env in (dict(os.environ), prerelease_env())
    ]
    stable, fast = (float(r.stdout.split()[-1]) for r in runs)
    assert fast * 5 < stable, (stable, fast)


@pytest.mark.parametrize("damaged", ["NaN", "Infinity", "-Infinity", "-3.0", "0.0", '"12"', "null", "[1]"])
def test_a_damaged_kept_cost_is_measured_again(cache, damaged):
    engine = _Engine("kept", 0.002)
    measured = engine_cost.engine_cost(engine, "ab" * 32)
    path = next((cache / "objcli" / "engine-cost").glob("kept-1-*.json"))
    path.write_text('{"engine": "kept", "version": "1", "ms_per_mb": ' + damaged + "}\n")
    calls = engine.calls
    again = engine_cost.engine_cost(engine, "ab" * 32)
    assert engine.calls > calls and 0 < again["ms_per_mb"] < float("inf")
    assert json.loads(path.read_text())["ms_per_mb"] == again["ms_per_mb"]  # the entry is mended
    assert pools.threads_bound(again["ms_per_mb"]) >= 2 and measured


@pytest.mark.parametrize("value", ["", "relative/cache"])
def test_an_empty_or_relative_xdg_cache_home_is_ignored_as_the_spec_says(value, tmp_path):
    """objcli's cache never lands in the folder a command runs from (its .json files would be read
    as inputs by the next run there): $HOME/.cache instead."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (work / "p.jsonl").write_text("".join((SAMPLE_DATA / "prose.jsonl").read_text().splitlines(keepends=True)[:20]))
    env = {**os.environ, "XDG_CACHE_HOME": value, "HOME": str(home)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "objcli",
            "transform",
            "p.jsonl",
            "-t",
            str(SAMPLE_DATA / "llama-style"),
            "--seq-len",
            "64",
            "-o",
            str(tmp_path / "o"),
            "--workers",
            "3",
        ],  # fmt: skip
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in work.iterdir()) == ["p.jsonl"]  # nothing written where it ran
    assert (home / ".cache" / "objcli").is_dir()


@pytest.mark.parametrize("cores", [2, 16])
def test_a_run_that_encodes_nothing_forks_its_many_partitions(cache, tmp_path, monkeypatch, cores):
    """A token store's run is objcli's own NumPy work alone, most of it holding the GIL: from
    TOKEN_RUN_PROCESSES_FROM partitions processes, whatever the engine (never measured: it encodes nothing),
    and the fork server starts early for it; fewer partitions, one worker or one core threads, even with
    tokenizers 0.x (whose batches a run that encodes spreads over processes)."""
    monkeypatch.setattr(pools, "_cores", lambda: cores)
    monkeypatch.setattr(engine_cost, "measure", lambda engine: pytest.fail("a run that encodes nothing measured"))
    many = pools.TOKEN_RUN_PROCESSES_FROM
    tokenizer = _Tokenizer(_Engine("slow", 0), str(tmp_path / "tok.json"))
    assert pools.choose_pool("auto", _Objective(), tokenizer, 2, token_partitions=many) == "processes"
    assert pools.will_fork(DOCUMENTS_READ, "auto", 2, many, token_partitions=many)
    assert pools.choose_pool("auto", _Objective(), tokenizer, 2, token_partitions=many - 1) == "threads"
    assert not pools.will_fork(DOCUMENTS_READ, "auto", 2, many - 1, token_partitions=many - 1)
    # Fewer partitions on many cores: threads, its engine not weighed (nor made: a tokenizer.json's library read)
    assert pools.choose_pool("auto", _Objective(), tokenizer, 6, token_partitions=many - 1) == "threads"
    assert not pools.will_fork(DOCUMENTS_READ, "auto", 2, many)  # a run that encodes: no token partitions
    assert not pools.will_fork(DOCUMENTS_READ, "auto", 1, many, token_partitions=many)
    assert pools.choose_pool("threads", _Objective(), tokenizer, 2, token_partitions=many) == "threads"  # asked
    legacy = _Tokenizer(_Engine("slow", 0), str(tmp_path / "tok.json"))
    legacy.engine.legacy = True  # tokenizers 0.x: its batches scale better apart, where it encodes them
    assert pools.choose_pool("auto", _Objective(), legacy, 2) == "processes"
    assert pools.choose_pool("auto", _Objective(), legacy, 2, token_partitions=many - 1) == "threads"
    monkeypatch.setattr(pools, "_cores", lambda: 1)
    assert pools.choose_pool("auto", _Objective(), tokenizer, 2, token_partitions=many) == "threads"
    assert not pools.will_fork(DOCUMENTS_READ, "auto", 2, many, token_partitions=many)


def test_the_partitions_of_a_run_that_encodes_nothing():
    """Every partition a store's or tokenized ids, an objective that encodes nothing of its own: counted (a
    stream, stdin, is never pooled), a chat store's twice, UL2's as many as fork; a text partition, or FIM, which
    encodes the pieces it cuts: none."""
    from types import SimpleNamespace

    from objcli.inputs.pieces import InputKind
    from objcli.objectives.chat_options import ChatOptions
    from objcli.objectives.fim import FimOptions
    from objcli.objectives.mlm import MlmOptions
    from objcli.objectives.ul2 import Ul2Options

    def part(kind, stream=False):
        return SimpleNamespace(input=SimpleNamespace(kind=kind, is_stream=stream))

    mlm = SimpleNamespace(objective="mlm", objective_options=MlmOptions())
    fim = SimpleNamespace(objective="fim", objective_options=FimOptions(fim_level="context"))
    stores = [part(InputKind.STORE), part(InputKind.TOKENS), part(InputKind.TOKENS, stream=True)]
    assert pools.token_partitions(mlm, stores) == 2
    assert pools.token_partitions(mlm, [*stores, part(InputKind.TEXT)]) == 0
    assert pools.token_partitions(fim, stores) == 0
    chat = SimpleNamespace(objective="chat", objective_options=ChatOptions())
    assert pools.token_partitions(chat, stores[:1]) == pools.RECORD_PARTITION_WEIGHT
    ul2 = SimpleNamespace(objective="ul2", objective_options=Ul2Options())  # its batches' work holds the GIL
    assert pools.token_partitions(ul2, stores[:1]) == pools.TOKEN_RUN_PROCESSES_FROM
