"""Hugging Face tokenizer.json: the same pipeline, special-token rules and determinism."""

import json

import numpy as np
import pytest
from runs import SAMPLE, cli, read_output, run_transform
from test_tokenizer import check_decode_ranges

from objcli.errors import ObjcliError
from objcli.tokenizers import LONG_TEXT_CHARS, open_tokenizer

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    """A byte-level BPE tokenizer.json trained here on the sample prose, with its config."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder = tmp_path_factory.mktemp("hf")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1500,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    texts = [json.loads(line)["text"] for line in (SAMPLE / "prose.jsonl").read_text().splitlines()[:300]]
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>", "pad_token": "<|pad|>"}))
    return folder


def test_same_corpus_through_both_tokenizer_kinds(small_corpus, sample_tokenizer, hf_folder, tmp_path):
    files = [small_corpus / "prose.jsonl"]
    run_transform(files, sample_tokenizer, tmp_path / "sp", seq_len=128)
    run_transform(files, hf_folder, tmp_path / "hf", seq_len=128)  # a folder holding tokenizer.json
    sp_manifest, _ = read_output(tmp_path / "sp")
    manifest, table = read_output(tmp_path / "hf")
    assert manifest["tokenizer"]["kind"] == "huggingface" and sp_manifest["tokenizer"]["kind"] == "sentencepiece"
    hf = tokenizers.Tokenizer.from_file(str(hf_folder / "tokenizer.json"))
    eos = hf.token_to_id("<|endoftext|>")
    assert manifest["special_tokens"]["ids"]["eos"] == eos  # from tokenizer_config.json
    texts = [json.loads(line)["text"] for line in files[0].read_text().splitlines()]
    stream = [t for text in texts for t in hf.encode(text, add_special_tokens=False).ids + [eos]]
    flat = [t for row in table["input_ids"] for t in row]
    assert flat == stream[: len(flat)] and len(stream) - len(flat) < 128
    assert all(len(r) == 128 for r in table["input_ids"])


def test_text_spelling_a_special_token_stays_text(hf_folder):
    tokenizer = open_tokenizer(hf_folder / "tokenizer.json")
    eos = tokenizer.resolve("eos")
    tokens, _ = tokenizer.encode(["before <|endoftext|> after"])
    assert eos not in tokens.tolist()
    assert tokenizer.decode_batch([tokens.tolist()]) == ["before <|endoftext|> after"]
    assert tokenizer.control_mask()[eos] and not tokenizer.control_mask()[tokens].any()
    assert tokenizer.resolve("mask", "<mask>") == tokenizer.vocab_size  # missing: allocated after the vocabulary


def test_overrides_and_workers(small_corpus, hf_folder, tmp_path):
    common = dict(seq_len=64, partition_size=30_000, eos_token="<|pad|>")
    run_transform([small_corpus], hf_folder, tmp_path / "a", workers=1, **common)
    run_transform([small_corpus], hf_folder, tmp_path / "b", workers=2, **common)
    manifest, _ = read_output(tmp_path / "a")
    assert manifest["special_tokens"]["pieces"]["eos"] == "<|pad|>"
    files = sorted(p.name for p in (tmp_path / "a").glob("part-*"))
    assert len(files) > 1 and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)


def test_long_documents_are_encoded_in_pieces_with_the_same_tokens(hf_folder):
    tokenizer = open_tokenizer(hf_folder / "tokenizer.json")
    paragraph = "The quick brown fox jumps over the lazy dog.\nAnd again, twice.\n\n"
    text = paragraph * 6000  # about 400,000 characters
    pieces = tokenizer.split_text(text, LONG_TEXT_CHARS)
    assert len(pieces) > 1 and "".join(pieces) == text
    library = tokenizers.Tokenizer.from_file(str(hf_folder / "tokenizer.json"))
    tokens, offsets = tokenizer.encode([text, "short"])
    whole = library.encode(text, add_special_tokens=False).ids
    assert tokens[offsets[0] : offsets[1]].tolist() == whole
    assert np.diff(offsets).tolist() == [len(whole), len(library.encode("short", add_special_tokens=False).ids)]
    code = "def f(x):  \n    return x\n\n\n    # trailing spaces and blank lines  \n" * 5000
    tokens, offsets = tokenizer.encode([code])
    assert len(tokenizer.split_text(code, LONG_TEXT_CHARS)) > 1
    assert tokens.tolist() == library.encode(code, add_special_tokens=False).ids


def test_a_file_that_is_neither_format(tmp_path):
    (tmp_path / "bad.json").write_text('{"not": "a tokenizer"}')
    with pytest.raises(ObjcliError, match="neither a SentencePiece model nor a valid tokenizer.json"):
        open_tokenizer(tmp_path / "bad.json")
    # Invalid UTF-8 inside a string: whichever error the installed msgspec raises for it (0.23 changed it).
    (tmp_path / "latin1.json").write_bytes(b'{"model": {"type": "BPE", "vocab": {"caf\xe9": 0}, "merges": []}}')
    with pytest.raises(ObjcliError, match="neither a SentencePiece model nor a valid tokenizer.json"):
        open_tokenizer(tmp_path / "latin1.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ObjcliError, match="the folder holds no tokenizer.json"):
        open_tokenizer(tmp_path / "empty")
    # A file the library loads, with nothing in its vocabulary: every text would be zero tokens.
    (tmp_path / "untrained.json").write_text('{"model": {"type": "BPE", "vocab": {}, "merges": []}}')
    with pytest.raises(ObjcliError, match="its vocabulary is empty"):
        open_tokenizer(tmp_path / "untrained.json")


def test_bos_follows_the_tokenizers_own_template(hf_folder, small_corpus, tmp_path):
    """Issue 15: a Llama-3-style tokenizer.json, whose post-processor prepends <|begin_of_text|>, lost
    its BOS silently (datatrove #345). Without --bos/--no-bos, objcli now follows the template and says so."""
    from tokenizers import Tokenizer, processors

    folder = tmp_path / "llama-like"
    folder.mkdir()
    tokenizer = Tokenizer.from_file(str(hf_folder / "tokenizer.json"))
    tokenizer.add_special_tokens(["<|begin_of_text|>"])
    bos = tokenizer.token_to_id("<|begin_of_text|>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)]
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    args = ["transform", str(small_corpus / "prose.jsonl"), "-t", str(folder), "--seq-len", "64", "--packing", "none"]
    followed = cli([*args, "-o", str(tmp_path / "auto")])
    assert followed.exit_code == 0 and "documents as <|begin_of_text|>…<|endoftext|>" in followed.output
    _, table = read_output(tmp_path / "auto")
    assert {row[0] for row in table["input_ids"][:50]} >= {bos} and table["input_ids"][0][0] == bos
    declined = cli([*args, "--no-bos", "-o", str(tmp_path / "none")])
    _, table = read_output(tmp_path / "none")
    assert declined.exit_code == 0 and bos not in {row[0] for row in table["input_ids"]}
    plain = cli([*args[:3], str(hf_folder), *args[4:], "-o", str(tmp_path / "gpt2-like")])
    assert "documents as …<|endoftext|>" in plain.output  # no template BOS: none added


def test_export_adds_the_allocated_specials_to_tokenizer_json(hf_folder, small_corpus, tmp_path):
    from tokenizers import Tokenizer

    out = tmp_path / "mlm"
    args = [
        "transform",
        str(small_corpus / "prose.jsonl"),
        "-t",
        str(hf_folder),
        "-o",
        str(out),
        "--objective",
        "mlm",
        "--seq-len",
        "64",
        "-q",
    ]
    assert cli(args).exit_code == 0
    assert cli(["export-tokenizer", str(out), "-o", str(tmp_path / "tok")]).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    exported = Tokenizer.from_file(str(tmp_path / "tok" / "tokenizer.json"))
    assert exported.get_vocab_size(with_added_tokens=True) == manifest["tokenizer"]["total_vocab_size"]
    assert manifest["special_tokens"]["added"] and all(
        exported.token_to_id(piece) == token_id for piece, token_id in manifest["special_tokens"]["added"].items()
    )


def test_text_that_already_starts_with_bos_is_warned(sample_tokenizer, tmp_path):
    """Issue 15: with BOS added, a document whose text already begins with the BOS piece gets it twice."""

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["<s> already marked", "plain text", "<s>again"]))
    result = cli(
        [
            "transform",
            str(corpus),
            "-t",
            sample_tokenizer,
            "-o",
            str(tmp_path / "o"),
            "--bos",
            "--seq-len",
            "8",
            "--remainder",
            "pad",
        ],
    )
    assert result.exit_code == 0
    assert "warning: 2 documents already start with the BOS text '<s>', and get the BOS token too" in result.output
    quiet = cli(
        [
            "transform",
            str(corpus),
            "-t",
            sample_tokenizer,
            "-o",
            str(tmp_path / "p"),
            "--seq-len",
            "8",
            "--remainder",
            "pad",
        ],
    )
    assert "already start with the BOS text" not in quiet.output  # no BOS added (SentencePiece: no template)


def test_decode_ranges_equals_decoding_each_item(hf_folder):
    check_decode_ranges(open_tokenizer(hf_folder / "tokenizer.json"))
