"""Issue 30: hostile use of the newest features, each from its reproduction and from its class."""

import json

import pytest
from click.testing import CliRunner
from conftest import run_transform

from objcli.cli import main


@pytest.fixture(scope="module")
def mlm_output(small_corpus, sample_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("mlm") / "out"
    run_transform([small_corpus / "prose.jsonl"], sample_tokenizer, out, objective="mlm", seq_len=64)
    return out


@pytest.mark.parametrize(("name", "message"), [
    ("plot.txt", "name a .png, .pdf or .svg file"),
    ("plot", "name a .png, .pdf or .svg file"),
    (".png", "name a .png, .pdf or .svg file"),  # a hidden file named only by its extension
    ("plot.jpeg", "name a .png, .pdf or .svg file"),
    ("", "is a folder"),  # the folder itself
    ("sub/", "is a folder"),
    ("missing/x.png", "missing does not exist; create it"),
])
def test_a_plot_path_that_cannot_be_written_is_one_line_before_any_work(mlm_output, tmp_path, name, message):
    (tmp_path / "sub").mkdir()
    target = str(tmp_path / name) if name else str(tmp_path)
    if name.endswith("/"):
        target += "/"
    result = CliRunner().invoke(main, ["stats", str(mlm_output), "--plot", target])
    assert result.exit_code == 1 and result.output.count("\n") == 1 and message in result.output, result.output
    assert result.output.startswith("Error: --plot") and sorted(p.name for p in tmp_path.iterdir()) == ["sub"]


@pytest.mark.parametrize("suffix", ["png", "PDF", "svg"])
def test_a_plot_in_each_format_is_written_whole(mlm_output, tmp_path, suffix):
    target = tmp_path / f"stats.{suffix}"
    result = CliRunner().invoke(main, ["stats", str(mlm_output), "--plot", str(target)])
    assert result.exit_code == 0, result.output
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}[suffix.lower()]
    assert target.read_bytes().startswith(magic) and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_export_tokenizer_never_overwrites_without_asking_nor_the_runs_own(mlm_output, small_corpus, sample_tokenizer,
                                                                          tmp_path):
    """Item 6: export-tokenizer -o DIR replaced a tokenizer in DIR silently, the run's own included
    (then the output no longer verified and the run could not be repeated)."""
    from pathlib import Path

    runner = CliRunner()
    out = tmp_path / "tok"
    first = runner.invoke(main, ["export-tokenizer", str(mlm_output), "-o", str(out)])
    assert first.exit_code == 0, first.output
    written = (out / "tokenizer.model").read_bytes()
    again = runner.invoke(main, ["export-tokenizer", str(mlm_output), "-o", str(out)])
    assert again.exit_code == 1 and "exists; pass --overwrite" in again.output and again.output.count("\n") == 1
    (out / "tokenizer.model").write_bytes(b"edited")
    forced = runner.invoke(main, ["export-tokenizer", str(mlm_output), "-o", str(out), "--overwrite"])
    assert forced.exit_code == 0 and (out / "tokenizer.model").read_bytes() == written
    # The run's own tokenizer: a copy the output was made with, exported into its own folder.
    own = tmp_path / "own"
    own.mkdir()
    (own / "tokenizer.model").write_bytes(Path(sample_tokenizer).read_bytes())
    run_transform([small_corpus / "prose.jsonl"],
                  own / "tokenizer.model", tmp_path / "run", objective="mlm", seq_len=64)
    before = (own / "tokenizer.model").read_bytes()
    for flags in ([], ["--overwrite"]):
        refused = runner.invoke(main, ["export-tokenizer", str(tmp_path / "run"), "-o", str(own), *flags])
        assert refused.exit_code == 1 and "is the run's own tokenizer file" in refused.output
    assert (own / "tokenizer.model").read_bytes() == before
    verified = runner.invoke(main, ["verify", str(tmp_path / "run")])
    assert verified.exit_code == 0, verified.output
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["tokenizer"]["path"].endswith("tokenizer.model")
