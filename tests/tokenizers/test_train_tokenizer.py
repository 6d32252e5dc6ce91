"""``objcli train-tokenizer``: one-line errors before any training (issue 17, item 8), progress
from SentencePiece's own log, and a code preset whose newlines are learnable."""

import pytest
import sentencepiece as spm
from click.testing import CliRunner
from conftest import run_cli

from objcli.cli import main


def _train(*args):
    return CliRunner().invoke(main, ["train-tokenizer", *map(str, args), "-q"])


@pytest.mark.parametrize(
    "case, message",
    [
        ("folder", "Error: output {tmp}/existing: is a folder; name the .model file to write"),
        ("proc", "Error: output /proc/x.model: cannot be written"),
        ("empty", "Error: inputs: no text to train on (0 documents with text)"),
        ("too large", "Error: --vocab-size 50000: too large for this corpus, which makes at most"),
        ("too small", "Error: --vocab-size 60: too small for the"),
        ("threads", "Error: Invalid value for '--threads': 0 is not in the range 1<=x<=1024"),
    ],
)
def test_bad_requests_fail_in_one_line_and_leave_no_temp_file(tmp_path, small_corpus, case, message):
    """Item 8: each of these was a traceback, an INTERNAL: src/trainer_interface.cc message, or a
    failure after the whole training that left tokdir.tmp behind."""
    (tmp_path / "existing").mkdir()
    (tmp_path / "empty.txt").write_text("\n\n")
    prose = small_corpus / "prose.jsonl"
    args = {
        "folder": [prose, "--vocab-size", 500, "-o", tmp_path / "existing"],
        "proc": [prose, "--vocab-size", 500, "-o", "/proc/x.model"],
        "empty": [tmp_path / "empty.txt", "--vocab-size", 500, "-o", tmp_path / "e.model"],
        "too large": [prose, "--vocab-size", 50000, "-o", tmp_path / "e.model"],
        "too small": [prose, "--vocab-size", 60, "-o", tmp_path / "e.model"],
        "threads": [prose, "--vocab-size", 500, "--threads", 0, "-o", tmp_path / "e.model"],
    }[case]
    result = _train(*args)
    assert result.exit_code != 0
    error = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(error) == 1 and error[0].startswith(message.format(tmp=tmp_path)), result.output
    assert "INTERNAL" not in result.output and "Traceback" not in result.output
    assert not list(tmp_path.glob("*.tmp")) and not (tmp_path / "e.model").exists()


def test_training_shows_progress_from_sentencepiece(tmp_path, small_corpus):
    """Rough edge: train-tokenizer printed nothing for minutes."""
    result = run_cli("train-tokenizer", small_corpus / "prose.jsonl", "--vocab-size", 500, "-o", tmp_path / "t.model")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith("objcli: loaded ") and line.endswith(" sentences") for line in lines)
    assert any(line.startswith("objcli: EM round: ") for line in lines)
    assert all(line.startswith("objcli: ") for line in lines), "SentencePiece's own log leaked through"
    quiet = run_cli(
        "train-tokenizer", small_corpus / "prose.jsonl", "--vocab-size", 500, "-o", tmp_path / "q.model", "-q"
    )
    assert quiet.stderr.count("\n") == 1  # only the final line
    assert (tmp_path / "t.model").read_bytes() == (tmp_path / "q.model").read_bytes()  # progress changes nothing


def test_the_code_preset_learns_newlines_and_indentation(tmp_path, small_corpus):
    """Rough edge: --preset code trained line by line, so each newline cost a byte token."""
    model = tmp_path / "code.model"
    assert _train(small_corpus / "code.jsonl", "--vocab-size", 1200, "--preset", "code", "-o", model).exit_code == 0
    sp = spm.SentencePieceProcessor(model_file=str(model))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    assert "\n" in "".join(pieces) and any(p.strip("\n") == "" for p in pieces if "\n" in p)
    code = "def f(x):\n    if x:\n        return 1\n    return 2\n"
    ids = sp.encode(code)
    assert sp.decode(ids) == code
    assert sp.piece_to_id("<0x0A>") not in ids  # no newline falls back to a byte
