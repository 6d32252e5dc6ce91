"""Masked LM end to end with the real sample tokenizer: masking rates and layout, whole words masked
whole, and one-line errors for bad probabilities (the kernels: tests/kernels/test_masking.py)."""

import numpy as np
import pytest
from runs import cli, read_output, run_transform


def test_mlm_end_to_end_with_the_sample_tokenizer(small_corpus, sample_tokenizer, tmp_path):
    files = [small_corpus / "prose.jsonl"]
    run_transform(files, sample_tokenizer, tmp_path / "clm", seq_len=128)
    run_transform(
        files,
        sample_tokenizer,
        tmp_path / "mlm",
        objective="mlm",
        seq_len=128,
        count="exact",
        max_predictions=20,
        dupe_factor=2,
    )
    _, clm = read_output(tmp_path / "clm")
    manifest, mlm = read_output(tmp_path / "mlm")
    mask_id = manifest["special_tokens"]["ids"]["mask"]
    assert mask_id == 8000 and manifest["special_tokens"]["added"] == {"[MASK]": 8000}
    rows = len(clm["input_ids"])
    assert len(mlm["input_ids"]) == 2 * rows  # the whole shard is one batch here: copy 0 then copy 1
    for copy in range(2):
        for r in range(rows):
            masked, labels = mlm["input_ids"][copy * rows + r], mlm["labels"][copy * rows + r]
            original = clm["input_ids"][r]
            restored = [lab if lab != -100 else t for t, lab in zip(masked, labels)]
            assert restored == original
            selected = [lab != -100 for lab in labels]
            assert sum(selected) == min(20, round(128 * 0.15))  # exact count: 19
            assert not any(s and t in (1, 2, 3) for s, t in zip(selected, original))  # never specials
    assert mlm["labels"][:rows] != mlm["labels"][rows:]  # copies differ
    assert mlm["segment_ids"][:rows] == clm["segment_ids"]


def test_whole_word_masking_masks_words_whole(small_corpus, sample_tokenizer, tmp_path):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=sample_tokenizer)
    run_transform(
        [small_corpus / "prose.jsonl"],
        sample_tokenizer,
        tmp_path / "wwm",
        objective="mlm",
        seq_len=128,
        whole_word=True,
        mask_prob=0.3,
    )
    _, table = read_output(tmp_path / "wwm")
    for labels in table["labels"][:200]:
        selected = [lab != -100 for lab in labels]
        for i in range(1, len(labels)):
            starts_word = selected[i] and sp.id_to_piece(labels[i]).startswith("\u2581")
            # a selected continuation piece follows a selected piece of the same word
            if selected[i] and not starts_word and not sp.is_control(labels[i]):
                assert selected[i - 1]
    ratio = np.mean([lab != -100 for row in table["labels"] for lab in row])
    assert 0.2 < ratio < 0.4


@pytest.mark.parametrize(
    "args,message",
    [
        (["--mask-prob", "1.5"], "Error: --mask-prob 1.5: must be between 0 and 1\n"),
        (["--random-replace", "-0.1"], "Error: --random-replace -0.1: must be between 0 and 1\n"),
        (
            ["--mask-replace", "0.8", "--random-replace", "0.3"],
            "Error: --mask-replace 0.8 + --random-replace 0.3 = 1.1: must not exceed 1 (the rest stay unchanged)\n",
        ),
        (["--dupe-factor", "0"], "Error: --dupe-factor 0: must be between 1 and 1000\n"),
    ],
)
def test_bad_probabilities(small_corpus, sample_tokenizer, tmp_path, args, message):
    result = cli(
        [
            "transform",
            str(small_corpus),
            "-t",
            sample_tokenizer,
            "-o",
            str(tmp_path / "o"),
            "--objective",
            "mlm",
            *args,
        ],
    )
    assert (result.exit_code, result.output) == (1, message)
