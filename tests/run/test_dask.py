"""The Dask executor, for real: a LocalCluster, and a scheduler and workers started as processes.

Everything binds to 127.0.0.1 and runs without a dashboard; every process is stopped at the end.
"""

import json
import os
import time
from pathlib import Path

import pytest
from clusters import DaskProcesses
from optional import requires
from runs import folder_bytes, without_warnings
from runs import run_cli as objcli

pytestmark = requires("distributed")


@pytest.fixture(scope="module")
def local_reference(small_corpus, sample_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "out"
    args = [
        small_corpus,
        "-t",
        sample_tokenizer,
        "--objective",
        "span-corruption",
        "--seq-len",
        "128",
        "--partition-size",
        "20000",
        "--shard-size",
        "40",
        "-q",
    ]
    done = objcli("transform", *args, "-o", out, "--workers", "2")
    assert done.returncode == 0, done.stderr
    return args, folder_bytes(out)


def test_local_cluster_writes_the_bytes_of_the_local_executor(local_reference, tmp_path):
    args, expected = local_reference
    for workers in (1, 2):
        out = tmp_path / f"dask{workers}"
        done = objcli("transform", *args, "-o", out, "--executor", "dask", "--workers", workers)
        assert done.returncode == 0, done.stderr
        assert folder_bytes(out) == expected  # shards and manifest


def test_shuffled_rows_are_the_bytes_of_the_local_executor(local_reference, tmp_path):
    """--shuffle-rows: the global permutation is keyed to the data, never to who ran a partition."""
    args, _ = local_reference
    args = [*args, "--shuffle-rows", "--objective", "clm"]  # the last --objective given wins
    outputs = []
    for executor in ("local", "dask"):
        done = objcli("transform", *args, "-o", tmp_path / executor, "--executor", executor, "--workers", "2")
        assert done.returncode == 0, done.stderr
        outputs.append(folder_bytes(tmp_path / executor))
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0]["manifest.json"])["config"]["shuffle_rows"] is True


@pytest.mark.heavy
def test_external_scheduler_and_workers(local_reference, tmp_path):
    args, expected = local_reference
    cluster = DaskProcesses(tmp_path)
    try:
        elsewhere = tmp_path / "elsewhere"  # the client runs in another folder than the workers
        elsewhere.mkdir()
        relative = [os.path.relpath(a, elsewhere) if isinstance(a, Path) else a for a in args]
        done = objcli(
            "transform", *relative, "-o", "out", "--executor", "dask", "--scheduler", cluster.address, cwd=elsewhere
        )
        assert done.returncode == 0, done.stderr
        written = folder_bytes(elsewhere / "out")
        manifest = json.loads(written.pop("manifest.json"))
        written.pop("README.md")  # the dataset card, made from the manifest: it names the inputs as given too
        assert written == {k: v for k, v in expected.items() if k not in ("manifest.json", "README.md")}
        # The manifest differs only where the command did: it names the inputs as they were given.
        assert manifest["shards"] == json.loads(expected["manifest.json"])["shards"]
    finally:
        cluster.stop()


def test_workers_without_objcli_are_one_clear_error(local_reference, tmp_path):
    args, _ = local_reference
    shadow = tmp_path / "shadow" / "objcli"  # an environment where 'import objcli' fails
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('objcli is not installed here')\n")
    cluster = DaskProcesses(tmp_path, workers=1, env={"PYTHONPATH": str(shadow.parent)})
    try:
        done = objcli("transform", *args, "-o", tmp_path / "out", "--executor", "dask", "--scheduler", cluster.address)
    finally:
        cluster.stop()
    error = without_warnings(done.stderr)  # the run's specials warning comes first
    assert done.returncode == 1
    assert error.startswith("Error: Dask worker tcp://127.0.0.1:")
    assert "cannot import objcli (ImportError('objcli is not installed here'))" in error
    assert error.count("\n") == 1


def test_unreachable_scheduler_is_one_clear_error_not_a_hang(local_reference, tmp_path):
    args, _ = local_reference
    started = time.monotonic()
    done = objcli(
        "transform",
        *args,
        "-o",
        tmp_path / "out",
        "--executor",
        "dask",
        "--scheduler",
        "tcp://127.0.0.1:9",
        env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"},
    )
    assert time.monotonic() - started < 60
    assert done.returncode == 1
    assert without_warnings(done.stderr) == (
        "Error: --scheduler tcp://127.0.0.1:9: cannot reach a Dask scheduler (Timed out trying to connect to "
        "tcp://127.0.0.1:9 after 2 s); start one with 'dask scheduler', or drop --scheduler to run a local cluster\n"
    )
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_failed_task_names_its_input_and_writes_no_manifest(sample_tokenizer, tmp_path):
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "good.jsonl").write_text("".join(json.dumps({"text": f"Line {i}."}) + "\n" for i in range(50)))
    (corpus / "bad.jsonl").write_text('{"text": "fine"}\n{"text": broken\n')
    done = objcli(
        "transform",
        corpus,
        "-t",
        sample_tokenizer,
        "-o",
        tmp_path / "out",
        "--seq-len",
        "8",
        "--strict",
        "--executor",
        "dask",
        "--workers",
        "2",
        "-q",
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: {corpus / 'bad.jsonl'}:2: ")
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.heavy
def test_a_token_store_and_a_megatron_file_on_a_cluster(small_corpus, sample_tokenizer, tmp_path):
    """Issues 51 and 52: tokenize on a LocalCluster writes the local run's store, and a big tokenized
    file cut into partitions by document ranges is shared by the cluster's workers."""
    common = ["-t", sample_tokenizer, "--partition-size", "20000", "-q", "--workers", "2"]
    stores = {}
    for executor in ("local", "dask"):
        done = objcli("tokenize", small_corpus, *common, "-o", tmp_path / f"store-{executor}", "--executor", executor)
        assert done.returncode == 0, done.stderr
        stores[executor] = {
            k: v for k, v in folder_bytes(tmp_path / f"store-{executor}").items() if k.endswith(".store")
        }
    assert stores["local"] == stores["dask"] and len(stores["local"]) > 1
    written = objcli(
        "transform", small_corpus, "-t", sample_tokenizer, "--format", "megatron", "-o", tmp_path / "mg", "-q"
    )
    assert written.returncode == 0, written.stderr
    prefix = next((tmp_path / "mg").glob("*.idx")).with_suffix("")
    outputs = []
    for executor in ("local", "dask"):
        args = [prefix, *common, "--objective", "span-corruption", "--seq-len", "128", "--executor", executor]
        done = objcli("transform", *args, "-o", tmp_path / f"from-{executor}")
        assert done.returncode == 0, done.stderr
        outputs.append({k: v for k, v in folder_bytes(tmp_path / f"from-{executor}").items() if k.endswith(".arrow")})
        assert len(json.loads((tmp_path / f"from-{executor}" / "manifest.json").read_text())["partitions"]) > 1
    assert outputs[0] == outputs[1]


@pytest.mark.heavy
def test_a_cluster_ends_with_the_process_that_started_it(tmp_path):
    """Issue 65: a `make test` killed part-way left a Dask scheduler and worker running. A process that
    starts a cluster is SIGKILLed (no cleanup of its own runs): its scheduler and workers end."""
    import signal
    import subprocess
    import sys

    import psutil

    script = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from clusters import DaskProcesses; DaskProcesses(Path(sys.argv[2]), workers=1); "
        "print('ready', flush=True); time.sleep(600)"
    )
    support = Path(__file__).resolve().parents[1] / "support"
    starter = subprocess.Popen(
        [sys.executable, "-c", script, str(support), str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert starter.stdout.readline().strip() == "ready"  # the cluster is up: its scheduler wrote its file
    cluster = [p for p in psutil.Process(starter.pid).children(recursive=True)]
    assert len(cluster) >= 2
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    gone, alive = psutil.wait_procs(cluster, timeout=60)
    assert not alive, [p.cmdline() for p in alive]
