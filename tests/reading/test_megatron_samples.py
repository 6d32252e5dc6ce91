"""objcli's clm rows as Megatron-LM's GPTDataset samples (issue 82, item 4): every key equal to what
megatron-core's own ``_get_ltor_masks_and_position_ids`` (0.16, as released) gives for the same tokens, under
every combination of ``reset_position_ids``, ``reset_attention_mask``, ``eod_mask_loss`` and
``create_attention_mask``, on rows of a plan and of written shards, and on random rows by hypothesis."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import SAMPLE, run_transform

torch = pytest.importorskip("torch")
gpt_dataset = pytest.importorskip("megatron.core.datasets.gpt_dataset")

from objcli.errors import ObjcliError  # noqa: E402
from objcli.reading.megatron_samples import MegatronMasks, MegatronSamples, datasets_provider, megatron_sample  # noqa: E402

SWITCHES = list(itertools.product([False, True], repeat=4))


def _released(tokens: np.ndarray, labels: np.ndarray, masks: MegatronMasks) -> dict:
    """GPTDataset.__getitem__'s masks for these tokens: megatron-core's function, then its own pad steps."""
    tokens, labels = torch.from_numpy(tokens.copy()), torch.from_numpy(labels.copy())
    attention, loss, positions = gpt_dataset._get_ltor_masks_and_position_ids(
        tokens, masks.eod, masks.reset_position_ids, masks.reset_attention_mask, masks.eod_mask_loss,
        masks.create_attention_mask,
    )  # fmt: skip
    loss[labels == masks.pad] = 0.0
    tokens[tokens == masks.pad] = 0
    labels[labels == masks.pad] = 0
    made = {"tokens": tokens, "labels": labels, "loss_mask": loss, "position_ids": positions}
    return made | ({"attention_mask": attention} if masks.create_attention_mask else {})


def _same(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        assert ours[name].dtype == value.dtype and torch.equal(ours[name], value), name


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("megatron-samples")
    common = {"seq_len": 64, "row_tokens": "seq-len+1", "split": "validation=10%"}
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", root / "rows", **common)
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", root / "short", seq_len=64)
    return root


@pytest.mark.parametrize(
    "switches",  # none, all, and two mixed in the default run; every other with the heavy tests (and hypothesis)
    [s if s in ((False,) * 4, (True,) * 4, (True, False, True, False), (False, True, False, True))
     else pytest.param(s, marks=pytest.mark.heavy) for s in SWITCHES],
)  # fmt: skip
def test_every_sample_equals_megatron_cores_masks(outputs, switches):
    masks = MegatronMasks(2, *switches)  # the sample tokenizer's EOS, between documents
    train, valid, test = datasets_provider(outputs / "rows", 64, masks)
    assert test is None and len(train) > 10 * len(valid) > 0
    eods = 0
    for dataset in (train, valid):
        for index in range(0, len(dataset), 7):
            row = np.asarray(dataset.rows[index]["input_ids"], np.int64)
            _same(dataset[index], _released(row[:-1], row[1:], masks))
            eods += int((row[:-1] == 2).sum())
    assert eods > 20  # documents end inside rows: the resets have something to reset


def test_rows_of_seq_len_are_samples_without_the_extra_token(outputs):
    masks = MegatronMasks(2, True, True, True, True, pad=0)
    samples = MegatronSamples(outputs / "short", 64, masks)
    for index in range(0, len(samples), 11):
        row = np.asarray(samples.rows[index]["input_ids"], np.int64)
        _same(samples[index], _released(row, np.append(row[1:], masks.pad), masks))
    with pytest.raises(ObjcliError, match="not a sample of --seq-length 32"):
        MegatronSamples(outputs / "short", 32, masks)[0]


@given(st.lists(st.integers(0, 5), min_size=2, max_size=40), st.sampled_from(SWITCHES))
@settings(max_examples=80, deadline=None)
def test_random_rows_equal_megatron_cores_masks(values, switches):
    row = np.array(values, np.int64)
    masks = MegatronMasks(3, *switches)
    _same(megatron_sample(row, len(row) - 1, masks), _released(row[:-1], row[1:], masks))
