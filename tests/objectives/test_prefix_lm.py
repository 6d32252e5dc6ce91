"""Prefix LM end to end with the real sample tokenizer: both layouts, and draws independent of workers."""

import numpy as np
import pytest
from readback import stream_of
from runs import read_output, run_transform


@pytest.fixture(scope="module")
def prose(small_corpus):
    return [small_corpus / "prose.jsonl"]


@pytest.mark.parametrize("layout", ["decoder", "encdec"])
def test_prefix_lm_layouts(prose, sample_tokenizer, tmp_path, layout):
    run_transform(prose, sample_tokenizer, tmp_path / "plm", objective="prefix-lm", layout=layout, seq_len=200, seed=3)
    _, table = read_output(tmp_path / "plm")
    stream = stream_of(prose, sample_tokenizer, eos=True)
    chunks = [stream[i : i + 200] for i in range(0, len(table["input_ids"]) * 200, 200)]
    splits = []
    for row, chunk in enumerate(chunks):
        inputs, labels = table["input_ids"][row], table["labels"][row]
        if layout == "decoder":
            k = table["prefix_lengths"][row]
            assert inputs == chunk and len(labels) == 200
            assert labels[:k] == [-100] * k and labels[k:] == chunk[k:]
        else:
            k = len(inputs) - 1
            assert inputs == chunk[:k] + [2] and labels == chunk[k:] + [2]
        splits.append(k)
    assert 1 <= min(splits) and max(splits) <= 199
    assert abs(np.mean(splits) - 100) < 3 * 57.7 / np.sqrt(len(splits))  # uniform on [1, 199]
