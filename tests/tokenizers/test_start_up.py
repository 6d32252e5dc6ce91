"""What a run loads before its first token (issue 73): a run of long documents on gigatoken encodes
them a text a call, as NumPy arrays, and never imports awkward (the type of gigatoken's batched call)
or the fsspec it brings; a local input is detected through the OS, not fsspec; NumPy starts no
OpenBLAS threads for the command line. The ids are the batched call's, on either path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from bpe_files import trained_byte_level
from runs import ROOT, SAMPLE, run_cli, run_transform

pytest.importorskip("gigatoken")

from objcli.errors import ObjcliError  # noqa: E402
from objcli.tokenizers import open_tokenizer  # noqa: E402
from objcli.tokenizers.gigatoken_engine import FEW_TEXTS  # noqa: E402


def _imported(command: list[str], env: dict) -> set[str]:
    """The modules a fresh ``python -m objcli`` process imports (``-X importtime`` names each)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "objcli", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


@pytest.fixture
def long_documents(tmp_path):
    texts = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").open()]
    path = tmp_path / "long.jsonl"
    joined = ["\n\n".join(texts[i::3]) for i in range(3)]  # three long documents
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in joined))
    return path


@pytest.mark.parametrize("pool", ["one process", "threads"])
def test_a_run_of_long_documents_imports_neither_awkward_nor_fsspec(long_documents, bpe_file, tmp_path, pool):
    """In the command's own process, and on a thread pool's threads (where the call releases the GIL)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # the engine probe runs too: it imports neither
    command = ["transform", str(long_documents), "-t", str(bpe_file), "--engine", "gigatoken"]
    if pool == "threads":  # partitions of a document or two, on two threads
        second = tmp_path / "second.jsonl"
        second.write_bytes(long_documents.read_bytes())
        command += [str(second), "--pool", "threads", "--workers", "2", "--partition-size", "16KiB"]
    imported = _imported([*command, "-o", str(tmp_path / "out"), "--quiet"], env)
    assert "gigatoken" in imported and "objcli.run.pipeline" in imported  # the run did run, in this process
    assert "awkward" not in imported and "fsspec" not in imported
    assert "numpy.ma" not in imported  # np.unique imports it on first use (30 ms); the packer needs no sort
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (len(manifest["partitions"]) > 1) == (pool == "threads")


@pytest.fixture(scope="module")
def bpe_file(tmp_path_factory):
    """A small byte-level BPE tokenizer.json trained on the sample prose (gigatoken takes it)."""
    texts = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").open()]
    return trained_byte_level(texts, tmp_path_factory.mktemp("bpe") / "tokenizer.json", vocab_size=600)


def test_the_command_line_starts_no_openblas_threads():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from objcli.__main__ import _no_blas_threads as f; import os; f(); "
            "import numpy; print(os.environ['OPENBLAS_NUM_THREADS'])",
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"},
    )
    assert done.stdout.strip() == "1"
    asked = subprocess.run(
        [
            sys.executable,
            "-c",
            "from objcli.__main__ import _no_blas_threads as f; import os; f(); "
            "print(os.environ['OPENBLAS_NUM_THREADS'])",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "4"},
    )
    assert asked.stdout.strip() == "4"  # a user's own setting stands


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("count", [1, FEW_TEXTS, FEW_TEXTS + 1])
def test_a_few_texts_and_a_batch_give_the_reference_ids(bpe_file, threads, count):
    """Either side of ``FEW_TEXTS`` (a text a call, or the batched call) the ids are the stable library's."""
    tokenizers = pytest.importorskip("tokenizers")
    path = bpe_file
    texts = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").open()]
    texts = [texts[i % len(texts)][: 50 + 997 * i % 4000] for i in range(count - 1)] + [""] * (count > 1)
    texts[1:5] = ["a\x00b", "\x00", "日本語 🙂 e\u0301", "\r\n\t "]  # NUL is no separator of the texts' bytes
    texts = texts[:count]
    assert len(texts) == count
    tokenizer = open_tokenizer(path)
    tokenizer.use_engine(tokenizer.make_engine("gigatoken"))
    tokens, offsets = tokenizer.encode(texts, threads)
    assert tokens.dtype == np.int32 and offsets.dtype == np.int64 and offsets[0] == 0
    library = tokenizers.Tokenizer.from_file(str(path))
    library.encode_special_tokens = True
    expected = [e.ids for e in library.encode_batch(texts, add_special_tokens=False)]
    assert [tokens[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == expected


def test_a_run_in_a_callers_process_leaves_its_collector_as_it_was(tmp_path):
    """The partitions run with what was loaded frozen out of the collector's scans; a library caller
    gets its collector back as it was, so objects of its own become collectable again, whether
    the run succeeds or fails."""
    import gc

    before = gc.get_freeze_count()
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", tmp_path / "out", seq_len=64)
    assert gc.get_freeze_count() == before
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": \n')
    with pytest.raises(ObjcliError, match="bad.jsonl"):  # --strict: the record stops the run inside a partition
        run_transform([bad], SAMPLE / "tokenizer.model", tmp_path / "out2", seq_len=64, strict=True)
    assert gc.get_freeze_count() == before


@pytest.fixture
def library_reads(monkeypatch, tmp_path):
    """How many times the stable library has read a tokenizer.json, with a cache of this test's own."""
    from objcli.tokenizers import engines

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    reads = []
    original = engines.TokenizersEngine.__init__

    def counted(self, path):
        reads.append(path)
        original(self, path)

    monkeypatch.setattr(engines.TokenizersEngine, "__init__", counted)
    return reads


def test_the_library_reads_a_file_once_for_its_bytes(tmp_path, library_reads, bpe_file):
    path = tmp_path / "own" / "tokenizer.json"  # a copy of its own: the test edits it
    path.parent.mkdir()
    path.write_bytes(bpe_file.read_bytes())
    first = open_tokenizer(path)
    assert len(library_reads) == 1  # its first opening: the library checks the whole file
    again = open_tokenizer(path)
    assert len(library_reads) == 1  # read before: not again at opening
    assert again.encode(["hello world"], 1)[0].tolist() == first.encode(["hello world"], 1)[0].tolist()
    assert len(library_reads) == 2  # where the library is needed (it encodes until a run chooses), it reads
    path.write_text(path.read_text() + "\n")  # other bytes: read again
    open_tokenizer(path)
    assert len(library_reads) == 3
    for entry in (tmp_path / "cache" / "objcli" / "tokenizer-reads").iterdir():
        entry.write_bytes(b"\xff damaged")
    open_tokenizer(path)
    assert len(library_reads) == 4  # a damaged record is no record


def test_a_run_that_encodes_nothing_has_the_library_read_its_file_only_to_encode(tmp_path, library_reads, bpe_file):
    """A run over token stores records its tokenizer's reference engine, name and version, without the library
    reading the file (0.46 s for a 128k tokenizer.json, in every such run); an encode after all reads it, once,
    and gives the library's ids."""
    from objcli.recipe import config_from_values
    from objcli.run.setup import set_up_objective
    from objcli.tokenizers.engines import tokenizers_version

    path = tmp_path / "own" / "tokenizer.json"
    path.parent.mkdir()
    path.write_bytes(bpe_file.read_bytes())
    expected = open_tokenizer(path).encode(["hello world"], 1)[0].tolist()  # its first opening reads it, as a run's
    reads = len(library_reads)
    values = {"inputs": ["-"], "tokenizer": str(path), "output": str(tmp_path / "out"), "objective": "clm"}
    _, tokenizer, _, _ = set_up_objective(config_from_values(values), reads_text=False)
    assert len(library_reads) == reads and tokenizer.engine.name == "tokenizers"
    assert tokenizer.engine_choice.to_json()["version"] == tokenizers_version()
    assert tokenizer.encode(["hello world"], 1)[0].tolist() == expected and len(library_reads) == reads + 1
    tokenizer.encode(["hello again"], 1)
    assert len(library_reads) == reads + 1


def test_a_deferred_engine_that_cannot_be_made_is_one_line_where_it_is_first_used():
    from objcli.tokenizers.bpe_spec import Unsupported
    from objcli.tokenizers.engines import DeferredEngine

    def refuse():
        raise Unsupported("it needs the regex module")

    engine = DeferredEngine("python", "1", refuse, "tokenizer t.json")
    assert (engine.name, engine.version) == ("python", "1")  # recorded without making it
    with pytest.raises(ObjcliError, match=r"^tokenizer t.json: its reference engine, python, cannot encode \(it needs"):
        engine.encode_batch(["x"], 1)


def test_a_file_the_library_refuses_is_one_line_whatever_the_cache_says(tmp_path, library_reads):
    from objcli.tokenizers.engines import tokenizers_version
    from objcli.tokenizers.library_reads import remember_read_by_library

    bad = tmp_path / "bad" / "tokenizer.json"
    bad.parent.mkdir()
    bad.write_text('{"model": {"type": "Nope", "vocab": {"a": 0}, "merges": []}}')
    with pytest.raises(ObjcliError, match="neither a SentencePiece model nor a valid tokenizer.json"):
        open_tokenizer(bad)
    assert not (tmp_path / "cache" / "objcli" / "tokenizer-reads").exists()  # only a file it read is kept
    import hashlib

    remember_read_by_library(hashlib.sha256(bad.read_bytes()).hexdigest(), tokenizers_version())  # forged
    tokenizer = open_tokenizer(bad)
    with pytest.raises(ObjcliError, match="neither a SentencePiece model nor a valid tokenizer.json"):
        tokenizer.encode(["a"], 1)  # where the library is needed, it is the same one line
    done = run_cli(
        "transform",
        SAMPLE / "prose.jsonl",
        "-t",
        bad,
        "-o",
        tmp_path / "o",
        env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("Error: tokenizer ")


def _kept_heap_in_a_process(env: dict) -> list[str]:
    code = "from objcli.__main__ import _kept_heap as f; import os; print(f(), os.environ.get('GLIBC_TUNABLES'))"
    clean = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env})
    return done.stdout.split()


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_the_command_keeps_its_heap_unless_the_user_tuned_malloc(tmp_path):
    """The command sets glibc's malloc to keep freed heap (``mallopt`` for itself, ``GLIBC_TUNABLES`` for
    the processes a run starts); a user's own setting of either kind stands, an empty one included; the
    shards are the same bytes either way, in a pool of processes too."""
    tuned = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456"
    assert _kept_heap_in_a_process({}) == ["True", tuned]
    assert _kept_heap_in_a_process({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}) == [
        "False",
        "glibc.malloc.arena_max=2",
    ]
    assert _kept_heap_in_a_process({"GLIBC_TUNABLES": ""}) == ["False"]
    assert _kept_heap_in_a_process({"MALLOC_ARENA_MAX": "2"}) == ["False", "None"]
    outputs = {}
    for name, env in (("kept", {}), ("users", {"GLIBC_TUNABLES": ""})):
        command = [
            sys.executable,
            "-m",
            "objcli",
            "transform",
            SAMPLE / "prose.jsonl",
            "-t",
            SAMPLE / "tokenizer.model",
        ]
        flags = ["--seq-len", "256", "--workers", "2", "--pool", "processes", "-q", "-o", tmp_path / name]
        clean = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
        subprocess.run([*map(str, command), *map(str, flags)], check=True, env={**clean, **env})
        outputs[name] = {p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir()) if p.is_file()}
    assert outputs["kept"] == outputs["users"] and len(outputs["kept"]) > 2
