"""The command line through Click's CliRunner: exit codes and the exact error text."""

import json
import re

import pytest
from paths import ROOT
from runs import cli

from objcli.cli import main


def invoke(*args, input=None):
    return cli([str(a) for a in args], input=input, catch_exceptions=False)


def test_missing_text_key_is_one_clear_line(tmp_path, sample_tokenizer):
    data = tmp_path / "docs.jsonl"
    data.write_text('{"content": "hello", "id": 1}\n{"content": "world", "id": 2}\n')
    result = invoke("transform", data, "-t", sample_tokenizer, "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert result.output == (
        f"Error: input {data}: no record has the field 'text' (fields of the first record: content, id); "
        "choose the text field with --text-key\n"
    )
    assert not (tmp_path / "out" / "manifest.json").exists()
    ok = invoke(
        "transform", data, "-t", sample_tokenizer, "-o", tmp_path / "out", "--text-key", "content", "--seq-len", "4"
    )
    assert ok.exit_code == 0, ok.output


def test_missing_input_file(tmp_path, sample_tokenizer):
    result = invoke("transform", tmp_path / "nope.jsonl", "-t", sample_tokenizer, "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert result.output == f"Error: input {tmp_path / 'nope.jsonl'}: no such file or directory; check the path\n"


def test_strict_stops_at_a_broken_json_line(tmp_path, sample_tokenizer):
    data = tmp_path / "docs.jsonl"
    data.write_text('{"text": "fine"}\n{"text": "oops"\n{"text": "fine"}\n')
    result = invoke("transform", data, "-t", sample_tokenizer, "-o", tmp_path / "out", "--strict")
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {data}:2: broken JSON (Input data was truncated); "
        "fix the JSON on that line or pass without --strict to skip such records\n"
    )
    lenient = invoke("transform", data, "-t", sample_tokenizer, "-o", tmp_path / "out2", "--seq-len", "2")
    assert lenient.exit_code == 0
    assert f"warning: skipped 1 record (bad_json); first at {data}:2: broken JSON" in lenient.output
    assert "3 documents read, 2 written, 1 skipped (1 bad_json)" in lenient.output


def test_missing_tokenizer_and_not_a_model(tmp_path, small_corpus):
    result = invoke("transform", small_corpus, "-t", tmp_path / "tok.model", "-o", tmp_path / "out")
    assert result.output == (
        f"Error: tokenizer {tmp_path / 'tok.model'}: no such file; pass a SentencePiece .model or a tokenizer.json "
        "with --tokenizer\n"
    )
    (tmp_path / "junk.model").write_bytes(b"not a model")
    result = invoke("transform", small_corpus, "-t", tmp_path / "junk.model", "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert result.output.startswith(
        f"Error: tokenizer {tmp_path / 'junk.model'}: neither a SentencePiece model nor a tokenizer.json"
    )


def test_existing_output_of_another_configuration_needs_overwrite(tmp_path, small_corpus, sample_tokenizer):
    out = tmp_path / "out"
    args = ["transform", small_corpus / "prose.jsonl", "-t", sample_tokenizer, "-o", out, "--seq-len", "64"]
    assert invoke(*args).exit_code == 0
    shard = next(out.glob("part-*"))
    written = shard.stat().st_mtime_ns

    same = invoke(*args)  # the same command again finds its run complete and leaves it alone
    assert same.exit_code == 0
    assert same.output.startswith(f"objcli: {out} already holds this run, complete and checked (")
    assert same.output.endswith("nothing to do\n")
    assert shard.stat().st_mtime_ns == written
    rebuilt = invoke(*args, "--overwrite")  # the same configuration, written again from scratch
    assert rebuilt.exit_code == 0 and "already holds" not in rebuilt.output
    assert shard.stat().st_mtime_ns != written

    other = [*args[:-1], "32"]
    refused = invoke(*other)
    assert refused.exit_code == 1
    assert refused.output == (
        f"Error: output {out}: already holds a run of another configuration (changed: --seq-len); "
        "pass --overwrite to replace it or choose another folder\n"
    )
    assert invoke(*other, "--resume").exit_code == 1
    assert invoke(*other, "--resume", "--overwrite").output == (
        "Error: --resume keeps an earlier run and --overwrite replaces it; pass one of them\n"
    )
    assert invoke(*other, "--overwrite").exit_code == 0
    assert json.loads((out / "manifest.json").read_text())["config"]["seq_len"] == 32


def test_resume_needs_an_earlier_run(tmp_path, small_corpus, sample_tokenizer):
    out = tmp_path / "fresh"
    result = invoke("transform", small_corpus, "-t", sample_tokenizer, "-o", out, "--resume")
    assert result.exit_code == 1
    assert result.output == (
        f"Error: --resume: output {out} holds no earlier run of this configuration; drop --resume to start one\n"
    )


def test_bad_option_values(tmp_path, small_corpus, sample_tokenizer):
    base = ["transform", small_corpus, "-t", sample_tokenizer, "-o", tmp_path / "out"]
    assert invoke(*base, "--shard-size", "12parsecs").output == (
        "Error: --shard-size 12parsecs: unknown unit 'parsecs'; use rows, KB, MB, GB, KiB, MiB or GiB\n"
    )
    assert invoke(*base, "--seq-len", "1").output == "Error: --seq-len 1: must be between 2 and 16777216\n"
    from objcli.objectives import REGISTRY

    assert invoke(*base, "--objective", "clmm").output == (
        f"Error: unknown objective 'clmm'; did you mean clm? known objectives: {', '.join(REGISTRY.names())}\n"
    )
    assert invoke(*base, "--format", "npy", "-o", "-").exit_code == 1


def test_inspect_shows_segments_and_padding(tmp_path, sample_tokenizer):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "Hello world."}\n{"text": "Second doc."}\n')
    assert (
        invoke(
            "transform", data, "-t", sample_tokenizer, "-o", tmp_path / "out", "--seq-len", "64", "--remainder", "pad"
        ).exit_code
        == 0
    )
    result = invoke("inspect", tmp_path / "out", "--no-color")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith("── row 0 · part-00000-of-00001.arrow · 64 tokens")
    assert re.fullmatch(r"\[1\] Hello world\.</s> \[2\] Second doc\.</s> \[pad ×\d+\]", lines[1])


def test_train_tokenizer_is_deterministic_and_reserves_specials(tmp_path, small_corpus):
    args = ["train-tokenizer", small_corpus / "prose.jsonl", "--vocab-size", "600", "--special", "[MASK]"]
    assert invoke(*args, "-o", tmp_path / "a.model").exit_code == 0
    assert invoke(*args, "-o", tmp_path / "b.model").exit_code == 0
    assert (tmp_path / "a.model").read_bytes() == (tmp_path / "b.model").read_bytes()
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "a.model"))
    assert [sp.id_to_piece(i) for i in range(5)] == ["<unk>", "<s>", "</s>", "<pad>", "[MASK]"]
    assert sp.encode("[MASK]") != [4]  # a control piece: never produced from text


def test_every_command_is_in_the_readme_or_the_manual():
    docs = (ROOT / "README.md").read_text() + "".join(p.read_text() for p in (ROOT / "objcli" / "docs").glob("*.md"))
    for name in main.commands:
        assert f"objcli {name}" in docs, f"neither the README nor the manual shows 'objcli {name}'"


def test_the_readmes_two_setup_commands_are_the_makefiles_targets():
    """The README's set-up block (its pasted output is run by test_docs): each ``make X`` it names is a
    target of the Makefile, ``demo`` transforms sample_data/ and ``test`` runs pytest, both installing
    into the project's own environment first."""
    readme = (ROOT / "README.md").read_text()
    named = re.findall(r"^make (\w+)\s+#", readme, re.M)
    assert named[:2] == ["demo", "test"], named
    makefile = (ROOT / "Makefile").read_text()
    recipes = dict(
        re.findall(r"^(\w[\w-]*): ([^\n]*)\n((?:\t[^\n]*\n)+)", makefile, re.M)
        and [(m.group(1), m.group(3)) for m in re.finditer(r"^(\w[\w-]*):([^\n]*)\n((?:\t[^\n]*\n)+)", makefile, re.M)]
    )
    for target in named:
        assert target in recipes, f"README names make {target}; the Makefile has no such target"
    assert "objcli transform sample_data/" in recipes["demo"] and "pytest" in recipes["test"]
    prerequisites = dict(re.findall(r"^(demo|test): (\S+)", makefile, re.M))
    assert all(p.startswith("$(VENV)/.installed") for p in prerequisites.values()), prerequisites


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--objective", "clm", "--mask-prob", "0.2"],
            "Error: --mask-prob applies to electra, mlm, nsp, sop, not to clm\n",
        ),
        (
            ["--objective", "t5", "--whole-word"],
            "Error: --whole-word applies to mlm, nsp, sop, not to span-corruption\n",
        ),
        (
            ["--objective", "clm", "--remainder", "pad", "--packing", "best-fit"],
            "Error: --remainder pad: applies to --packing concat, not best-fit\n",
        ),
    ],
)
def test_options_of_another_objective_or_packer_are_refused(flags, message, small_corpus, sample_tokenizer, tmp_path):
    result = cli(["transform", str(small_corpus), "-t", sample_tokenizer, "-o", str(tmp_path / "o"), *flags])
    assert result.exit_code == 1 and result.output == message


def test_manifest_records_everything_needed(tmp_path, small_corpus, sample_tokenizer):
    invoke(
        "transform",
        small_corpus,
        "-t",
        sample_tokenizer,
        "-o",
        tmp_path / "out",
        "--seq-len",
        "128",
        "--text-unit",
        "paragraph",
    )
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["complete"] is True
    assert manifest["tokenizer"]["vocab_size"] == 8000 and len(manifest["tokenizer"]["sha256"]) == 64
    assert manifest["special_tokens"]["ids"] == {"eos": 2}
    assert [c["name"] for c in manifest["columns"]] == ["input_ids", "segment_ids", "position_ids"]
    assert [i["path"] for i in manifest["inputs"]] == [
        str(small_corpus / n) for n in ("code.jsonl", "prose.jsonl", "reference.txt")
    ]
    for shard in manifest["shards"]:
        assert set(shard) >= {"files", "rows", "tokens", "padding_tokens", "documents", "sha256"}


def test_megatron_refuses_objectives_with_labels(tmp_path, small_corpus, sample_tokenizer):
    result = invoke(
        "transform",
        small_corpus,
        "-t",
        sample_tokenizer,
        "-o",
        tmp_path / "out",
        "--objective",
        "t5",
        "--format",
        "megatron",
    )
    assert result.exit_code == 1
    assert result.output == (
        "Error: --format megatron stores input_ids only, and span-corruption also writes labels; "
        "choose --format arrow, hf, npy or parquet\n"
    )


@pytest.mark.parametrize(
    "content, expected",
    [
        ("[]", "the run did not complete"),
        ('{"complete": true}', "not an objcli manifest (Object missing required field `objective`)"),
        ('{"complete": true, "objective": "clm", "shards": 3}', "not an objcli manifest"),
        # Invalid UTF-8: msgspec 0.23 raises DecodeError for it, older ones UnicodeDecodeError.
        (b'{"complete": true, "objective": "cl\xff"}', "manifest.json: not valid JSON"),
    ],
)
@pytest.mark.parametrize("command", ["verify", "stats", "inspect"])
def test_a_manifest_that_does_not_fit_the_schema_is_one_line(command, content, expected, tmp_path):
    (tmp_path / "manifest.json").write_bytes(content if isinstance(content, bytes) else content.encode())
    result = cli([command, str(tmp_path)])
    assert result.exit_code == 1 and result.output.startswith("Error: ") and expected in result.output
    assert len(result.output.splitlines()) == 1


@pytest.mark.parametrize("command", ["inspect", "transform"])
def test_a_reader_that_stops_reading_ends_the_command_quietly(command, tmp_path, small_corpus, sample_tokenizer):
    """``objcli inspect OUT | head`` and ``objcli transform ... -o - | head``: when the pipe's reader
    goes away, the command stops as Unix tools do (status 141, SIGPIPE's) and says nothing; inspect
    used to call the output damaged ("its files do not match its manifest: BrokenPipeError")."""
    import subprocess
    import sys

    out = tmp_path / "out"
    cli(
        ["transform", str(small_corpus), "-t", str(sample_tokenizer), "-o", str(out), "--seq-len", "64", "-q"],
        catch_exceptions=False,
    )
    args = (
        ["inspect", str(out), "--rows", "500"]
        if command == "inspect"
        else ["transform", str(small_corpus), "-t", str(sample_tokenizer), "-o", "-", "--seq-len", "64", "-q"]
    )
    process = subprocess.Popen([sys.executable, "-m", "objcli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert len(process.stdout.read(100)) == 100
    process.stdout.close()  # the reader goes away with most of the output unread
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141 and stderr == ""
