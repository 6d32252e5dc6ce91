"""Issue 30: hostile use of the newest features, each from its reproduction and from its class."""

import json

import pytest
from runs import cli, run_transform


@pytest.fixture(scope="module")
def mlm_output(small_corpus, sample_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("mlm") / "out"
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, out, objective="mlm", seq_len=64)
    return out


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("plot.txt", "name a .png, .pdf or .svg file"),
        ("plot", "name a .png, .pdf or .svg file"),
        (".png", "name a .png, .pdf or .svg file"),  # a hidden file named only by its extension
        ("plot.jpeg", "name a .png, .pdf or .svg file"),
        ("", "is a folder"),  # the folder itself
        ("sub/", "is a folder"),
        ("missing/x.png", "missing does not exist; create it"),
    ],
)
def test_a_plot_path_that_cannot_be_written_is_one_line_before_any_work(mlm_output, tmp_path, name, message):
    (tmp_path / "sub").mkdir()
    target = str(tmp_path / name) if name else str(tmp_path)
    if name.endswith("/"):
        target += "/"
    result = cli(["stats", str(mlm_output), "--plot", target])
    assert result.exit_code == 1 and result.output.count("\n") == 1 and message in result.output, result.output
    assert result.output.startswith("Error: --plot") and sorted(p.name for p in tmp_path.iterdir()) == ["sub"]


@pytest.mark.parametrize("suffix", ["png", "PDF", "svg"])
def test_a_plot_in_each_format_is_written_whole(mlm_output, tmp_path, suffix):
    target = tmp_path / f"stats.{suffix}"
    result = cli(["stats", str(mlm_output), "--plot", str(target)])
    assert result.exit_code == 0, result.output
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}[suffix.lower()]
    assert target.read_bytes().startswith(magic) and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_export_tokenizer_never_overwrites_without_asking_nor_the_runs_own(
    mlm_output, small_corpus, sample_tokenizer, tmp_path
):
    """Item 6: export-tokenizer -o DIR replaced a tokenizer in DIR silently, the run's own included
    (then the output no longer verified and the run could not be repeated)."""
    from pathlib import Path

    out = tmp_path / "tok"
    first = cli(["export-tokenizer", str(mlm_output), "-o", str(out)])
    assert first.exit_code == 0, first.output
    written = (out / "tokenizer.model").read_bytes()
    again = cli(["export-tokenizer", str(mlm_output), "-o", str(out)])
    assert again.exit_code == 1 and "exists; pass --overwrite" in again.output and again.output.count("\n") == 1
    (out / "tokenizer.model").write_bytes(b"edited")
    forced = cli(["export-tokenizer", str(mlm_output), "-o", str(out), "--overwrite"])
    assert forced.exit_code == 0 and (out / "tokenizer.model").read_bytes() == written
    # The run's own tokenizer: a copy the output was made with, exported into its own folder.
    own = tmp_path / "own"
    own.mkdir()
    (own / "tokenizer.model").write_bytes(Path(sample_tokenizer).read_bytes())
    run_transform(
        [small_corpus / "prose.jsonl"], own / "tokenizer.model", tmp_path / "run", objective="mlm", seq_len=64
    )
    before = (own / "tokenizer.model").read_bytes()
    for flags in ([], ["--overwrite"]):
        refused = cli(["export-tokenizer", str(tmp_path / "run"), "-o", str(own), *flags])
        assert refused.exit_code == 1 and "is the run's own tokenizer file" in refused.output
    assert (own / "tokenizer.model").read_bytes() == before
    verified = cli(["verify", str(tmp_path / "run")])
    assert verified.exit_code == 0, verified.output
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["tokenizer"]["path"].endswith("tokenizer.model")


@pytest.mark.parametrize("command", ["verify", "inspect", "stats"])
@pytest.mark.parametrize("escape", ["../outside.arrow", "/tmp/outside.arrow", "sub/../../outside.arrow", ".."])
def test_a_manifest_cannot_send_reads_outside_its_folder(small_corpus, sample_tokenizer, tmp_path, command, escape):
    """Item 9: a shard listed as ../outside.arrow or an absolute path, with a matching sha256, was read
    by verify ("every check passed") and inspect. Local outputs now refuse what object storage refuses."""
    import hashlib
    import shutil

    out = tmp_path / "deep" / "out"
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, out, seq_len=64)
    manifest = json.loads((out / "manifest.json").read_text())
    first = manifest["shards"][0]["files"][0]
    target = (out / escape).resolve() if not escape.startswith("/") else tmp_path / "abs" / "outside.arrow"
    if escape != "..":
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / first, target)
    name = str(target) if escape.startswith("/") else escape
    digest = hashlib.sha256((out / first).read_bytes()).hexdigest()
    manifest["shards"][0]["files"][0] = name
    manifest["shards"][0]["sha256"] = {name: digest}
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = cli([command, str(out)])
    assert result.exit_code == 1 and "is not a file name inside the output folder" in result.output, result.output
    assert result.output.startswith("Error:") and result.output.count("\n") == 1


@pytest.mark.parametrize(
    ("fmt", "name", "damage"),
    [
        ("megatron", "megatron.txt", "edit"),
        ("megatron", "megatron.txt", "delete"),
        ("hf", "state.json", "delete"),
        ("hf", "dataset_info.json", "edit"),
    ],
)
def test_verify_checks_the_files_a_formats_loader_opens(small_corpus, sample_tokenizer, tmp_path, fmt, name, damage):
    """Item 9: a deleted or edited megatron.txt (pointing at ../../etc/passwd) or a deleted HF
    state.json passed verify."""
    out = tmp_path / "out"
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, out, seq_len=64, output_format=fmt)
    assert cli(["verify", str(out)]).exit_code == 0
    if damage == "delete":
        (out / name).unlink()
    else:
        (out / name).write_text("100 ../../etc/passwd\n" if fmt == "megatron" else "{}\n")
    result = cli(["verify", str(out)])
    assert result.exit_code == 1 and name in result.output
    assert ("is missing" if damage == "delete" else "differs from what the manifest's shards make it") in result.output


@pytest.mark.parametrize(
    ("extra", "point"),
    [
        ([], "shard-write:1"),  # the first pass
        (["--shuffle-rows"], "shuffle-bucket:1"),  # the second pass (a 48-56 line traceback before)
        (["--shuffle-rows"], "shard-write:3"),  # a shard written by the second pass
        (["--format", "megatron"], "format-file:1"),  # megatron.txt
        (["--format", "hf"], "format-file:2"),  # dataset_info.json
        ([], "manifest.json:1"),  # the manifest, last
        (["--split", "validation=20%"], "rename:1"),  # a shard renamed to its final name
    ],
)
def test_a_full_disk_on_every_write_path_is_one_line_and_a_rerun_finishes(
    small_corpus, sample_tokenizer, tmp_path, extra, point
):
    """Item 1: every write path turns an OS error into the one-line output error, leaves no manifest
    and no half-written file, and the same command then finishes with the bytes of a clean run."""
    import os
    import subprocess
    import sys

    def run(out, fault=None):
        env = {**os.environ, **({"OBJCLI_CRASH_AT": fault} if fault else {})}
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "objcli",
                "transform",
                str(small_corpus / "prose.jsonl"),
                "-t",
                sample_tokenizer,
                "--seq-len",
                "64",
                "--shard-size",
                "200",
                "--workers",
                "1",
                "-o",
                str(out),
                "-q",
                *extra,
            ],
            env=env,
            capture_output=True,
            text=True,
        )

    failed = run(tmp_path / "out", f"{point}:ENOSPC")
    assert failed.returncode == 1, failed.stderr
    assert failed.stderr == (
        f"Error: output {tmp_path / 'out'}: no space left on the device; free some space and rerun "
        "the same command (finished partitions are kept)\n"
    )
    assert not (tmp_path / "out" / "manifest.json").exists()
    assert not [p for p in (tmp_path / "out").rglob("*") if p.name.endswith(".tmp") and p.is_file()]
    assert run(tmp_path / "out").returncode == 0 and run(tmp_path / "clean").returncode == 0
    listed = json.loads((tmp_path / "clean" / "manifest.json").read_text())
    for shard in listed["shards"]:
        for name in shard["files"]:
            assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()
