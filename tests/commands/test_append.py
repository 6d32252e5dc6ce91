"""``transform --append``: appending B to transform(A) writes the same bytes as transform(A + B),
for every objective of the registry and every format; what an append cannot keep is refused in
one line; a killed append leaves the old output valid and the same command finishes it."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from chat_data import TEMPLATES, conversations, write_jsonl
from runs import TEXT_FORMATS, folder_bytes, run_cli

from objcli.commands.verify import verify_output
from objcli.formats import whole_document_formats
from objcli.objectives import REGISTRY
from objcli.recipe import config_from_values
from objcli.run.append import appended_values
from objcli.transform import transform


@pytest.fixture(scope="module")
def halves(small_corpus, tmp_path_factory):
    """(A, B) text inputs, and (A, B) conversation inputs."""
    folder = tmp_path_factory.mktemp("halves")
    lines = (small_corpus / "prose.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "a.jsonl").write_text("".join(lines[:70]), encoding="utf-8")
    (folder / "b.jsonl").write_text("".join(lines[70:]), encoding="utf-8")
    chats = conversations(80, "mistral", seed=4)
    write_jsonl(chats[:50], folder / "chat_a.jsonl")
    write_jsonl(chats[50:], folder / "chat_b.jsonl")
    return folder


def _run(*args, **kw):
    result = run_cli("transform", *args, **kw)
    assert result.returncode == 0, result.stderr
    return result


def _appended_equals_whole(halves, tokenizer, tmp_path, **options):
    """In process (the CLI's path is the last test's): transform(A + B) against transform(A), then
    B appended with nothing but the inputs and the output given."""
    stem = "chat_" if options.get("objective") == "chat" else ""
    a, b = str(halves / f"{stem}a.jsonl"), str(halves / f"{stem}b.jsonl")
    common = {"tokenizer": str(tokenizer), "partition_size": "16KiB", **options}
    # The whole run the append must equal: A then B, B starting partitions of its own (as recorded).
    transform(
        config_from_values({**common, "inputs": [a, b], "input_breaks": [1], "output": str(tmp_path / "whole")}),
        workers=1,
    )
    transform(config_from_values({**common, "inputs": [a, b], "output": str(tmp_path / "plain")}), workers=1)
    transform(config_from_values({**common, "inputs": [a], "output": str(tmp_path / "grown")}), workers=1)
    values, manifest = appended_values(
        {"inputs": [b], "output": str(tmp_path / "grown"), "tokenizer": str(tokenizer)}, {}
    )
    summary = transform(config_from_values(values), workers=1, append=manifest)
    assert "appended:" in summary.line()
    assert folder_bytes(tmp_path / "grown") == folder_bytes(tmp_path / "whole")  # shards and manifest
    assert verify_output(tmp_path / "grown").ok
    # A is large enough that no partition holds both A and B: the shards are plain `transform A B`'s too.
    fingerprinted = ("manifest.json", "state.json", "dataset_info.json")
    assert {k: v for k, v in folder_bytes(tmp_path / "grown").items() if k not in fingerprinted} == {
        k: v for k, v in folder_bytes(tmp_path / "plain").items() if k not in fingerprinted
    }


@pytest.mark.parametrize("objective", REGISTRY.names())
def test_appending_gives_the_bytes_of_the_whole_run_for_every_objective(objective, halves, sample_tokenizer, tmp_path):
    records = REGISTRY.named(objective).reads(REGISTRY.named(objective).options_type()).records
    extra = {"chat_template": str(TEMPLATES / "mistral.jinja")} if records else {}
    _appended_equals_whole(halves, sample_tokenizer, tmp_path, objective=objective, seq_len=96, **extra)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_appending_gives_the_bytes_of_the_whole_run_for_every_format(fmt, halves, sample_tokenizer, tmp_path):
    packing = {"packing": "none"} if fmt in whole_document_formats() else {}
    split = {"split": "validation=20%"} if fmt in ("arrow", "parquet") else {}  # a document in validation stays there
    _appended_equals_whole(halves, sample_tokenizer, tmp_path, output_format=fmt, seq_len=128, **split, **packing)


def test_what_an_append_cannot_keep_is_refused_in_one_line(halves, sample_tokenizer, tmp_path):
    a, b = halves / "a.jsonl", halves / "b.jsonl"
    _run(a, "-t", sample_tokenizer, "-o", tmp_path / "out", "--seq-len", "128", "-q")
    cases = [
        ((b, "--seq-len", "64"), "--seq-len 64 differs from the output's configuration (128)"),
        ((a,), "is already in the output"),
        ((tmp_path / "nothing-here.jsonl",), "no such file"),
    ]
    for args, message in cases:
        result = run_cli("transform", *args, "-o", tmp_path / "out", "--append", "-t", sample_tokenizer)
        assert result.returncode == 1 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    _run(a, "-t", sample_tokenizer, "-o", tmp_path / "shuffled", "--shuffle-rows", "-q")
    result = run_cli("transform", b, "-o", tmp_path / "shuffled", "--append", "-t", sample_tokenizer)
    assert result.returncode == 1 and "--shuffle-rows" in result.stderr
    result = run_cli("transform", b, "-o", tmp_path / "none", "--append", "-t", sample_tokenizer)
    assert result.returncode == 1 and "holds no finished output" in result.stderr
    result = run_cli("transform", b, "-o", "-", "--append", "-t", sample_tokenizer)
    assert result.returncode == 1 and "standard output holds no earlier shards" in result.stderr
    copy = tmp_path / "copy-of-a.jsonl"
    copy.write_bytes(a.read_bytes())
    result = run_cli("transform", copy, "-o", tmp_path / "out", "--append", "-t", sample_tokenizer)
    assert result.returncode == 1 and "holds the same bytes as" in result.stderr and result.stderr.count("\n") == 1
    _run(b, "-t", sample_tokenizer, "-o", tmp_path / "other", "--seq-len", "128", "-q")
    assert run_cli("merge", tmp_path / "out", tmp_path / "other", "-o", tmp_path / "merged", "-q").returncode == 0
    result = run_cli("transform", copy, "-o", tmp_path / "merged", "--append", "-t", sample_tokenizer)
    assert result.returncode == 1 and "was made by 'objcli merge' of 2 outputs" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_killed_append_leaves_the_old_output_and_a_rerun_finishes_it(halves, sample_tokenizer, tmp_path):
    a, b = halves / "a.jsonl", halves / "b.jsonl"
    common = ["-t", str(sample_tokenizer), "--partition-size", "16KiB", "-q"]
    _run(a, "-o", tmp_path / "grown", *common)
    before = folder_bytes(tmp_path / "grown")
    env = {**os.environ, "OBJCLI_CRASH_AT": "partition-done:2"}
    killed = subprocess.run(
        [
            sys.executable,
            "-m",
            "objcli",
            "transform",
            str(b),
            "-o",
            str(tmp_path / "grown"),
            "--append",
            *common,
            "--workers",
            "1",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9
    assert verify_output(tmp_path / "grown").ok  # the old manifest and every shard it lists
    assert json.loads((tmp_path / "grown" / "manifest.json").read_text()) == json.loads(before["manifest.json"])
    _run(b, "-o", tmp_path / "grown", "--append", *common)
    _run("--recipe", tmp_path / "grown" / "manifest.json", "-o", tmp_path / "whole", "-q")  # the whole run
    assert folder_bytes(tmp_path / "grown") == folder_bytes(tmp_path / "whole")
    assert not Path(tmp_path / "grown" / ".objcli-tmp").exists()


def test_small_inputs_appended_start_partitions_of_their_own(halves, sample_tokenizer, tmp_path):
    """Small files share a partition in one run; an appended one never joins the output's last
    partition (which is finished): the recipe records where it starts, and replaying the recipe
    writes the same bytes."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    lines = (halves / "a.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    a.write_text("".join(lines[:5]), encoding="utf-8")
    b.write_text("".join(lines[5:10]), encoding="utf-8")
    common = ["-t", str(sample_tokenizer), "--seq-len", "64", "-q"]
    _run(a, "-o", tmp_path / "grown", *common)
    _run(b, "-o", tmp_path / "grown", "--append", "-t", str(sample_tokenizer), "-q")
    manifest = json.loads((tmp_path / "grown" / "manifest.json").read_text())
    assert len(manifest["partitions"]) == 2 and manifest["recipe"]["input-breaks"] == [1]
    _run("--recipe", tmp_path / "grown" / "manifest.json", "-o", tmp_path / "replayed", "-q")
    assert folder_bytes(tmp_path / "replayed") == folder_bytes(tmp_path / "grown")
    _run(a, b, "-o", tmp_path / "together", *common)  # one run puts both small files in one partition
    assert len(json.loads((tmp_path / "together" / "manifest.json").read_text())["partitions"]) == 1


def test_an_objective_named_by_its_alias_appends(halves, sample_tokenizer, tmp_path):
    """Repeating the run's flags with an objective's alias (t5 for span-corruption) names the same
    objective: the append goes on (it was refused as a different configuration)."""
    a, b = halves / "a.jsonl", halves / "b.jsonl"
    _run(a, "-t", sample_tokenizer, "-o", tmp_path / "out", "--objective", "t5", "--seq-len", "128", "-q")
    flags = ("--append", "-t", sample_tokenizer, "--seq-len", "128", "-q")
    assert run_cli("transform", b, "-o", tmp_path / "out", "--objective", "t5", *flags).returncode == 0
    refused = run_cli("transform", b, "-o", tmp_path / "out", "--objective", "mlm", *flags)
    assert refused.returncode == 1 and "--objective 'mlm' differs" in refused.stderr
    assert verify_output(tmp_path / "out").ok


def test_an_append_takes_the_tokenizer_by_content_and_runs_from_any_folder(tmp_path):
    """Issue 83, item 5: the output's tokenizer named by another path (absolute, a copy) is that tokenizer;
    without -t, an append run from another folder finds the tokenizer and the output's inputs where the
    manifest recorded them; the result equals one run over every input; another tokenizer is one line."""
    from runs import SAMPLE, run_cli

    work = tmp_path / "work"
    work.mkdir()
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)
    for k, name in enumerate("abc"):
        (work / f"{name}.jsonl").write_text("".join(lines[30 * k : 30 * (k + 1)]))
    shutil.copy(SAMPLE / "tokenizer.model", work / "tok.model")
    shutil.copy(SAMPLE / "tokenizer.model", tmp_path / "copy.model")
    made = run_cli("transform", "a.jsonl", "-t", "tok.model", "--seq-len", "64", "-o", "out", "-q", cwd=work)
    assert made.returncode == 0, made.stderr
    by_copy = run_cli("transform", "b.jsonl", "-o", "out", "--append", "-t", tmp_path / "copy.model", "-q", cwd=work)
    assert by_copy.returncode == 0, by_copy.stderr
    elsewhere = run_cli("transform", work / "c.jsonl", "-o", work / "out", "--append", "-q", cwd=tmp_path)
    assert elsewhere.returncode == 0, elsewhere.stderr
    for step in (["a.jsonl", "--seq-len", "64"], ["b.jsonl", "--append"], ["c.jsonl", "--append"]):
        done = run_cli("transform", *step, "-t", "tok.model", "-o", "here", "-q", cwd=work)  # all from its folder
        assert done.returncode == 0, done.stderr
    from objcli.reading import Rows

    assert [r["input_ids"].tolist() for r in Rows(work / "out")] == [
        r["input_ids"].tolist() for r in Rows(work / "here")
    ]
    other = run_cli("transform", work / "c.jsonl", "-o", work / "out", "--append", "-t", SAMPLE / "code.model")
    assert other.returncode != 0 and "is not the output's tokenizer" in other.stderr
