"""``objcli export-tokenizer``: the run's tokenizer with every allocated special at its id, so that the
vocabulary size and decoding downstream match the shards (issue 15)."""

import numpy as np
import pyarrow as pa
import sentencepiece as spm
from runs import cli, manifest_json

from objcli.commands.export_tokenizer import sentencepiece_with_pieces
from objcli.commands.show import load_output_tokenizer
from objcli.storage.manifest import read_manifest


def export_and_rows(folder, destination):
    result = cli(["export-tokenizer", str(folder), "-o", str(destination)])
    assert result.exit_code == 0, result.output
    table = pa.concat_tables(pa.ipc.open_stream(str(p)).read_all() for p in sorted(folder.glob("part-*.arrow")))
    return table.to_pydict(), load_output_tokenizer(read_manifest(folder), None)


def test_a_sentencepiece_model_gains_the_allocated_specials(small_corpus, sample_tokenizer, tmp_path):
    out = tmp_path / "nsp"
    args = [
        "transform",
        str(small_corpus / "prose.jsonl"),
        "-t",
        sample_tokenizer,
        "-o",
        str(out),
        "--objective",
        "nsp",
        "--mlm",
        "--seq-len",
        "64",
        "-q",
    ]
    assert cli(args).exit_code == 0
    rows, tokenizer = export_and_rows(out, tmp_path / "tok")
    manifest = manifest_json(out)
    exported = spm.SentencePieceProcessor(model_file=str(tmp_path / "tok" / "tokenizer.model"))
    assert exported.get_piece_size() == manifest["tokenizer"]["total_vocab_size"] == 8003
    for piece, token_id in manifest["special_tokens"]["added"].items():
        assert exported.id_to_piece(token_id) == piece
    for ids, mask in zip(rows["input_ids"], rows["attention_mask"]):  # what inspect prints, padding aside
        ids = ids[: sum(mask)]
        assert exported.decode(ids) == tokenizer.decode(np.array(ids))


def test_appended_pieces_keep_the_original_model_intact(sample_tokenizer):
    from pathlib import Path

    original = Path(sample_tokenizer).read_bytes()
    model = spm.SentencePieceProcessor(model_proto=sentencepiece_with_pieces(original, ["<A>", "[B]"]))
    before = spm.SentencePieceProcessor(model_file=sample_tokenizer)
    assert model.get_piece_size() == before.get_piece_size() + 2 and model.id_to_piece(8001) == "[B]"
    text = "The assert statement is a convenient way to insert debugging assertions."
    assert model.encode(text) == before.encode(text)


def test_export_refuses_a_path_that_is_a_file(small_corpus, sample_tokenizer, tmp_path):
    out = tmp_path / "clm"
    cli(["transform", str(small_corpus / "prose.jsonl"), "-t", sample_tokenizer, "-o", str(out)])
    (tmp_path / "file").write_text("x")
    result = cli(["export-tokenizer", str(out), "-o", str(tmp_path / "file")])
    assert result.exit_code == 1 and result.output.startswith("Error: output ")
