"""``objcli merge``: outputs of one tokenizer, objective and format become one, rows unchanged and in
order, for every format; Megatron pairs become one pair that Megatron's layout reads; differences
are one line naming the first field; a killed merge leaves no manifest and a rerun finishes it."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from readback import megatron_read, output_rows
from runs import TEXT_FORMATS, run_cli, run_transform

from objcli.commands.merge import merge
from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.formats import whole_document_formats


@pytest.fixture(scope="module")
def parts(small_corpus, tmp_path_factory):
    """Three slices of the sample corpus, each a file of its own."""
    folder = tmp_path_factory.mktemp("parts")
    lines = (small_corpus / "prose.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    files = []
    for k in range(3):
        path = folder / f"part{k}.jsonl"
        path.write_text("".join(lines[k::3]), encoding="utf-8")
        files.append(path)
    return files


def _outputs(parts, tokenizer, tmp_path, fmt, **options):
    outputs = []
    for k, path in enumerate(parts):
        out = tmp_path / f"src{k}"
        run_transform(
            [path], tokenizer, out, output_format=fmt, seq_len=128, shard_size="40" if k == 1 else "256MB", **options
        )
        outputs.append(out)
    return outputs


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_merged_rows_are_the_sources_rows_in_order(fmt, parts, sample_tokenizer, tmp_path):
    packing = "none" if fmt in whole_document_formats() else "concat"
    sources = _outputs(parts, sample_tokenizer, tmp_path, fmt, packing=packing)
    manifest = merge([str(s) for s in sources], str(tmp_path / "merged"))
    assert verify_output(tmp_path / "merged").ok
    assert output_rows(tmp_path / "merged") == [r for s in sources for r in output_rows(s)]
    totals = [json.loads((s / "manifest.json").read_text())["totals"] for s in sources]
    t = manifest["totals"]
    for key in ("documents_read", "documents_written", "documents_skipped", "rows", "tokens"):
        assert t[key] == sum(x[key] for x in totals)
    assert t["documents_read"] == t["documents_written"] + t["documents_skipped"]
    assert [m["output"] for m in manifest["merged_from"]] == [str(s.resolve()) for s in sources]
    if fmt == "megatron":
        (shard,) = manifest["shards"]
        prefix = tmp_path / "merged" / shard["files"][0].removesuffix(".bin")
        version, code, sequences, doc_index = megatron_read(prefix)
        expected = [
            seq for s in sources for f in sorted(s.glob("*.bin")) for seq in megatron_read(f.with_suffix(""))[2]
        ]
        assert version == 1 and sequences == expected and doc_index == list(range(len(expected) + 1))
        assert (tmp_path / "merged" / "megatron.txt").read_text() == f"{t['tokens']} {prefix.name}\n"
    if fmt == "hf":
        import datasets

        assert datasets.load_from_disk(str(tmp_path / "merged")).num_rows == t["rows"]


def test_hard_links_where_the_filesystem_allows(parts, sample_tokenizer, tmp_path):
    sources = _outputs(parts[:2], sample_tokenizer, tmp_path, "arrow")
    merge([str(s) for s in sources], str(tmp_path / "merged"))
    source_inodes = {p.stat().st_ino for s in sources for p in s.glob("part-*")}
    assert {p.stat().st_ino for p in (tmp_path / "merged").glob("part-*")} == source_inodes


def test_a_difference_is_one_line_naming_the_first_field(parts, sample_tokenizer, tmp_path):
    run_transform([parts[0]], sample_tokenizer, tmp_path / "clm", seq_len=128)
    run_transform([parts[1]], sample_tokenizer, tmp_path / "mlm", objective="mlm", seq_len=128)
    run_transform([parts[1]], sample_tokenizer, tmp_path / "short", seq_len=64)
    run_transform([parts[1]], Path(sample_tokenizer).with_name("code.model"), tmp_path / "other", seq_len=128)
    for other, field in (("mlm", "objective"), ("short", "seq_len"), ("other", "tokenizer sha256")):
        result = run_cli("merge", tmp_path / "clm", tmp_path / other, "-o", tmp_path / "out")
        assert result.returncode == 1 and result.stderr.count("\n") == 1
        assert f"differs from {tmp_path / 'clm'} in its {field}" in result.stderr, result.stderr
    result = run_cli("merge", tmp_path / "clm", tmp_path / "clm", "-o", tmp_path / "out")
    assert result.returncode == 1 and "named twice" in result.stderr
    with pytest.raises(ObjcliError, match="is one of the sources"):
        merge([str(tmp_path / "clm")], str(tmp_path / "clm"))


def test_a_killed_merge_leaves_no_manifest_and_a_rerun_finishes_it(parts, sample_tokenizer, tmp_path):
    sources = _outputs(parts, sample_tokenizer, tmp_path, "arrow")
    merge([str(s) for s in sources], str(tmp_path / "whole"))
    env = {**os.environ, "OBJCLI_CRASH_AT": "merge-file:3"}
    result = subprocess.run(
        [sys.executable, "-m", "objcli", "merge", *map(str, sources), "-o", str(tmp_path / "m")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == -signal.SIGKILL
    assert not (tmp_path / "m" / "manifest.json").exists()
    time.sleep(0.1)
    again = run_cli("merge", *sources, "-o", tmp_path / "m")
    assert again.returncode == 0, again.stderr

    def files(folder):
        return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".objcli-lock"}

    assert files(tmp_path / "m") == files(tmp_path / "whole") and not (tmp_path / "m" / ".objcli-tmp").exists()


def test_a_changed_or_missing_source_file_is_one_line(parts, sample_tokenizer, tmp_path):
    for fmt in ("arrow", "megatron"):
        sources = _outputs(parts[:2], sample_tokenizer, tmp_path / fmt, fmt, packing="none")
        victim = sorted(sources[1].glob("part-*"))[0]
        with open(victim, "ab") as f:
            f.write(b"x")
        result = run_cli("merge", *sources, "-o", tmp_path / fmt / "m")
        assert result.returncode == 1 and "changed since it was written" in result.stderr
        victim.unlink()
        result = run_cli("merge", *sources, "-o", tmp_path / fmt / "m")
        assert result.returncode == 1 and "listed in its manifest but missing" in result.stderr
        assert result.stderr.count("\n") == 1 and not (tmp_path / fmt / "m" / "manifest.json").exists()


def test_shuffled_merge_is_one_keyed_permutation_of_all_rows(parts, sample_tokenizer, tmp_path):
    sources = [str(s) for s in _outputs(parts, sample_tokenizer, tmp_path, "parquet")]
    merge(sources, str(tmp_path / "plain"))
    plain = output_rows(tmp_path / "plain")
    merge(sources, str(tmp_path / "s7"), shuffle_seed=7)
    merge(sources, str(tmp_path / "s7-again"), shuffle_seed=7)
    merge(sources, str(tmp_path / "s8"), shuffle_seed=8)
    shuffled = output_rows(tmp_path / "s7")
    key = lambda row: json.dumps(row, sort_keys=True)  # noqa: E731
    assert sorted(map(key, shuffled)) == sorted(map(key, plain)) and shuffled != plain
    assert output_rows(tmp_path / "s8") != shuffled
    again = {p.name: p.read_bytes() for p in (tmp_path / "s7-again").iterdir() if p.is_file()}
    assert again == {p.name: p.read_bytes() for p in (tmp_path / "s7").iterdir() if p.is_file()}
    assert verify_output(tmp_path / "s7").ok
    assert json.loads((tmp_path / "s7" / "manifest.json").read_text())["shuffled"] == {"seed": 7}


@pytest.mark.parametrize("fmt", [f for f in TEXT_FORMATS if f != "hf"])  # hf saves one split: --split refuses it
def test_an_unsplit_source_joins_the_training_split_of_split_ones(fmt, parts, sample_tokenizer, tmp_path):
    """Merging an output split into train/validation with one that was not split: the unsplit rows
    are training rows, so they go under ``train`` (a loader reading train-*, or Megatron's one
    megatron.txt, used to miss them: ``part-*`` beside ``train-*``, and two pairs for one data-args
    file, of which it kept one), and the validation split is the split source's alone."""
    packing = "none" if fmt in whole_document_formats() else "concat"
    split = tmp_path / "split"
    run_transform(
        parts[:2], sample_tokenizer, split, output_format=fmt, seq_len=128, packing=packing, split="validation=20%"
    )
    whole = _outputs(parts[2:], sample_tokenizer, tmp_path, fmt, packing=packing)[0]
    manifest = merge([str(split), str(whole)], str(tmp_path / "merged"))
    assert verify_output(tmp_path / "merged").ok
    assert {s["split"] for s in manifest["shards"]} == {"train", "validation"}
    source = {k: json.loads((f / "manifest.json").read_text()) for k, f in (("split", split), ("whole", whole))}
    expected_train = source["split"]["splits"]["train"]["rows"] + source["whole"]["totals"]["rows"]
    assert manifest["splits"]["train"]["rows"] == expected_train
    assert manifest["splits"]["validation"] == source["split"]["splits"]["validation"]
    names = [p.name for p in (tmp_path / "merged").iterdir()]
    assert not [n for n in names if n.startswith("part-")]
    if fmt == "megatron":
        listed = (tmp_path / "merged" / "megatron.txt").read_text().split()
        train_tokens = sum(s["tokens"] for s in manifest["shards"] if s["split"] == "train")
        assert sum(int(w) for w in listed[0::2]) == train_tokens


def test_rows_a_merge_would_write_twice_are_named(parts, sample_tokenizer, tmp_path):
    """A copy of an output, or an output beside the output appended to from it, holds shards
    byte-identical to another source's: the merge says how many and whose (by the manifests'
    sha256), on the command line too; distinct outputs say nothing."""
    import shutil

    from objcli.storage.manifest import read_manifest

    first, second, _ = _outputs(parts, sample_tokenizer, tmp_path, "arrow")
    shutil.copytree(first, tmp_path / "copy")
    appended = tmp_path / "appended"
    shutil.copytree(second, appended)
    assert run_cli("transform", parts[2], "-o", appended, "--append", "-q").returncode == 0
    told: list[str] = []
    merge([str(first), str(second), str(tmp_path / "copy"), str(appended)], str(tmp_path / "out"), warn=told.append)
    count = len(read_manifest(second).shards)
    total = len(read_manifest(appended).shards)
    assert told == [
        f"1 of the 1 shard files of {(tmp_path / 'copy').resolve()} are byte-identical to files of "
        f"{first.resolve()}: their rows appear twice in the merged output",
        f"{count:,} of the {total:,} shard files of {appended.resolve()} are byte-identical to files of "
        f"{second.resolve()}: their rows appear twice in the merged output",
    ]
    result = run_cli("merge", first, second, "-o", tmp_path / "cli")
    assert result.returncode == 0 and "warning" not in result.stderr
    result = run_cli("merge", first, tmp_path / "copy", "-o", tmp_path / "cli2")
    assert result.returncode == 0 and "byte-identical" in result.stderr
