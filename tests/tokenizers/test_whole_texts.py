"""Engines that take long texts whole (issue 62): each engine that says ``whole_texts`` is linear in
memory on one long text, measured here, so it never needs the cutting of tokenizers/cutting.py. On
texts of many pieces of the split pattern (prose, code, base64 without line breaks, mixed scripts),
the memory a character stays bounded. Time is no test's to assert (a busy machine measured 12.1x for
10x the text, issue 72): the CPU time of 10x the text is reported, and ``make bench`` measures the
engines on the long-documents shape. (A text that is all
one piece, one repeated character or unspaced CJK, is encoded whole by every engine: no place to cut
exists in it, so it decides nothing here.) Engines that are not linear in memory are cut: the stable
``tokenizers`` 0.x (its encodings hold about 120 bytes a character) and SentencePiece's lattice."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from runs import ROOT, SAMPLE, prerelease_env

pytest.importorskip("tokenizers")

# One process per engine: CPU seconds (min of 3, each a fresh engine) and peak RSS growth for 400 K and
# 4 M characters of each kind; the peak is reset before each call (/proc/self/clear_refs), so it is the call's own.
MEASURE = r"""
import base64, json, sys, time
sys.path.insert(0, sys.argv[3])
from objcli.tokenizers import open_tokenizer

def rss(key):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key)) * 1024

def kinds(n):
    prose = "".join(json.loads(line)["text"] + "\n" for line in open(sys.argv[4] + "/prose.jsonl"))
    code = "".join(json.loads(line)["text"] + "\n" for line in open(sys.argv[4] + "/code.jsonl"))
    dense = base64.b64encode(open(sys.executable, "rb").read(1 << 22)).decode()
    mixed = "".join(f"{w} Слово 単語 كلمة {i} " for i, w in enumerate(prose.split()[:50_000]))
    texts = {"prose": prose, "code": code, "dense": dense, "mixed": mixed}
    return {k: (t * (n // len(t) + 1))[:n] for k, t in texts.items()}

tokenizer = open_tokenizer(sys.argv[1])
out = {}
for n in (400_000, 4_000_000):
    for kind, text in kinds(n).items():
        cpu = 1e9
        for _ in range(3):
            engine = tokenizer.make_engine(sys.argv[2])  # a fresh one: no cache of words already seen
            engine.encode_batch(["warm up"], 1)
            open("/proc/self/clear_refs", "w").write("5")
            before = rss("VmRSS")
            started = time.process_time()
            engine.encode_batch([text], 1)
            cpu = min(cpu, time.process_time() - started)
            grew = rss("VmHWM") - before
        out.setdefault(kind, []).append((cpu, grew))
print(json.dumps(out))
"""


def _engines() -> list:
    """(engine, tokenizer file, environment) for every engine that says whole_texts: gigatoken and the
    pre-release tokenizers 1.0 on a tokenizer.json, quicktok and tiktoken on Llama 3's rank file."""
    bpe = SAMPLE / "llama-style" / "tokenizer.json"
    return [
        pytest.param("gigatoken", bpe, None, id="gigatoken"),
        pytest.param("tokenizers", bpe, prerelease_env(), id="tokenizers-1.0"),
        pytest.param("quicktok", "llama3.tiktoken", None, id="quicktok"),
        pytest.param("tiktoken", "llama3.tiktoken", None, id="tiktoken"),
    ]


@pytest.fixture(scope="module")
def rank_file(tmp_path_factory):
    pytest.importorskip("quicktok")
    from bpe_files import llama3_ranks, write_rank_file

    return write_rank_file(llama3_ranks(), tmp_path_factory.mktemp("ranks") / "llama3.tiktoken")


@pytest.mark.slow  # 8 s an engine (4 M characters, three times): make test-extras runs it
@pytest.mark.parametrize(("name", "tokenizer", "env"), _engines())
def test_an_engine_that_takes_whole_texts_is_linear_in_memory(name, tokenizer, env, rank_file):
    path = rank_file if tokenizer == "llama3.tiktoken" else tokenizer
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path), name, str(ROOT), str(SAMPLE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    check = [line for line in done.stdout.splitlines() if line.startswith("{")][-1]
    from objcli.tokenizers import open_tokenizer

    engine = open_tokenizer(path).make_engine(name) if env is None else None
    assert engine is None or engine.whole_texts  # the engine says so, and that is what is measured
    for kind, ((small_cpu, _), (big_cpu, big_mem)) in json.loads(check).items():
        print(f"{name} {kind}: {small_cpu:.3f} s -> {big_cpu:.3f} s of CPU for 10x the text")
        assert big_mem <= 64 * 4_000_000, f"{name} {kind}: {big_mem / 2**20:.0f} MiB for 4 M characters"


def test_engines_that_are_not_linear_in_memory_are_cut():
    """The stable tokenizers and SentencePiece take long texts in pieces (tokenizers/cutting.py)."""
    from objcli.tokenizers import open_tokenizer

    stable = open_tokenizer(SAMPLE / "llama-style" / "tokenizer.json").make_engine("tokenizers")
    spm = open_tokenizer(SAMPLE / "tokenizer.model").engine
    assert stable.legacy and not stable.whole_texts and not getattr(spm, "whole_texts", False)
