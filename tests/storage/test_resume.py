"""Crash safety: a run killed with SIGKILL at any point resumes to the same bytes as a clean run."""

import json
import signal

import pytest
from runs import folder_bytes, manifest_json, run_cli

from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.storage.manifest import read_manifest


def objcli(*args, crash_at=None, **kwargs):
    return run_cli(*args, env={"OBJCLI_CRASH_AT": crash_at or ""}, **kwargs)


@pytest.fixture(scope="module")
def clean_run(small_corpus, sample_tokenizer, tmp_path_factory):
    """The reference: an uninterrupted run (several partitions, several shards per partition)."""
    out = tmp_path_factory.mktemp("clean") / "out"
    args = [
        small_corpus,
        "-t",
        sample_tokenizer,
        "--seq-len",
        "128",
        "--partition-size",
        "20000",
        "--shard-size",
        "40",
        "--workers",
        "1",
        "-q",
    ]
    done = objcli("transform", *args, "-o", out)
    assert done.returncode == 0, done.stderr
    manifest = manifest_json(out)
    assert len(manifest["partitions"]) >= 4 and len(manifest["shards"]) > len(manifest["partitions"])
    return args, folder_bytes(out)


@pytest.mark.parametrize(
    "crash_at, kept_some",
    [
        ("partition-start:1", False),  # before the first shard
        ("shard-committed:2", False),  # between two shards of the first partition
        ("shard-write:3", False),  # in the middle of writing a shard
        ("partition-done:3", True),  # between partitions
        ("rename:2", True),  # while finished shards get their final names
        ("manifest.json", True),  # halfway through writing the manifest
    ],
)
def test_resume_after_sigkill_gives_the_clean_bytes(clean_run, tmp_path, crash_at, kept_some):
    args, expected = clean_run
    out = tmp_path / "out"
    killed = objcli("transform", *args, "-o", out, crash_at=crash_at)
    assert killed.returncode == -signal.SIGKILL
    with pytest.raises(ObjcliError):
        read_manifest(out)  # nothing claims to be complete

    resumed = objcli("transform", *args, "-o", out)
    assert resumed.returncode == 0, resumed.stderr
    assert ("partitions kept from the interrupted run" in resumed.stderr) == kept_some
    assert folder_bytes(out) == expected
    assert not (out / ".objcli-tmp").exists()
    assert verify_output(out).ok


def test_a_worker_killed_in_a_pool_is_one_clear_error_then_resumes(clean_run, tmp_path):
    args, expected = clean_run
    # --workers 2 in processes: the crash kills one pool worker, not the run (the main process, which runs
    # partitions too while the pool starts, is not the one killed).
    args = [*(a if a != "1" else "2" for a in args), "--pool", "processes"]
    out = tmp_path / "out"
    failed = objcli("transform", *args, "-o", out, crash_at="shard-write:2:WORKER")
    assert failed.returncode == 1
    assert failed.stderr.startswith("Error: a worker process died while running partition ")
    assert failed.stderr.count("\n") == 1 and "Traceback" not in failed.stderr
    assert not (out / "manifest.json").exists()
    assert objcli("transform", *args, "-o", out).returncode == 0
    assert folder_bytes(out) == expected


def test_a_changed_input_restarts_the_interrupted_run(small_corpus, sample_tokenizer, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes((small_corpus / "prose.jsonl").read_bytes())
    out = tmp_path / "out"
    args = [
        "transform",
        corpus,
        "-t",
        sample_tokenizer,
        "--seq-len",
        "64",
        "--partition-size",
        "20000",
        "--workers",
        "1",
        "-q",
        "-o",
        out,
    ]
    assert objcli(*args, crash_at="partition-done:2").returncode == -signal.SIGKILL
    with open(corpus, "a") as f:
        f.write(json.dumps({"text": "One more document, added after the crash."}) + "\n")
    resumed = objcli(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert "inputs changed since the interrupted run" in resumed.stderr
    assert "kept" not in resumed.stderr
    fresh = objcli(*args[:-1], tmp_path / "fresh")
    assert fresh.returncode == 0
    assert folder_bytes(out) == folder_bytes(tmp_path / "fresh")


def test_a_corrupted_finished_shard_is_redone_on_resume(clean_run, tmp_path):
    args, expected = clean_run
    out = tmp_path / "out"
    assert objcli("transform", *args, "-o", out, crash_at="partition-done:3").returncode == -signal.SIGKILL
    shard = sorted((out / ".objcli-tmp").glob("p00000-s*.arrow"))[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    resumed = objcli("transform", *args, "-o", out)
    assert "resumed: 2 of" in resumed.stderr  # partitions 1 and 2 kept, 0 redone
    assert folder_bytes(out) == expected


def test_partitions_that_left_nothing_start_without_listing_the_work_folder(
    clean_run, small_corpus, sample_tokenizer, tmp_path, monkeypatch
):
    """The work folder is listed once a run, not once a partition (a listing each made a run of thousands of
    partitions quadratic); a partition an interrupted run left files of is still cleared before it runs."""
    from runs import run_transform

    from objcli.storage.places import LocalPlace

    listings = []
    names = LocalPlace.names
    monkeypatch.setattr(LocalPlace, "names", lambda self, prefix="": listings.append(prefix) or names(self, prefix))
    out = tmp_path / "out"
    run_transform([small_corpus], sample_tokenizer, out, seq_len=128, partition_size="20000", shard_size="40")
    assert len(manifest_json(out)["partitions"]) >= 4
    assert not [p for p in listings if p.startswith("p0")]  # no partition listed the folder for itself
    args = clean_run[0]
    crashed = objcli("transform", *args, "-o", tmp_path / "crashed", crash_at="shard-committed:2")
    assert crashed.returncode != 0
    resumed = objcli("transform", *args, "-o", tmp_path / "crashed")
    assert resumed.returncode == 0, resumed.stderr
    assert folder_bytes(tmp_path / "crashed") == clean_run[1]


def test_the_partitions_a_work_folder_holds_files_of_past_99999(tmp_path):
    """Names are p + the index in five digits or more (f"p{index:05d}"), then "." or "-": a trillion-token
    run has over 100,000 partitions."""
    from objcli.storage.partitions import marker_name, partitions_with_files
    from objcli.storage.places import LocalPlace

    names = [marker_name(3), marker_name(99_999), marker_name(100_000), "p123456-00000.arrow.tmp"]
    for name in [*names, "pxyz", "p0001.json", "run.json"]:
        (tmp_path / name).touch()
    assert partitions_with_files(LocalPlace(tmp_path)) == {3, 99_999, 100_000, 123_456}


def test_names_past_99999_are_known_as_ours():
    """Shards and work files of a run past 99,999 partitions or shards carry six digits: still objcli's."""
    from objcli.storage.output import is_shard_name
    from objcli.storage.shard_info import work_place, work_prefix

    assert is_shard_name("part-100000-of-212500.plan") and is_shard_name("train-00001-of-00002.arrow")
    assert not is_shard_name("part-0001-of-00002.arrow")
    for partition, split in ((123_456, ""), (100_000, "validation"), (7, "")):
        assert work_place(work_prefix(partition, split, 100_001) + ".arrow") == (partition, split)
