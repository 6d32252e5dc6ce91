"""``--shuffle-rows``: one global permutation of the run's rows, across partitions and shards.

The rows are the unshuffled run's (same multiset), in another order that does not depend on the
workers, the pool or the executor, and a row's position says nothing about its source file."""

import hashlib
import signal

import numpy as np
import pytest
from runs import TEXT_FORMATS, folder_bytes, manifest_json, run_cli, run_transform

from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.order import shuffle
from objcli.reading.shards import iter_rows


def _row_keys(folder) -> list[str]:
    """Each row, in order, as a digest of every column's values."""
    return [
        hashlib.sha256(
            b"".join(np.asarray(v, dtype=np.int64).tobytes() + k.encode() for k, v in sorted(row.items()))
        ).hexdigest()
        for _, row in iter_rows(folder)
    ]


@pytest.fixture(scope="module")
def two_sources(small_corpus, tmp_path_factory):
    """Two files of different kinds (prose, code) as separate partitions: in corpus order, all rows
    of one come before all rows of the other."""
    return [small_corpus / "prose.jsonl", small_corpus / "code.jsonl"]


@pytest.fixture()
def small_buckets(monkeypatch):
    """Buckets of 64 KiB, so the test corpus is shuffled through many of them."""
    monkeypatch.setattr(shuffle, "CHUNK_BYTES", 64 * 2**10)


def _mann_whitney_z(positions_a: np.ndarray, positions_b: np.ndarray) -> float:
    """z of the rank-sum test: are A's positions drawn from the same distribution as B's?"""
    n_a, n_b = len(positions_a), len(positions_b)
    ranks = np.argsort(np.argsort(np.concatenate([positions_a, positions_b]))) + 1
    u = ranks[:n_a].sum() - n_a * (n_a + 1) / 2
    return (u - n_a * n_b / 2) / np.sqrt(n_a * n_b * (n_a + n_b + 1) / 12)


def test_same_rows_in_an_order_unrelated_to_the_source(two_sources, sample_tokenizer, tmp_path, small_buckets):
    common = {"seq_len": 64, "shard_size": "200", "partition_size": "16KiB"}
    plain = run_transform(two_sources, sample_tokenizer, tmp_path / "plain", **common)
    shuffled = run_transform(two_sources, sample_tokenizer, tmp_path / "shuffled", shuffle_rows=True, **common)
    before, after = _row_keys(tmp_path / "plain"), _row_keys(tmp_path / "shuffled")
    assert sorted(before) == sorted(after) and before != after
    counts = dict(shuffled.manifest["totals"], shards=0)
    assert counts == dict(plain.manifest["totals"], shards=0)  # fewer shards: no partial one per partition
    assert verify_output(tmp_path / "shuffled").ok
    # The source of each row, from its place in the unshuffled run (prose's partitions first).
    prose = {p["index"] for p in plain.manifest["partitions"] if p["pieces"][0]["input"].endswith("prose.jsonl")}
    prose_rows = sum(s["rows"] for s in plain.manifest["shards"] if s["partition"] in prose)
    origin = {key: index for index, key in enumerate(before)}
    from_prose = np.array([origin[key] < prose_rows for key in after])
    positions = np.arange(len(after))
    assert 0 < from_prose.sum() < len(after)
    assert abs(_mann_whitney_z(positions[from_prose], positions[~from_prose])) < 4
    unshuffled_z = _mann_whitney_z(positions[:prose_rows], positions[prose_rows:])
    assert abs(unshuffled_z) > 10  # the test can tell: corpus order fails it
    # Shard sizes follow --shard-size, not the partitions.
    assert [s["rows"] for s in shuffled.manifest["shards"]][:-1] == [200] * (len(shuffled.manifest["shards"]) - 1)
    assert all(p["shards"] == [] for p in shuffled.manifest["partitions"])


def test_the_same_bytes_for_any_workers_and_pool(two_sources, sample_tokenizer, tmp_path, small_buckets):
    outputs = []
    for workers, pool in ((1, "threads"), (2, "threads"), (2, "processes")):
        out = tmp_path / f"{workers}-{pool}"
        run_transform(
            two_sources,
            sample_tokenizer,
            out,
            workers=workers,
            pool=pool,
            seq_len=64,
            shuffle_rows=True,
            partition_size="20000",
        )
        outputs.append(folder_bytes(out))
    assert outputs[0] == outputs[1] == outputs[2]
    other_seed = tmp_path / "seed1"
    run_transform(
        two_sources, sample_tokenizer, other_seed, seq_len=64, shuffle_rows=True, partition_size="20000", seed=1
    )
    assert _row_keys(other_seed) != _row_keys(tmp_path / "1-threads")


@pytest.mark.parametrize("fmt", [f for f in TEXT_FORMATS if f != "hf"] + ["hf"])
def test_every_format(fmt, two_sources, sample_tokenizer, tmp_path, small_buckets):
    plain, shuffled = tmp_path / "plain", tmp_path / "shuffled"
    run_transform(two_sources, sample_tokenizer, plain, seq_len=64, output_format=fmt)
    run_transform(two_sources, sample_tokenizer, shuffled, seq_len=64, output_format=fmt, shuffle_rows=True)
    report = verify_output(shuffled)
    assert report.ok, report.problems
    before, after = _row_keys(plain), _row_keys(shuffled)
    assert sorted(before) == sorted(after) and before != after


def test_each_split_is_shuffled_apart(two_sources, sample_tokenizer, tmp_path, small_buckets):
    common = {"seq_len": 64, "split": "validation=10%"}
    plain = run_transform(two_sources, sample_tokenizer, tmp_path / "plain", **common)
    shuffled = run_transform(two_sources, sample_tokenizer, tmp_path / "shuffled", shuffle_rows=True, **common)
    assert shuffled.manifest["splits"] == plain.manifest["splits"]
    for name in ("train", "validation"):

        def rows_of(folder, split=name):
            keys, names = _row_keys(folder), [f for f, _ in iter_rows(folder)]
            return [k for k, f in zip(keys, names) if f.startswith(split + "-")]

        assert sorted(rows_of(tmp_path / "plain")) == sorted(rows_of(tmp_path / "shuffled"))


def test_killed_while_shuffling_resumes_to_the_same_bytes(two_sources, sample_tokenizer, tmp_path):
    args = ["transform", *two_sources, "-t", sample_tokenizer, "--seq-len", "64", "--shuffle-rows", "-q"]
    assert run_cli(*args, "-o", tmp_path / "clean").returncode == 0
    killed = run_cli(*args, "-o", tmp_path / "out", env={"OBJCLI_CRASH_AT": "shuffle-bucket:1"})
    assert killed.returncode == -signal.SIGKILL
    assert not (tmp_path / "out" / "manifest.json").exists()
    resumed = run_cli(*args, "-o", tmp_path / "out")
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "partitions kept from the interrupted run" in resumed.stderr and "shards of shuffled rows ->" in resumed.stderr
    )
    assert folder_bytes(tmp_path / "out") == folder_bytes(tmp_path / "clean")
    assert manifest_json(tmp_path / "out")["config"]["shuffle_rows"] is True


def test_standard_output_refuses_it(two_sources, sample_tokenizer):
    with pytest.raises(ObjcliError, match="--shuffle-rows needs every row before it writes the first"):
        run_transform(two_sources, sample_tokenizer, "-", shuffle_rows=True)
