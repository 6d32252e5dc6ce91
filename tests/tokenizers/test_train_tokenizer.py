"""``objcli train-tokenizer``: one-line errors before any training (issue 17, item 8), progress
from SentencePiece's own log, and a code preset whose newlines are learnable."""

import pytest
import sentencepiece as spm
from runs import SAMPLE, as_a_terminal_starts_it, cli, run_cli


def _train(*args):
    return cli(["train-tokenizer", *map(str, args), "-q"])


@pytest.mark.parametrize(
    "case, message",
    [
        ("folder", "Error: output {tmp}/existing: is a folder; name the file to write"),
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


@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory):
    """Enough text that training takes a while (the trainer is stopped in the middle)."""
    from runs import SAMPLE

    path = tmp_path_factory.mktemp("train-long") / "corpus.jsonl"
    text = (SAMPLE / "code.jsonl").read_bytes() + (SAMPLE / "prose.jsonl").read_bytes()
    path.write_bytes(text * 6)
    return path


def _training(corpus, output):
    """The command training on ``corpus``, once its C++ trainer has the text (it waits for that state),
    and the processes under it."""
    import subprocess
    import sys

    import psutil

    command = [sys.executable, "-m", "objcli", "train-tokenizer", corpus, "--vocab-size", "8000"]
    process = subprocess.Popen(
        [*map(str, command), "--max-lines", "0", "--preset", "code", "-o", str(output)],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_a_terminal_starts_it,
    )
    for line in process.stderr:
        if "loaded" in line or "EM round" in line:
            break
    children = psutil.Process(process.pid).children(recursive=True)
    assert children, "the trainer runs in a child process"
    return process, children


@pytest.mark.parametrize(("sig", "status", "said"), [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
def test_a_signal_stops_training_at_once_leaving_no_model_and_no_process(tmp_path, long_corpus, sig, status, said):
    """Issue 65: SIGINT and SIGTERM were ignored for minutes (the C++ trainer never returns control).
    The trainer runs in a child the command kills: stopped in the middle of training (once the
    trainer says it loaded its sentences), the command ends in one line, no file, no process left."""
    import signal

    import psutil

    output = tmp_path / "tok.model"
    process, children = _training(long_corpus, output)
    process.send_signal(getattr(signal, sig))
    rest = process.stderr.read()
    assert process.wait(timeout=60) == status
    lines = [line for line in rest.splitlines() if line.startswith("Error")]
    assert lines == [
        f"Error: train-tokenizer: {said}{' (SIGTERM)' * (sig == 'SIGTERM')}; the trainer was stopped and no "
        "model written"
    ]
    assert "Traceback" not in rest and not output.exists() and not list(tmp_path.glob("*.tmp"))
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def test_a_byte_level_bpe_is_trained_as_a_tokenizer_json_that_transformers_and_objcli_read(tmp_path, small_corpus):
    """Issue 65: ``-o tokenizer.json`` trains a byte-level BPE (the tokenizers library's trainer) with
    the special tokens asked, and a tokenizer_config.json naming the EOS: transformers loads the folder,
    the stable library encodes every byte, and a transform runs on it with the EOS the config names."""
    import json

    import tokenizers
    from transformers import AutoTokenizer

    folder = tmp_path / "bpe"
    done = run_cli(
        "train-tokenizer", small_corpus / "prose.jsonl", "--vocab-size", "1200", "--special", "[MASK]",
        "-o", folder / "tokenizer.json", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "byte-level BPE, 1,200 pieces" in done.stderr
    library = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    text = "naïve café 日本 \x00 def f(x):\n\treturn x"
    assert library.decode(library.encode(text).ids) == text  # every byte is a token: nothing unknown
    loaded = AutoTokenizer.from_pretrained(str(folder))
    assert loaded.eos_token == "<|endoftext|>" and loaded.convert_tokens_to_ids("[MASK]") == 1
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|endoftext|>" and config["additional_special_tokens"] == ["[MASK]"]
    out = tmp_path / "out"
    run = run_cli("transform", small_corpus / "prose.jsonl", "-t", folder, "--seq-len", "128", "-o", out, "-q")
    assert run.returncode == 0 and "documents as …<|endoftext|>" in run.stderr, run.stderr


@pytest.mark.parametrize("flag", [("--preset", "code"), ("--model-type", "bpe"), ("--character-coverage", "1.0")])
def test_sentencepiece_options_are_refused_for_a_byte_level_bpe(tmp_path, small_corpus, flag):
    result = _train(small_corpus / "prose.jsonl", "--vocab-size", 500, *flag, "-o", tmp_path / "tokenizer.json")
    assert result.exit_code == 1 and f"Error: {flag[0]}: applies to a SentencePiece model" in result.output
    assert not (tmp_path / "tokenizer.json").exists()


def test_the_default_sample_is_sized_to_the_vocabulary_and_max_lines_0_reads_everything(tmp_path, small_corpus):
    from objcli.commands.train_tokenizer import SAMPLE_CHARS_PER_PIECE

    sampled = run_cli(
        "train-tokenizer", small_corpus / "prose.jsonl", "--vocab-size", "600", "-o", tmp_path / "a.model"
    )
    everything = run_cli(
        "train-tokenizer",
        small_corpus / "prose.jsonl",
        "--vocab-size",
        "600",
        "--max-lines",
        "0",
        "-o",
        tmp_path / "b.model",
    )
    assert sampled.returncode == everything.returncode == 0
    lines = [
        int(word.replace(",", ""))
        for r in (sampled, everything)
        for word in [r.stderr.split("trained on ")[1].split()[0]]
    ]
    assert (
        lines[0] < lines[1]
        and f"the default sample for 600 pieces, {SAMPLE_CHARS_PER_PIECE * 600 / 1e6:.1f} M" in sampled.stderr
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--special", ""), "Error: --special '': empty"),
        (("--special", "[M]", "--special", "[M]"), "Error: --special '[M]': given twice"),
        (("-o", "{tmp}/tokenizer_config.json"), "is the name of the configuration written beside the tokenizer"),
    ],
)
def test_hostile_training_requests_are_one_line_and_write_nothing(tmp_path, small_corpus, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    output = [] if "-o" in args else ["-o", tmp_path / "tokenizer.json"]
    result = _train(small_corpus / "prose.jsonl", "--vocab-size", 500, *args, *output)
    assert result.exit_code == 1 and message in result.output and result.output.count("\n") == 1
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGHUP"])
def test_the_trainer_dies_with_its_command_whatever_kills_it(tmp_path, long_corpus, sig):
    """Issue 69, item 4: kill -9 (or SIGHUP) of the command left the forked trainer running, and it wrote
    the model seconds later. The child now dies with its parent (PR_SET_PDEATHSIG)."""
    import signal

    import psutil

    output = tmp_path / "tok.model"
    process, children = _training(long_corpus, output)
    process.send_signal(getattr(signal, sig))
    process.wait(timeout=60)
    gone, alive = psutil.wait_procs(children, timeout=60)  # waits for the state, no fixed time
    assert not alive and not output.exists()


def test_long_lines_invalid_text_and_token_files_are_said(tmp_path, small_corpus):
    """Items 3 and 8: SentencePiece drops lines over 16,384 bytes without a word (now cut at whitespace,
    counted, and learnt from); invalid UTF-8 is a counted skip; token ids are refused as text."""
    import random

    rng = random.Random(2)
    short = [" ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(8)) for _ in range(3000)]
    greek = [" ".join(rng.choice(["αλφα", "βήτα", "γάμμα", "δέλτα", "έψιλον"]) for _ in range(2500)) for _ in range(60)]
    corpus = tmp_path / "mix.txt"
    corpus.write_text("\n".join(short + greek) + "\n")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good line here\n\xff\xfe bad\nanother good line\n")
    model = tmp_path / "m.model"
    result = run_cli("train-tokenizer", corpus, bad, "--vocab-size", "297", "--max-lines", "0", "-o", model)
    assert result.returncode == 0, result.stderr
    assert "60 lines over SentencePiece's 16,384 bytes cut" in result.stderr
    assert "1 records skipped (invalid_utf8)" in result.stderr
    processor = spm.SentencePieceProcessor(model_file=str(model))
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    assert any(any("\u0370" < c < "\u0400" for c in piece) for piece in pieces)
    ids = tmp_path / "ids"
    ids.mkdir()
    run_cli("transform", small_corpus, "-t", SAMPLE / "tokenizer.model", "--format", "megatron", "-o", tmp_path / "meg")
    for file in (tmp_path / "meg").glob("part-*"):
        (ids / file.name).write_bytes(file.read_bytes())
    for spec in (ids, f"{ids}/*.bin"):
        refused = run_cli("train-tokenizer", spec, "--vocab-size", "300", "-o", tmp_path / "x.model")
        assert refused.returncode == 1 and "holds megatron token ids, not text" in refused.stderr


def test_a_tokenizer_config_beside_the_output_keeps_its_own_settings(tmp_path, small_corpus):
    """Item 11: -o DIR/tokenizer.json replaced DIR/tokenizer_config.json, its chat template lost."""
    import json

    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": "{{ messages }}", "eos_token": "<|im_end|>"})
    )
    result = run_cli("train-tokenizer", small_corpus, "--vocab-size", "400", "--special", "<|im_end|>", "-o",
                     folder / "tokenizer.json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["chat_template"] == "{{ messages }}" and config["eos_token"] == "<|im_end|>"
    assert "tokenizer_config.json (kept its chat_template, eos_token)" in result.stderr


@pytest.mark.parametrize("output", ["tok.model", "tokenizer.json"])
def test_the_default_sample_covers_every_input_in_proportion(tmp_path, output):
    """Issue 72, item 2: the default sample was the first input's first lines, so a model trained on
    code then man pages never saw a man page. Each input now gives its share, said in the summary."""
    import random

    rng = random.Random(4)
    latin = tmp_path / "a-code.txt"
    latin.write_text(
        "\n".join(" ".join(rng.choice(["def", "return", "self", "import"]) for _ in range(9)) for _ in range(30_000))
    )
    greek = tmp_path / "b-man.txt"
    greek.write_text(
        "\n".join(" ".join(rng.choice(["αλφα", "βήτα", "γάμμα", "δέλτα"]) for _ in range(9)) for _ in range(30_000))
    )
    vocab = "290" if output.endswith(".model") else "300"  # SentencePiece's bytes and this alphabet fit
    result = run_cli("train-tokenizer", latin, greek, "--vocab-size", vocab, "-o", tmp_path / output)
    assert result.returncode == 0, result.stderr
    assert "characters from 2 inputs: a-code.txt" in result.stderr and "b-man.txt" in result.stderr
    if output.endswith(".model"):
        processor = spm.SentencePieceProcessor(model_file=str(tmp_path / output))
        assert len(processor.encode("βήτα")) <= 2  # a piece learnt from the second input
    else:
        from tokenizers import Tokenizer

        assert len(Tokenizer.from_file(str(tmp_path / output)).encode("βήτα").ids) <= 2  # 8 bytes, merged


def test_a_tokenizer_config_that_is_a_folder_or_no_json_is_said(tmp_path, small_corpus):
    """Hostile pass on item 11: a folder by that name is refused before training; a damaged file is
    replaced, and the summary says so."""
    (tmp_path / "a" / "tokenizer_config.json").mkdir(parents=True)
    refused = run_cli("train-tokenizer", small_corpus, "--vocab-size", "400", "-o", tmp_path / "a" / "tokenizer.json")
    assert refused.returncode == 1 and "tokenizer_config.json: is not a file" in refused.stderr
    assert not (tmp_path / "a" / "tokenizer.json").exists()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "tokenizer_config.json").write_text("[1, 2")
    result = run_cli("train-tokenizer", small_corpus, "--vocab-size", "400", "-o", tmp_path / "b" / "tokenizer.json")
    assert result.returncode == 0 and "(replaced: it was not readable JSON)" in result.stderr


@pytest.mark.parametrize("compressed", [False, True])
def test_the_sample_is_spread_over_a_sorted_input(tmp_path, compressed):
    """Issue 83, item 8: one input sorted by kind (code first, then man pages) and larger than the sample:
    the sample is drawn from all of it (byte ranges spread over a plain file; the lowest keyed uniforms of
    a compressed one read whole), so the pieces of its second half are learnt too."""
    import gzip
    import random

    rng = random.Random(5)
    lines = [" ".join(rng.choice(["def", "return", "self", "import"]) for _ in range(9)) for _ in range(60_000)]
    lines += [" ".join(rng.choice(["αλφα", "βήτα", "γάμμα", "δέλτα"]) for _ in range(9)) for _ in range(60_000)]
    text = "\n".join(lines) + "\n"
    path = tmp_path / ("sorted.txt.gz" if compressed else "sorted.txt")
    path.write_bytes(gzip.compress(text.encode()) if compressed else text.encode())
    result = run_cli("train-tokenizer", path, "--vocab-size", "290", "-o", tmp_path / "tok.model")
    assert result.returncode == 0, result.stderr
    assert "the default sample" in result.stderr
    processor = spm.SentencePieceProcessor(model_file=str(tmp_path / "tok.model"))
    assert len(processor.encode("βήτα")) <= 2  # a piece learnt from the input's second half
