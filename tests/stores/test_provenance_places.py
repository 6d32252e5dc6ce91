"""--provenance in a token store at a few bytes a document (issue 83, item 4): the token places kept as the
fixes of the tokenizer's piece table (``kernels/places.py``), so a store with provenance is about the size
of one without; derived runs' spans are the text run's, from stores of either layout."""

import shutil

import pytest
from runs import SAMPLE, run_tokenize, run_transform, shard_files

STORES = SAMPLE.parent / "tests" / "data" / "stores"


def _store(inputs, tokenizer, out, provenance: bool):
    run_tokenize(inputs, tokenizer, out, provenance=provenance)
    return out


@pytest.mark.parametrize("tokenizer", ["tokenizer.model", "llama-style"])
def test_a_store_with_provenance_is_about_the_size_of_one_without(tokenizer, tmp_path):
    inputs = [SAMPLE / "prose.jsonl", SAMPLE / "code.jsonl"]
    sizes = {}
    for provenance in (False, True):
        out = _store(inputs, SAMPLE / tokenizer, tmp_path / f"store-{provenance}", provenance)
        sizes[provenance] = sum(len(b) for b in shard_files(out).values())
    assert sizes[True] <= 1.1 * sizes[False], sizes  # was 3.4x: each token's end and back, 5 bytes a token
    derived = run_transform([tmp_path / "store-True"], SAMPLE / tokenizer, tmp_path / "derived", seq_len=256,
                            provenance=True)  # fmt: skip
    text = run_transform(inputs, SAMPLE / tokenizer, tmp_path / "text", seq_len=256, provenance=True)
    assert derived.totals["rows"] == text.totals["rows"]
    assert shard_files(tmp_path / "derived") == shard_files(tmp_path / "text")  # spans included


def test_a_store_made_before_keeps_its_places_and_derives_the_same_spans(tmp_path, monkeypatch):
    """A store of the layout before (each token's end and back, written by the objcli of stop 79) is read
    as it is: its derived run's rows and spans are the text run's."""
    folder = shutil.copytree(STORES, tmp_path / "stores")
    monkeypatch.chdir(folder)  # the store names its input as it was given, relatively
    tokenizer = SAMPLE / "tokenizer.model"
    run_transform(["before-fixes"], tokenizer, tmp_path / "derived", seq_len=128, provenance=True)
    run_transform(["prose-12.jsonl"], tokenizer, tmp_path / "text", seq_len=128, provenance=True)
    files = shard_files(tmp_path / "derived")
    assert any(name.endswith(".provenance") for name in files)
    assert files == shard_files(tmp_path / "text")


@pytest.mark.parametrize("table", ["@@@", "eJwDAAAAAAE=", None])
def test_a_damaged_piece_table_is_one_line(table, tmp_path):
    import json

    from objcli.errors import ObjcliError

    store = _store([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", tmp_path / "store", True)
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["token_store"]["piece_chars"] = table
    (store / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ObjcliError, match="piece_chars is missing, damaged or too short"):
        run_transform([store], SAMPLE / "tokenizer.model", tmp_path / "out", seq_len=128, provenance=True)
