"""``objcli reshard``: the same rows, byte for byte and in order, in shards of another size, for
every format; totals kept; ``verify`` passes; a killed reshard leaves no manifest and the same
command writes the same bytes."""

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from readback import output_rows
from runs import TEXT_FORMATS, folder_bytes, manifest_json, run_cli, run_transform

from objcli.commands.reshard import reshard
from objcli.commands.verify import verify_output
from objcli.formats import whole_document_formats


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("size", ["37", "64KB"])
def test_resharded_rows_are_the_rows_in_order(fmt, size, small_corpus, sample_tokenizer, tmp_path):
    packing = "none" if fmt in whole_document_formats() else "best-fit"
    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "src",
        output_format=fmt,
        seq_len=128,
        packing=packing,
        shard_size="50",
    )
    manifest = reshard(str(tmp_path / "src"), str(tmp_path / "new"), size)
    assert verify_output(tmp_path / "new").ok
    assert output_rows(tmp_path / "new") == output_rows(tmp_path / "src")
    source = manifest_json(tmp_path / "src")
    for key in ("rows", "tokens", "padding_tokens", "documents_read", "documents_written"):
        assert manifest["totals"][key] == source["totals"][key]
    for key in ("rows", "tokens", "padding_tokens", "documents", "segments"):
        assert sum(s[key] for s in manifest["shards"]) == sum(s[key] for s in source["shards"])
    if size == "37":
        assert [s["rows"] for s in manifest["shards"]][:-1] == [37] * (len(manifest["shards"]) - 1)
    assert manifest["resharded_from"]["shards"] == len(source["shards"])


def test_a_killed_reshard_leaves_no_manifest_and_the_same_command_writes_the_same_bytes(
    small_corpus, sample_tokenizer, tmp_path
):
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "src", seq_len=128, shard_size="40")
    reshard(str(tmp_path / "src"), str(tmp_path / "whole"), "25")
    env = {**os.environ, "OBJCLI_CRASH_AT": "shard-write:3"}
    killed = subprocess.run(
        [
            sys.executable,
            "-m",
            "objcli",
            "reshard",
            str(tmp_path / "src"),
            "--shard-size",
            "25",
            "-o",
            str(tmp_path / "new"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9 and not (tmp_path / "new" / "manifest.json").exists()
    again = run_cli("reshard", tmp_path / "src", "--shard-size", "25", "-o", tmp_path / "new", "-q")
    assert again.returncode == 0, again.stderr

    def files(folder):
        return {k: v for k, v in folder_bytes(folder).items() if k not in (".objcli-lock", "manifest.json")}

    assert files(tmp_path / "new") == files(tmp_path / "whole")


def test_reshard_errors_are_one_line(small_corpus, sample_tokenizer, tmp_path):
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "src", seq_len=128)
    for args, message in (
        ((tmp_path / "src", "--shard-size", "0", "-o", tmp_path / "n"), "--shard-size 0"),
        ((tmp_path / "src", "--shard-size", "10", "-o", tmp_path / "src"), "leave out -o to reshard in place"),
        ((tmp_path / "nothing", "--shard-size", "10", "-o", tmp_path / "n2"), "no manifest.json"),
        ((tmp_path / "src", "--shard-size", "10", "--overwrite"), "leave out --overwrite"),
        ((tmp_path / "nothing", "--shard-size", "10"), "no manifest.json"),
    ):
        result = run_cli("reshard", *args)
        assert result.returncode == 1 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr


def _comparable(folder):
    """Shard and format files by name (the manifest names its folder in ``resharded_from``)."""
    return {k: v for k, v in folder_bytes(folder).items() if k not in (".objcli-lock", "manifest.json")}


@pytest.mark.parametrize("fmt", ["arrow", "hf", "parquet", "megatron"])
def test_in_place_gives_what_a_new_folder_gets_and_leaves_nothing_behind(fmt, small_corpus, sample_tokenizer, tmp_path):
    packing = "none" if fmt in whole_document_formats() else "best-fit"
    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "src",
        output_format=fmt,
        seq_len=128,
        packing=packing,
        shard_size="30",
    )
    before = output_rows(tmp_path / "src")
    reshard(str(tmp_path / "src"), str(tmp_path / "apart"), "100KB")
    result = run_cli("reshard", tmp_path / "src", "--shard-size", "100KB")
    assert result.returncode == 0 and "in place" in result.stderr, result.stderr
    assert output_rows(tmp_path / "src") == before and verify_output(tmp_path / "src").ok
    assert _comparable(tmp_path / "src") == _comparable(tmp_path / "apart")
    assert sorted(p.name for p in (tmp_path / "src").iterdir() if p.name.startswith(".")) == [".objcli-lock"]


@pytest.mark.parametrize(
    "point",
    [
        "shard-write:2",
        "shard-committed:1",
        "reshard-committed:1",
        "reshard-moved:1",
        "reshard-moved:3",
        "manifest.json:1",
    ],
)
def test_an_in_place_reshard_killed_anywhere_is_old_or_finished_by_the_same_command(
    point, small_corpus, sample_tokenizer, tmp_path
):
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "src", seq_len=128, shard_size="20")
    before, old_files = output_rows(tmp_path / "src"), _comparable(tmp_path / "src")
    reshard(str(tmp_path / "src"), str(tmp_path / "apart"), "100KB")
    killed = subprocess.run(
        [sys.executable, "-m", "objcli", "reshard", str(tmp_path / "src"), "--shard-size", "100KB"],
        env={**os.environ, "OBJCLI_CRASH_AT": point},
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9, killed.stderr
    if (tmp_path / "src" / "manifest.json").exists():  # killed before the commit: the old output, whole
        assert verify_output(tmp_path / "src").ok and output_rows(tmp_path / "src") == before
        assert point.split(":")[0] in ("shard-write", "shard-committed", "reshard-committed")
        assert all(_comparable(tmp_path / "src")[name] == data for name, data in old_files.items())
    again = run_cli("reshard", tmp_path / "src", "--shard-size", "100KB", "-q")
    assert again.returncode == 0, again.stderr
    assert output_rows(tmp_path / "src") == before and verify_output(tmp_path / "src").ok
    assert _comparable(tmp_path / "src") == _comparable(tmp_path / "apart")


def test_growing_arrow_shards_are_their_sources_record_batches_back_to_back(small_corpus, sample_tokenizer, tmp_path):
    import pyarrow as pa

    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "src", seq_len=128, shard_size="25")
    source = manifest_json(tmp_path / "src")
    manifest = reshard(str(tmp_path / "src"), str(tmp_path / "new"), "120KB")

    def batches(folder, shard):
        with pa.ipc.open_stream(pa.memory_map(str(folder / shard["files"][0]))) as reader:
            return [batch.serialize().to_pybytes() for batch in reader]

    old = [b for shard in source["shards"] for b in batches(tmp_path / "src", shard)]
    new = [batches(tmp_path / "new", shard) for shard in manifest["shards"]]
    assert [b for shard in new for b in shard] == old  # every message kept as it was, in order
    assert len(manifest["shards"]) < len(source["shards"])
    taken = 0
    for shard, held in zip(manifest["shards"], new):  # bookkeeping: the sum of whole source shards, exact
        counts = [len(batches(tmp_path / "src", s)) for s in source["shards"]]
        size = next(k for k in range(len(counts) + 1) if sum(counts[taken : taken + k]) == len(held))
        group = source["shards"][taken : taken + size]
        for key in ("rows", "tokens", "padding_tokens", "documents", "segments"):
            assert shard[key] == sum(s[key] for s in group)
        assert sum(s["bytes"][s["files"][0]] for s in group) <= 120_000 + 2_000 * len(group)
        taken += size
    assert taken == len(source["shards"])


def test_reshard_in_place_on_object_storage_is_refused_in_one_line():
    result = run_cli("reshard", "s3://bucket/out", "--shard-size", "1GB")
    assert result.returncode == 1 and "in place is for local folders" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


@given(
    st.lists(st.tuples(st.integers(1, 50), st.sampled_from(["", "validation"])), min_size=1, max_size=30),
    st.integers(50, 120),
)
def test_new_shards_are_greedy_runs_of_whole_source_shards_of_one_split(shards, limit):
    from pathlib import Path

    from objcli.commands.reshard_stream import StreamLayout, plan_groups

    layouts = [StreamLayout(Path("x"), b"schema", 10, 10 + size) for size, _ in shards]
    splits = [split for _, split in shards]
    groups = plan_groups(layouts, splits, limit)
    for split in dict.fromkeys(splits):
        mine = [g for g in groups if splits[g[0]] == split]
        assert [i for g in mine for i in g] == [i for i, s in enumerate(splits) if s == split]
        sizes = [sum(shards[i][0] for i in g) for g in mine]
        assert all(size <= limit for size in sizes)
        assert all(size + shards[nxt[0]][0] > limit for size, nxt in zip(sizes, mine[1:]))  # greedy: none fits more
    assert plan_groups(layouts, splits, max(size for size, _ in shards) - 1) is None


@pytest.mark.parametrize("damage", ["truncated", "missing", "garbled"])
@pytest.mark.parametrize("in_place", [False, True])
def test_a_damaged_source_shard_is_named_in_one_line_and_nothing_is_written(
    damage, in_place, small_corpus, sample_tokenizer, tmp_path
):
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "src", seq_len=128, shard_size="20")
    shard = sorted((tmp_path / "src").glob("part-00001-*"))[0]
    data = shard.read_bytes()
    if damage == "missing":
        shard.unlink()
    else:
        shard.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[:300] + b"\xff" * 40 + data[340:])
    before = folder_bytes(tmp_path / "src")
    result = run_cli(
        "reshard", tmp_path / "src", "--shard-size", "1MB", *([] if in_place else ["-o", tmp_path / "new"])
    )
    assert result.returncode == 1 and shard.name in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert folder_bytes(tmp_path / "src") == before
    assert not (tmp_path / "new" / "manifest.json").exists()


def _split_totals_from_shards(manifest):
    totals = {}
    for shard in manifest["shards"]:
        counts = totals.setdefault(shard["split"], {"rows": 0, "tokens": 0, "shards": 0, "documents": 0})
        for key in ("rows", "tokens", "documents"):
            counts[key] += shard[key]
        counts["shards"] += 1
    return totals


@pytest.mark.parametrize("command", ["reshard", "reshard in place", "merge"])
def test_rebuilt_outputs_recount_their_splits(command, small_corpus, sample_tokenizer, tmp_path):
    for name, corpus in (("a", "prose.jsonl"), ("b", "code.jsonl")):
        run_transform(
            [small_corpus / corpus],
            sample_tokenizer,
            tmp_path / name,
            seq_len=128,
            shard_size="20",
            split="validation=20%",
        )
    if command == "merge":
        args, out = ("merge", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "new"), tmp_path / "new"
    elif command == "reshard":
        args, out = ("reshard", tmp_path / "a", "--shard-size", "100KB", "-o", tmp_path / "new"), tmp_path / "new"
    else:
        args, out = ("reshard", tmp_path / "a", "--shard-size", "100KB"), tmp_path / "a"
    result = run_cli(*args, "-q")
    assert result.returncode == 0, result.stderr
    manifest = manifest_json(out)
    assert set(manifest["splits"]) == {"train", "validation"}
    assert manifest["splits"] == _split_totals_from_shards(manifest)
    assert verify_output(out).ok


def test_a_new_shard_of_one_source_shard_is_that_file_hard_linked(small_corpus, sample_tokenizer, tmp_path):
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, tmp_path / "src", seq_len=128, shard_size="30")
    source = manifest_json(tmp_path / "src")
    sizes = [s["bytes"][s["files"][0]] for s in source["shards"]]
    limit = max(sizes) + 1  # every source fits, and no two full ones do
    assert 2 * min(sizes[:-1]) > limit
    manifest = reshard(str(tmp_path / "src"), str(tmp_path / "new"), f"{limit}B")
    singles = [(old, new) for old, new in zip(source["shards"], manifest["shards"]) if new["rows"] == old["rows"]]
    assert len(singles) >= len(source["shards"]) - 2
    for old, new in singles:
        old_path, new_path = tmp_path / "src" / old["files"][0], tmp_path / "new" / new["files"][0]
        assert os.stat(old_path).st_ino == os.stat(new_path).st_ino
        assert new["sha256"][new["files"][0]] == old["sha256"][old["files"][0]]
    assert verify_output(tmp_path / "new").ok and output_rows(tmp_path / "new") == output_rows(tmp_path / "src")


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("command", ["reshard", "merge"])
def test_overwrite_replaces_only_objcli_files_never_a_source_kept_inside_the_output(
    command, fmt, small_corpus, sample_tokenizer, tmp_path
):
    """``-o OUT --overwrite`` where OUT holds an earlier output, a source in a subfolder and a file of
    the user's: the earlier output's files go (as with ``transform --overwrite``), the rest stays."""
    packing = "none" if fmt in whole_document_formats() else "best-fit"
    out, source = tmp_path / "out", tmp_path / "out" / "kept-source"
    for folder, corpus in ((out, "code.jsonl"), (source, "prose.jsonl")):
        run_transform(
            [small_corpus / corpus],
            sample_tokenizer,
            folder,
            output_format=fmt,
            seq_len=128,
            packing=packing,
            shard_size="30",
        )
    (out / "NOTES.txt").write_text("mine")
    before = folder_bytes(source)
    earlier = set(manifest_json(out)["shards"][0]["files"])
    args = ("reshard", source, "--shard-size", "64KB") if command == "reshard" else ("merge", source)
    result = run_cli(*args, "-o", out, "--overwrite", "-q")
    assert result.returncode == 0, result.stderr
    assert folder_bytes(source) == before and (out / "NOTES.txt").read_text() == "mine"
    assert verify_output(out).ok and verify_output(source).ok
    assert output_rows(out) == output_rows(source)
    listed = {name for shard in manifest_json(out)["shards"] for name in shard["files"]}
    assert not (earlier - listed) & {p.name for p in out.iterdir()}  # no shard of the earlier output left behind


def _pyarrow_layout(path):
    """Where pyarrow's own message reader finds the schema message's end and the last batch's end."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.MessageReader.open_stream(source)
        kinds = [reader.read_next_message().type]
        body_start = body_end = source.tell()
        for message in reader:
            kinds.append(message.type)
            body_end = source.tell()
    return kinds, body_start, body_end


@given(batches=st.lists(st.integers(0, 40), max_size=5), metadata=st.booleans(), dictionary=st.booleans())
@settings(max_examples=40, deadline=None)
def test_the_stream_layout_is_where_pyarrow_finds_the_messages(batches, metadata, dictionary, tmp_path_factory):
    """The reshard's own reading of the IPC framing (no pyarrow import) agrees with pyarrow's message
    reader on streams of any number of batches, with schema metadata; a stream holding a dictionary
    batch is not taken (None: the writer's path handles it)."""
    import pyarrow as pa

    from objcli.commands.reshard_stream import stream_layout

    values = pa.array(["a", "b"] * 20).dictionary_encode() if dictionary else pa.array(range(40), pa.int32())
    ids = pa.array([[1, 2, 3]] * 40, pa.list_(pa.int32()))
    schema = pa.schema([("input_ids", ids.type), ("v", values.type)], metadata={"k": "v"} if metadata else None)
    path = tmp_path_factory.mktemp("stream") / "part-00000-of-00001.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for rows in batches:
            writer.write_batch(pa.record_batch([ids[:rows], values[:rows]], schema=schema))
    kinds, body_start, body_end = _pyarrow_layout(path)
    layout = stream_layout(path)
    if "dictionary" in kinds:
        assert layout is None
    else:
        assert layout is not None and (layout.body_start, layout.body_end) == (body_start, body_end)
        assert layout.schema == path.read_bytes()[:body_start]


FULL_DISK_POINTS = [
    ("reshard in place", "shard-write:2"),
    ("reshard in place", "shard-committed:2"),
    ("reshard", "shard-write:2"),
    ("reshard", "shard-committed:1"),
    ("merge", "merge-file:2"),
]


@pytest.mark.parametrize(("command", "point"), FULL_DISK_POINTS)
def test_a_full_disk_is_one_line_leaves_the_sources_whole_and_gives_its_space_back(
    command, point, small_corpus, sample_tokenizer, tmp_path
):
    """A disk that fills up part way through (ENOSPC raised where a shard is written, a file linked or
    copied, or a shard committed) is one line saying what to do; every source still verifies with its
    bytes unchanged, and no work folder is left holding the half-built shards' space."""
    for name, corpus in (("a", "prose.jsonl"), ("b", "code.jsonl")):
        run_transform([small_corpus / corpus], sample_tokenizer, tmp_path / name, seq_len=128, shard_size="30")
    before = {name: folder_bytes(tmp_path / name) for name in ("a", "b")}
    args = {
        "reshard in place": ("reshard", tmp_path / "a", "--shard-size", "64KB"),
        "reshard": ("reshard", tmp_path / "a", "--shard-size", "64KB", "-o", tmp_path / "new"),
        "merge": ("merge", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "new"),
    }[command]
    result = run_cli(*args, "-q", env={"OBJCLI_CRASH_AT": f"{point}:ENOSPC"})
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "no space left on the device" in result.stderr and "free some space" in result.stderr
    for name in ("a", "b"):
        assert folder_bytes(tmp_path / name) == before[name] and verify_output(tmp_path / name).ok
    assert not (tmp_path / "a" / ".objcli-tmp").exists() and not (tmp_path / "new" / ".objcli-tmp").exists()
    assert not (tmp_path / "new" / "manifest.json").exists()
