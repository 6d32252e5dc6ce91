"""The one door (``inputs/input_kinds.detect``): every kind of input asked the same question in one
order, one answer type; a group of inputs opened by the one kind its members are, and mixed kinds refused
in one line; a glob or a folder holding a store beside text reads the text, as a folder walk does."""

from __future__ import annotations

import shutil

import pytest
from paths import ROOT
from runs import SAMPLE, run_cli, shard_files

from objcli.inputs.input_kinds import Detected, detect
from objcli.inputs.pieces import InputKind

TOKEN_FILES = ROOT / "tests" / "data" / "token_files"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder of text, a token store made from it beside it, and Megatron's files of the same corpus."""
    root = tmp_path_factory.mktemp("kinds")
    shutil.copy(SAMPLE / "prose.jsonl", root / "prose.jsonl")
    made = run_cli("tokenize", root / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "-o", root / "store", "-q")
    assert made.returncode == 0, made.stderr
    for name in ("corpus_text_document.bin", "corpus_text_document.idx"):
        shutil.copy(TOKEN_FILES / name, root / name)
    return root


def test_each_kind_answers_in_order_with_one_type(folder):
    assert detect(str(folder / "store")) == Detected(InputKind.STORE, "store")
    assert detect(str(folder / "store"), "jsonl") == Detected(InputKind.STORE, "store")  # a store is recognised
    assert detect(str(folder / "corpus_text_document.bin")) == Detected(InputKind.TOKENS, "megatron")
    assert detect(str(folder / "corpus_text_document")) == Detected(InputKind.TOKENS, "megatron")  # the prefix
    assert detect(str(folder / "prose.jsonl")) == Detected(InputKind.TEXT, "jsonl")
    assert detect(str(folder / "prose.jsonl"), "text") == Detected(InputKind.TEXT, "text")  # --input-format
    assert detect("-") == Detected(InputKind.TEXT, "auto")
    assert detect("-", "megatron") == Detected(InputKind.TOKENS, "megatron")  # named: never looked at ahead


def test_kinds_never_mix_in_a_group(folder, tmp_path):
    run = ["-t", SAMPLE / "tokenizer.model", "--seq-len", "64", "-q"]
    beside = run_cli("transform", folder / "store", folder / "prose.jsonl", *run, "-o", tmp_path / "a")
    assert beside.returncode == 1 and beside.stderr.count("\n") == 1
    assert f"input {folder / 'store'}: a token store is read on its own" in beside.stderr
    mixed = run_cli("transform", folder / "prose.jsonl", folder / "corpus_text_document", *run, "-o", tmp_path / "b")
    assert mixed.returncode == 1 and mixed.stderr.count("\n") == 1
    assert f"input {folder / 'prose.jsonl'}: is text, and {folder / 'corpus_text_document'} is already tokenized" in (
        mixed.stderr
    )


def test_token_files_named_for_standard_input_are_one_line(tmp_path):
    piped = run_cli(
        "transform",
        "-",
        "--input-format",
        "megatron",
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        tmp_path / "o",
        input='{"text": "hello"}\n',
    )
    assert piped.returncode == 1 and piped.stderr.count("\n") == 1, piped.stderr
    assert "--input-format megatron names token files" in piped.stderr and "name the files" in piped.stderr


def test_a_glob_over_text_and_a_stores_files_reads_the_text(folder, tmp_path):
    """The store's files that a glob matches are left out, as a folder walk leaves an output's files out."""
    text = tmp_path / "text"
    text.mkdir()
    shutil.copy(folder / "prose.jsonl", text / "prose.jsonl")
    shutil.copytree(folder / "store", text / "store")
    run = ["-t", SAMPLE / "tokenizer.model", "--seq-len", "64", "-q"]
    globbed = run_cli("transform", f"{text}/**/*", *run, "-o", tmp_path / "globbed")
    alone = run_cli("transform", text / "prose.jsonl", *run, "-o", tmp_path / "alone")
    assert globbed.returncode == 0 and alone.returncode == 0, globbed.stderr + alone.stderr
    assert shard_files(tmp_path / "globbed") == shard_files(tmp_path / "alone")
    only = run_cli("transform", f"{text}/store/*", *run, "-o", tmp_path / "only")
    assert only.returncode == 1 and "matches only the files of the token store" in only.stderr, only.stderr
