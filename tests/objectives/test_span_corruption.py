"""Span corruption (T5) end to end with the real sample tokenizer: exact lengths, the token stream
reconstructed from the rows, sentinels, and one-line errors for impossible settings."""

import pytest
from readback import fill_sentinels, stream_of
from runs import cli, read_output, run_transform

from objcli.errors import ObjcliError


@pytest.fixture(scope="module")
def prose(small_corpus):
    return [small_corpus / "prose.jsonl"]


def test_span_corruption_rows_are_exact_and_reconstruct_the_stream(prose, sample_tokenizer, tmp_path):
    summary = run_transform(prose, sample_tokenizer, tmp_path / "t5", objective="t5", seq_len=512)
    manifest, table = read_output(tmp_path / "t5")
    special = manifest["special_tokens"]
    # No <extra_id_N> in the sample model: 100 appended, <extra_id_0> highest (T5 convention).
    assert special["sentinels"] == list(range(8099, 7999, -1))
    assert special["added"]["<extra_id_0>"] == 8099 and manifest["tokenizer"]["total_vocab_size"] == 8100
    assert {len(r) for r in table["input_ids"]} == {512} and {len(r) for r in table["labels"]} == {114}
    sentinels = set(special["sentinels"])
    rebuilt = [t for i, lab in zip(table["input_ids"], table["labels"]) for t in fill_sentinels(i, lab, sentinels)]
    stream = stream_of(prose, sample_tokenizer, eos=False)  # T5 joins documents with nothing
    assert rebuilt == stream[: len(rebuilt)] and len(rebuilt) == 568 * len(table["input_ids"])
    assert summary.totals["tokens_dropped"] == len(stream) - len(rebuilt) < 568
    for inputs, labels in zip(table["input_ids"], table["labels"]):
        used = [t for t in inputs if t in sentinels]
        assert used == [t for t in labels if t in sentinels] == special["sentinels"][: len(used)]
        assert inputs[-1] == labels[-1] == 2


def test_span_corruption_final_chunk_pad_and_eos_between_documents(prose, sample_tokenizer, tmp_path):
    summary = run_transform(
        prose, sample_tokenizer, tmp_path / "t5", objective="t5", seq_len=256, final_chunk="pad", eos=True
    )
    manifest, table = read_output(tmp_path / "t5")
    assert summary.totals["final_chunks_padded"] == 1 and summary.totals["documents_skipped"] == 0
    last_inputs, last_labels = table["input_ids"][-1], table["labels"][-1]
    assert len(last_inputs) == 256 and last_inputs[-1] == 3  # padded with <pad>
    assert last_labels[-1] == -100
    sentinels = set(manifest["special_tokens"]["sentinels"])
    real_inputs = [t for t in last_inputs if t != 3]
    real_labels = [t for t in last_labels if t != -100]
    rebuilt = [
        t for i, lab in zip(table["input_ids"][:-1], table["labels"][:-1]) for t in fill_sentinels(i, lab, sentinels)
    ]
    rebuilt += fill_sentinels(real_inputs, real_labels, sentinels)
    assert rebuilt == stream_of(prose, sample_tokenizer, eos=True)


def test_sentinels_from_a_model_that_has_them(prose, tmp_path):
    model = tmp_path / "sent.model"
    result = cli(
        ["train-tokenizer", str(prose[0]), "--vocab-size", "700", "-o", str(model)]
        + [f"--special=<extra_id_{i}>" for i in range(40)],
    )
    assert result.exit_code == 0, result.output
    run_transform(prose, model, tmp_path / "t5", objective="t5", seq_len=128)
    manifest, table = read_output(tmp_path / "t5")
    assert manifest["special_tokens"]["sentinels"] == list(range(4, 44))  # the model's own pieces
    assert manifest["special_tokens"]["added"] == {}
    assert max(max(r) for r in table["input_ids"]) < 700
    # 40 sentinels are too few for 512-token rows (28 spans is fine, 1024 needs 57).
    with pytest.raises(ObjcliError, match="has 40 <extra_id_N> sentinels but a row needs 57"):
        run_transform(prose, model, tmp_path / "t5b", objective="t5", seq_len=1024)


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--objective", "t5", "--noise-density", "0"],
            "Error: --noise-density 0.0: must be between 0 and 1 (exclusive)\n",
        ),
        (
            ["--objective", "t5", "--noise-density", "1"],
            "Error: --noise-density 1.0: must be between 0 and 1 (exclusive)\n",
        ),
        (
            ["--objective", "t5", "--seq-len", "2"],
            "Error: --seq-len 2: no chunk length gives inputs of exactly that length "
            "at noise density 0.15 and mean span 3.0; choose a larger --seq-len (at least 3)\n",
        ),
        (["--objective", "t5", "--packing", "best-fit"], "Error: --packing best-fit: span-corruption takes none\n"),
        (["--objective", "clm", "--mixture", "ul2"], "Error: --mixture applies to ul2, not to clm\n"),
        (
            ["--objective", "ul2", "--mixture", "ul3"],
            "Error: --mixture ul3: neither a preset (ul2, ul2-3, ul2r) nor a TOML file\n",
        ),
    ],
)
def test_impossible_settings_fail_before_any_work(prose, sample_tokenizer, tmp_path, args, message):
    result = cli(["transform", str(prose[0]), "-t", sample_tokenizer, "-o", str(tmp_path / "o"), *args])
    assert result.exit_code == 1
    assert result.output == message
    assert not (tmp_path / "o").exists()
