"""Preference pairs as TRL 1.16's own trainers prepare them (issue 64): on generated pairs in TRL's
three layouts (explicit prompt, implicit prompt, plain text) with TRL's chat templates of several
families, ``--objective preference`` writes exactly the ``prompt_ids``, ``chosen_ids`` and
``rejected_ids`` that ``DPOTrainer(...).train_dataset`` holds, and ``--objective reward`` the
``chosen_ids`` and ``rejected_ids`` of ``RewardTrainer(...).train_dataset``, each dropping the same
pairs, which objcli counts."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from optional import lazily, requires
from runs import read_output, run_transform
from trl_families import family_folder, preference_records, train_tokenizer

pytestmark = requires("trl", "transformers", "datasets")
trl = lazily("trl")
transformers = lazily("transformers")
datasets = lazily("datasets")

FAMILIES = ["qwen2_5", "llama3", "phi3_5", "qwen3"]  # ChatML, Llama 3, Phi-3.5, Qwen3 (reasoning)
MAX_LENGTH = 160  # some prompts reach it: both sides drop the same pairs


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train_tokenizer(tmp_path_factory.mktemp("trl-tokenizer"))


def _tiny_model(tokenizer, kind: str):
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
        num_labels=1,
    )
    model = transformers.LlamaForSequenceClassification if kind == "reward" else transformers.LlamaForCausalLM
    return model(config)


def trl_dataset(folder: Path, data: Path, kind: str, out: Path):
    """What TRL's trainer holds after preparing the records of a JSON-lines file, loaded as people load
    one (``load_dataset("json")``), by its own ``_prepare_dataset``."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    dataset = datasets.load_dataset("json", data_files=str(data), split="train")
    common = {"output_dir": str(out), "max_length": MAX_LENGTH, "report_to": "none", "use_cpu": True}
    if kind == "reward":
        args = trl.RewardConfig(**common)
        trainer = trl.RewardTrainer(
            _tiny_model(tokenizer, kind), args=args, train_dataset=dataset, processing_class=tokenizer
        )
    else:
        args = trl.DPOConfig(**common)
        model = _tiny_model(tokenizer, kind)
        trainer = trl.DPOTrainer(
            model, ref_model=copy.deepcopy(model), args=args, train_dataset=dataset, processing_class=tokenizer
        )
    return trainer.train_dataset


def _objcli(folder: Path, data: Path, kind: str, out: Path):
    summary = run_transform([data], folder, out, objective=kind, packing="none", seq_len=MAX_LENGTH)
    return summary.manifest["totals"], read_output(out)[1]


def _long(record: dict) -> dict:
    """The record with its prompt's (or the shared conversation's) first message forty times longer."""
    record = json.loads(json.dumps(record))
    if isinstance(record.get("prompt"), str):
        record["prompt"] *= 40
        return record
    for messages in [record["prompt"]] if "prompt" in record else [record["chosen"], record["rejected"]]:
        messages[0]["content"] *= 40
    return record


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["preference", "reward"])
def test_pairs_equal_trls_own_preparation(family, kind, trained, tmp_path):
    # Each layout alone: TRL decides a dataset's layout by its first record, as people's datasets have one.
    dropped = 0
    for layout in range(3):
        records = preference_records(family, 60, seed=3)[layout::3]
        records[3:3] = [_long(records[0]), _long(records[1])]  # prompts past MAX_LENGTH: both drop them
        folder = family_folder(trained, family, family, tmp_path / f"{kind}-{layout}")
        data = tmp_path / f"pairs-{layout}.jsonl"
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        theirs = trl_dataset(folder, data, kind, tmp_path / f"trl-{kind}-{layout}")
        totals, rows = _objcli(folder, data, kind, tmp_path / f"objcli-{kind}-{layout}")
        columns = ["chosen_ids", "rejected_ids"] if kind == "reward" else ["prompt_ids", "chosen_ids", "rejected_ids"]
        for column in columns:
            assert [list(r) for r in rows[column]] == theirs[column], (family, layout, column)
        reason = "pair_too_long" if kind == "reward" else "prompt_too_long"
        assert totals["documents_skipped"] == totals["skipped_by_reason"].get(reason, 0) == len(records) - len(theirs)
        dropped += totals["documents_skipped"]
    assert dropped >= 6  # the long ones, at least


def prepared_dpo_trainer(*args, **kwargs):
    """The recipe's one change to TRL (docs/objectives.md): the dataset is objcli's, tokenized already.
    Defined when a test runs: ``trl.DPOTrainer`` imports TRL's trainers, torch and transformers' models
    (3.8 s), which every test process would pay while it collects the tests."""

    class PreparedDPOTrainer(trl.DPOTrainer):
        def _prepare_dataset(self, dataset, *args, **kwargs):
            return dataset

    return PreparedDPOTrainer(*args, **kwargs)


@pytest.mark.parametrize("kind", ["preference", "reward"])
def test_trl_trains_a_step_on_the_shards_as_they_are(kind, trained, tmp_path):
    """The shards loaded with ``load_from_disk`` train a step of DPO (TRL's collator, its own loss) and of a
    reward model (RewardTrainer takes tokenized pairs unchanged)."""
    folder = family_folder(trained, "qwen2_5", "qwen2_5", tmp_path / "tokenizer")
    data = tmp_path / "pairs.jsonl"
    records = preference_records("qwen2_5", 12, seed=4)
    margins = [0.5 * k if k % 4 else ("high" if k == 4 else None) for k in range(len(records))]  # 3 without a number
    for record, margin in zip(records, margins):
        record.update({} if margin is None else {"margin": margin})
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    margin = {"margin": True} if kind == "reward" else {}
    options = {"objective": kind, "packing": "none", "seq_len": MAX_LENGTH, "output_format": "hf", **margin}
    summary = run_transform([data], folder, tmp_path / "out", **options)
    dataset = datasets.load_from_disk(str(tmp_path / "out"))
    totals = summary.manifest["totals"]
    numbers = [m for m in margins if isinstance(m, float)]
    if kind == "reward":  # RewardTrainer's margin column: the records' numbers, in order; the others counted skips
        kept = iter(numbers)
        assert dataset["margin"] and all(any(m == n for n in kept) for m in dataset["margin"])  # a subsequence
        skipped = totals["skipped_by_reason"]
        assert skipped["missing_margin"] >= 1 and set(skipped) <= {"missing_margin", "pair_too_long"}
        assert len(dataset) + totals["documents_skipped"] == len(records) and len(dataset) <= len(numbers)
    else:  # DPO reads no margin: the margins are counted as not written, and said
        assert totals["margins_not_kept"] == len(numbers) and len(dataset) == totals["documents_written"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    common = {
        "output_dir": str(tmp_path / "run"),
        "max_steps": 1,
        "per_device_train_batch_size": 4,
        "report_to": "none",
    }
    model = _tiny_model(tokenizer, kind)
    if kind == "reward":
        trainer = trl.RewardTrainer(model, args=trl.RewardConfig(use_cpu=True, **common), train_dataset=dataset,
                                    processing_class=tokenizer)  # fmt: skip
    else:
        args = trl.DPOConfig(use_cpu=True, max_length=MAX_LENGTH, **common)
        trainer = prepared_dpo_trainer(model, ref_model=copy.deepcopy(model), args=args, train_dataset=dataset,
                                       processing_class=tokenizer)  # fmt: skip
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()
    assert trainer.state.global_step == 1
    assert any(not torch_equal(a, b) for a, b in zip(before, model.parameters()))  # a step was taken


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b.detach()))
