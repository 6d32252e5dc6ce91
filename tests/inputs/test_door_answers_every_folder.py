"""The door under hostile use (issue 81, items 6-8 and 10): an output of any kind inside a folder is named and
left out, never taking the folder's other files with it nor read as text; token inputs into a store are one
line; a store's manifest is checked against the kind it names."""

from __future__ import annotations

import json
import shutil

import pytest
from readback import text_inputs
from runs import SAMPLE, cli, run_tokenize, run_transform

from objcli.errors import ObjcliError
from objcli.inputs.token_inputs import TOKEN_INPUTS

SPM = SAMPLE / "tokenizer.model"
LINES = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)


def _store(inputs, out, kind="documents", **options):
    return run_tokenize(inputs, SPM, out, kind, **options)


def _saved_dataset(folder):
    import datasets

    datasets.Dataset.from_dict({"input_ids": [[5, 6, 7, 8]] * 30}).save_to_disk(str(folder))


@pytest.mark.parametrize("dataset", ["datasets", "objcli-hf"])
def test_a_folder_with_a_saved_dataset_beside_the_users_files_reads_the_files(dataset, tmp_path):
    """The dataset at the folder's top or in a subfolder: left out with a warning naming it; the user's files,
    subfolders included, read. The dataset alone is still read as its ids."""
    inner = tmp_path / "corpus" / "saved"
    if dataset == "datasets":
        _saved_dataset(inner)
    else:
        (tmp_path / "text.jsonl").write_text("".join(LINES[:20]))
        run_transform([tmp_path / "text.jsonl"], SPM, inner, output_format="hf", seq_len=64)
    alone = run_transform([inner], SPM, tmp_path / "alone", seq_len=16)
    assert {i["format"] for i in alone.manifest["inputs"]} == {"input-ids"}
    for top in (inner, tmp_path / "corpus"):  # the dataset at the top, then in a subfolder
        (top / "more").mkdir(exist_ok=True)
        (top / "extra.jsonl").write_text("".join(LINES[:3]))
        (top / "more" / "b.jsonl").write_text("".join(LINES[3:5]))
        warnings = []
        files = text_inputs([str(top)], warn=warnings.append)
        assert sorted(f.path.removeprefix(str(top) + "/") for f in files) == ["extra.jsonl", "more/b.jsonl"]
        assert any(f"in {inner}" in w and "left out" in w for w in warnings), warnings
        summary = run_transform([top], SPM, tmp_path / "out", seq_len=64)
        assert summary.totals["documents_read"] == 5
        (top / "extra.jsonl").unlink()
        shutil.rmtree(top / "more")


@pytest.mark.parametrize("fmt", list(TOKEN_INPUTS))
def test_token_inputs_into_a_store_are_one_line(fmt, tmp_path):
    """Every registered token format, and a store, given to objcli tokenize: one line naming the input."""
    from test_token_doors import TEXTS, WRITTEN

    text = tmp_path / "text.jsonl"
    text.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS[:10]))
    if fmt == "input-ids":
        _saved_dataset(tmp_path / "ids")
        given = tmp_path / "ids"
    else:
        run_transform([text], SPM, tmp_path / "written", output_format=WRITTEN[fmt])
        given = tmp_path / "written"
        given = next(p for p in given.iterdir() if p.suffix in (".bin", ".ds"))
        given = given.with_suffix("") if fmt == "megatron" else given
    with pytest.raises(ObjcliError, match=r"is token ids already .*objcli tokenize makes a store from text"):
        _store([given], tmp_path / "store")
    assert not (tmp_path / "store" / "manifest.json").exists()
    _store([text], tmp_path / "real")
    with pytest.raises(ObjcliError, match="is a token store"):
        _store([tmp_path / "real"], tmp_path / "store2")


def _edit(store, edit):
    manifest = json.loads((store / "manifest.json").read_text())
    edit(manifest)
    (store / "manifest.json").write_text(json.dumps(manifest))


def test_a_store_relabelled_as_another_kind_is_refused(tmp_path):
    (tmp_path / "text.jsonl").write_text("".join(LINES[:40]))
    prose = tmp_path / "prose"
    documents = tmp_path / "documents"
    _store([tmp_path / "text.jsonl"], documents, "documents")
    _edit(documents, lambda m: m["config"].update(token_store="prose"))
    with pytest.raises(ObjcliError, match="names a 'sentences' token store, but its sections and columns"):
        run_transform([documents], SPM, tmp_path / "out", seq_len=64)
    _store([tmp_path / "text.jsonl"], prose, "prose")
    _edit(prose, lambda m: m["config"].update(token_store="documents"))
    with pytest.raises(ObjcliError, match="names a 'documents' token store"):
        run_transform([prose], SPM, tmp_path / "out", seq_len=64)


@pytest.mark.parametrize("damage", ["[]", '{"complete": tr', '{"complete": true, "shards": []}', ""])
def test_a_damaged_manifest_is_an_output_to_rebuild_never_text(damage, tmp_path):
    (tmp_path / "text.jsonl").write_text("".join(LINES[:10]))
    store = tmp_path / "corpus" / "store"
    _store([tmp_path / "text.jsonl"], store)
    (store / "manifest.json").write_text(damage)
    (tmp_path / "corpus" / "mine.jsonl").write_text("".join(LINES[:3]))
    for given in (store, tmp_path / "corpus"):
        with pytest.raises(ObjcliError, match=r"an objcli output \(it holds part-00000-of-00001.store\)"):
            run_transform([given], SPM, tmp_path / "out", seq_len=64)
    (store / "manifest.json").write_text('{"name": "a browser extension", "version": 3}')  # another tool's
    names = sorted(f.path.removeprefix(str(tmp_path / "corpus") + "/") for f in text_inputs([str(tmp_path / "corpus")]))
    assert names == ["mine.jsonl", "store/manifest.json"]  # a user's JSON, read as the user's file


def test_a_binary_input_is_named_as_binary_in_transform_and_train_tokenizer(tmp_path):
    """An executable among the inputs (any suffix) is named for what it is, never "UTF-32LE text" with
    iconv's advice; train-tokenizer says the same one line (no SentencePiece frames); wide text is still
    named as such."""
    import sys

    executable = tmp_path / "ls.txt"
    executable.write_bytes(open(sys.executable, "rb").read(65536))
    nameless = tmp_path / "blob.txt"
    nameless.write_bytes(b"XXXX" + executable.read_bytes()[4:])
    (tmp_path / "wide.txt").write_bytes("some text in UTF-16\n".encode("utf-16-le") * 40)
    expected = {executable: "an ELF executable", nameless: r"binary data \(", tmp_path / "wide.txt": "UTF-16LE text"}
    for path, what in expected.items():
        with pytest.raises(ObjcliError, match=f"input {path}: {what}"):
            run_transform([path], SPM, tmp_path / "out", seq_len=64)
    trained = cli(
        [
            "train-tokenizer",
            str(SAMPLE / "prose.jsonl"),
            str(executable),
            "-o",
            str(tmp_path / "x.model"),
            "--vocab-size",
            "500",
            "-q",
        ],  # fmt: skip
    )
    assert trained.exit_code != 0
    assert trained.output.strip().splitlines() == [
        f"Error: input {executable}: an ELF executable or library, not "
        "text; leave it out of the inputs (or name the text files)"
    ]


def test_text_unit_file_reads_a_folders_every_file_and_skips_binaries(tmp_path):
    """--text-unit file: a folder of man pages (roff, gzipped, no text suffix), a README without a suffix and
    a binary: every text file a document, the binary a counted skip (one line with --strict); without it the
    folder is refused with the way out named (issue 83, item 7)."""
    import gzip
    import sys

    folder = tmp_path / "man"
    (folder / "man1").mkdir(parents=True)
    pages = {"ls.1.gz": ".TH LS 1\n.SH NAME\nls \\- list directory contents\n", "cp.1.gz": ".TH CP 1\ncopy files\n"}
    for name, roff in pages.items():
        (folder / "man1" / name).write_bytes(gzip.compress(roff.encode()))
    (folder / "NOTES").write_text("plain notes about the pages\n")
    (folder / "tool").write_bytes(open(sys.executable, "rb").read(4096))
    with pytest.raises(ObjcliError, match="pass --text-unit file to read every file of it"):
        run_transform([folder], SPM, tmp_path / "out", seq_len=64)
    summary = run_transform([folder], SPM, tmp_path / "out", seq_len=64, text_unit="file", remainder="pad")
    totals = summary.manifest["totals"]
    assert (totals["documents_read"], totals["documents_written"]) == (4, 3)
    assert totals["skipped_by_reason"] == {"binary": 1}
    with pytest.raises(ObjcliError, match="an ELF executable or library, not text"):
        run_transform([folder], SPM, tmp_path / "strict", seq_len=64, text_unit="file", strict=True)
