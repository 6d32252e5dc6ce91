"""The trainers people run keep packed rows' boundaries: a tiny, randomly initialised Llama-style
model fed objcli's rows through ``transformers``' ``Trainer`` (its own data path, default
arguments: ``remove_unused_columns``, its collator, ``use_cache=False``) gives, for each packed row,
the sum of the losses of its documents computed one by one. The same for ``chat`` rows through TRL's
``SFTTrainer`` against TRL's own tokenization of the same conversations, and for span-corruption rows
through a T5 model. The recipes are the ones ``objcli/docs/formats.md`` shows, run from the page.

Slow (PyTorch on the CPU; ``make test-all``), in the ``train`` extra of its own."""

import numpy as np
import pytest
from chat_data import build_tokenizer, conversations, write_jsonl
from optional import lazily, requires
from recipes import recipe, recipe_folder, recipe_names
from runs import folder_bytes, run_cli

pytestmark = requires("torch", "transformers", "datasets")
torch = lazily("torch")
transformers = lazily("transformers")
datasets = lazily("datasets")

pytestmark = pytest.mark.slow


def run_recipe(name: str, folder, monkeypatch) -> dict:
    """The page's recipe ``name`` run as written in ``folder``: its objcli commands, then its script
    (its names kept for the checks). objcli's output folders are unchanged by the script."""
    commands, script = recipe(name)
    outputs = []
    for args in commands:
        result = run_cli(*args, cwd=folder)
        assert result.returncode == 0, result.stderr
        outputs.append(folder / args[args.index("-o") + 1])
    written = {out: folder_bytes(out) for out in outputs}
    monkeypatch.chdir(folder)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    namespace = {"__name__": "__main__"}
    exec(compile(script, f"formats.md recipe {name}", "exec"), namespace)  # noqa: S102 - the documented recipe
    for out in outputs:  # nothing of the trainer's (a datasets cache) lands beside the shards
        assert folder_bytes(out) == written[out]
    return namespace


def test_every_recipe_on_the_page_is_run_here():
    assert recipe_names() == [
        "chat",
        "chat-plan",
        "clm",
        "dpo",
        "dpo-packed",
        "plan",
        "preference-plan",
        "resume",
        "seq2seq",
        "vision",
    ]


def tiny_llama(vocab_size: int):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
    )
    return transformers.LlamaForCausalLM(config)


def summed_loss(model, batch) -> float:
    """The batch's loss as a sum over the tokens that carry it (the model gives their mean)."""
    with torch.no_grad():
        loss = model(**batch).loss
    labels = batch["labels"]
    return float(loss) * int((labels[..., 1:] != -100).sum())


def per_document_loss(model, ids) -> float:
    ids = torch.tensor(ids)[None]
    with torch.no_grad():
        return float(model(input_ids=ids, labels=ids).loss) * (ids.shape[1] - 1) if ids.shape[1] > 1 else 0.0


def eval_batches(trainer, dataset):
    trainer.args.per_device_eval_batch_size = 1
    trainer.model.eval()
    return list(trainer.get_eval_dataloader(dataset))


def test_trainer_keeps_document_boundaries_in_packed_clm_rows(tmp_path, monkeypatch):
    """The recipe's rows (concat), and best-fit rows of the same command, through the recipe's trainer."""
    folder = recipe_folder(tmp_path / "recipe")
    names = run_recipe("clm", folder, monkeypatch)
    trainer, model = names["trainer"], names["model"]
    assert trainer.state.global_step > 0 and not model.config.use_cache  # trained; the detection needs no cache
    command = recipe("clm")[0][0]
    best_fit = run_cli(*command[: command.index("-o")], "--packing", "best-fit", "-o", folder / "best-fit")
    assert best_fit.returncode == 0, best_fit.stderr
    for train in (names["train"], datasets.load_from_disk(str(folder / "best-fit"))["train"]):
        check_boundaries(trainer, model, train)


def test_trainer_over_a_plan_reads_the_rows_datasets_reads(tmp_path, monkeypatch):
    """The plan recipe trains; each row its reader gives Trainer is, tensor for tensor, the row the clm
    recipe's hf shards give through datasets' torch format (the same command from the text), and
    Trainer's batches over it keep the documents' boundaries."""
    folder = recipe_folder(tmp_path / "recipe")
    clm = run_recipe("clm", folder, monkeypatch)
    names = run_recipe("plan", folder, monkeypatch)
    assert names["trainer"].state.global_step > 0
    for split, dataset in (("train", names["train"]), ("validation", names["validation"])):
        hf = datasets.load_from_disk(str(folder / "shards"))[split].with_format("torch")
        assert len(dataset) == len(hf) > 0
        for i in range(len(hf)):
            mine, theirs = dataset[i], hf[i]
            assert mine.keys() == theirs.keys()
            for name in theirs:
                assert mine[name].dtype == theirs[name].dtype and torch.equal(mine[name], theirs[name]), (i, name)
    check_boundaries(clm["trainer"], clm["model"], clm["train"])


def check_boundaries(trainer, model, train):
    batches = eval_batches(trainer, train)
    assert set(batches[0]) == {"input_ids", "position_ids", "labels"}  # segment_ids dropped, as Trainer does
    packed = [i for i, r in enumerate(train) if max(r["segment_ids"]) > 1][:12]  # rows of several documents
    assert len(packed) >= 4

    def documents_loss(row):
        segments = np.asarray(row["segment_ids"])
        return sum(
            per_document_loss(model, np.asarray(row["input_ids"])[segments == k]) for k in range(1, segments.max() + 1)
        )

    for i in packed:
        assert summed_loss(model, batches[i]) == pytest.approx(documents_loss(train[i]), rel=1e-4, abs=1e-3)
    # The check can fail: without the positions (a trainer that drops them), attention and positions
    # run across documents.
    old = [{k: v for k, v in batches[i].items() if k != "position_ids"} for i in packed]
    assert max(abs(summed_loss(model, b) - documents_loss(train[i])) for b, i in zip(old, packed)) > 1e-2


def test_sft_trainer_on_packed_chat_rows_equals_trl_on_the_conversations(tmp_path, monkeypatch):
    trl = pytest.importorskip("trl")
    folder = recipe_folder(tmp_path / "recipe")
    build_tokenizer("chatml-generation", folder / "chat-model")
    records = [{"messages": r["messages"]} for r in conversations(40, "chatml-generation", seed=4)]
    write_jsonl(records, folder / "conversations.jsonl")
    names = run_recipe("chat", folder, monkeypatch)
    model, tokenizer = names["model"], names["tokenizer"]
    assert names["trainer"].state.global_step > 0
    ours = sum(summed_loss(model, b) for b in eval_batches(names["trainer"], names["train"]))
    ours += sum(summed_loss(model, b) for b in eval_batches(names["trainer"], validation_with_lengths(names, folder)))

    # TRL's own tokenization of the same conversations, assistant tokens only, one at a time.
    config = trl.SFTConfig(str(tmp_path / "trl"), assistant_only_loss=True, bf16=False, report_to="none")
    theirs_trainer = trl.SFTTrainer(
        model=model, args=config, processing_class=tokenizer, train_dataset=datasets.Dataset.from_list(records)
    )
    theirs = 0.0
    for example in theirs_trainer.train_dataset:
        # TRL folds its assistant mask into labels (-100 off the assistant's tokens).
        batch = {"input_ids": torch.tensor(example["input_ids"])[None], "labels": torch.tensor(example["labels"])[None]}
        theirs += summed_loss(model, batch)
    assert ours == pytest.approx(theirs, rel=1e-4)


def test_sft_trainer_reads_a_chat_plan_as_the_hf_shards_of_the_same_run(tmp_path, monkeypatch):
    """Issue 82, item 4: the chat-plan recipe trains TRL's SFTTrainer from rows made on read, and every example
    it hands TRL is the hf recipe's row of the same conversations and options, with the same seq_lengths."""
    pytest.importorskip("trl")
    folder = recipe_folder(tmp_path / "recipe")
    build_tokenizer("chatml-generation", folder / "chat-model")
    records = [{"messages": r["messages"]} for r in conversations(40, "chatml-generation", seed=4)]
    write_jsonl(records, folder / "conversations.jsonl")
    planned = run_recipe("chat-plan", folder, monkeypatch)
    assert planned["trainer"].state.global_step == -(-len(planned["rows"]) // 4) > 0
    written = run_recipe("chat", folder, monkeypatch)
    expected = list(written["train"])
    seen = list(planned["train"])
    assert len(seen) == len(expected) > 0
    for ours, theirs in zip(seen, expected):
        assert [list(ours[k]) for k in ("input_ids", "labels", "seq_lengths")] == [
            list(theirs[k]) for k in ("input_ids", "labels", "seq_lengths")
        ]


def validation_with_lengths(names, folder):
    """The recipe's validation split with its seq_lengths, made as the recipe makes train's."""
    return names["shards"]["validation"].map(names["with_seq_lengths"], keep_in_memory=True)


def test_a_seq2seq_model_reads_span_corruption_rows_as_they_are(tmp_path, monkeypatch):
    names = run_recipe("seq2seq", recipe_folder(tmp_path / "recipe"), monkeypatch)
    trainer, model, train = names["trainer"], names["model"], names["train"]
    assert trainer.state.global_step > 0
    for batch, row in zip(eval_batches(trainer, train)[:8], train):
        targets = [t for t in row["labels"] if t != -100]
        direct = torch.tensor(row["input_ids"])[None], torch.tensor(targets)[None]
        with torch.no_grad():
            expected = float(model(input_ids=direct[0], labels=direct[1]).loss) * len(targets)
            got = float(model(**batch).loss) * int((batch["labels"] != -100).sum())
        assert set(batch) == {"input_ids", "labels"} and got == pytest.approx(expected, rel=1e-4)


def _pairs(folder, count: int = 24) -> list[dict]:
    """Preference records from generated conversations: the last assistant turn chosen, another rejected."""
    records = []
    for k, record in enumerate(conversations(count, "chatml-generation", seed=6)):
        messages = record["messages"]
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        rejected = {"role": "assistant", "content": f"not that {k} " * (1 + k % 3)}
        records.append({"prompt": messages[:last], "chosen": [messages[last]], "rejected": [rejected]})
    write_jsonl(records, folder / "pairs.jsonl")
    return records


def test_the_dpo_recipe_trains_with_a_model_built_from_a_config(tmp_path, monkeypatch):
    """Issue 72, item 4: the recipe failed with a model built from a config (TRL loaded the reference from
    the policy's empty name); it gives the reference model itself."""
    pytest.importorskip("trl")
    folder = recipe_folder(tmp_path / "recipe")
    build_tokenizer("chatml-generation", folder / "chat-model")
    _pairs(folder)
    names = run_recipe("dpo", folder, monkeypatch)
    assert names["trainer"].state.global_step == 2


def test_trl_trains_dpo_and_a_reward_model_from_plans_of_a_pair_store(tmp_path, monkeypatch):
    """Issue 82, item 4: the preference-plan recipe trains TRL's DPOTrainer and RewardTrainer from rows made on
    read over a pair store, and every example each trainer is handed is the written run's (hf) row."""
    pytest.importorskip("trl")
    folder = recipe_folder(tmp_path / "recipe")
    build_tokenizer("chatml-generation", folder / "chat-model")
    _pairs(folder, 40)
    names = run_recipe("preference-plan", folder, monkeypatch)
    assert names["dpo"].state.global_step == -(-len(names["pairs"]) // 4) > 0
    assert names["reward"].state.global_step == -(-len(names["scored"]) // 4) > 0
    for objective, rows, columns in (
        ("preference", names["pairs"], ("prompt_ids", "chosen_ids", "rejected_ids")),
        ("reward", names["scored"], ("chosen_ids", "rejected_ids")),
    ):
        written = folder / f"written-{objective}"
        done = run_cli("transform", "pairs.jsonl", "--objective", objective, "-t", "chat-model/", "--seq-len", "512",
                       "--format", "hf", "-o", written, cwd=folder)  # fmt: skip
        assert done.returncode == 0, done.stderr
        expected = list(datasets.load_from_disk(str(written)))
        seen = list(rows.to_iterable_dataset())
        assert len(seen) == len(expected) > 20
        assert all([list(a[c]) for c in columns] == [list(b[c]) for c in columns] for a, b in zip(seen, expected))


def test_the_packed_pairs_loss_scores_each_side_as_the_pairs_unpacked(tmp_path, monkeypatch):
    """The packed recipe's per-side log-probabilities equal each pair's, side by side, unpacked (a prompt
    and its completion alone), and its loss trains: the shipped loss is the pairs' loss."""
    folder = recipe_folder(tmp_path / "recipe")
    build_tokenizer("chatml-generation", folder / "chat-model")
    _pairs(folder)
    names = run_recipe("dpo-packed", folder, monkeypatch)
    model, train = names["model"].eval(), names["train"]
    assert run_cli("transform", "pairs.jsonl", "--objective", "preference", "-t", "chat-model/", "--seq-len", "512",
                   "--format", "hf", "-o", "unpacked", cwd=folder).returncode == 0  # fmt: skip
    alone = {}
    with torch.no_grad():
        for row in datasets.load_from_disk(str(folder / "unpacked")):
            for side in ("chosen_ids", "rejected_ids"):
                ids = row["prompt_ids"] + row[side]
                logps = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
                targets = torch.tensor(ids[len(row["prompt_ids"]) :])
                alone[tuple(ids)] = float(logps[len(row["prompt_ids"]) - 1 : -1].gather(1, targets[:, None]).sum())
        packed = {}
        for row in train:
            sums = names["side_logps"](model, row)
            segments = np.asarray(row["segment_ids"])
            for k, total in enumerate(sums.tolist(), start=1):
                packed[tuple(np.asarray(row["input_ids"])[segments == k].tolist())] = total
    assert packed.keys() == alone.keys() and len(alone) > 20  # every side, packed and alone
    assert all(abs(packed[key] - alone[key]) < 1e-3 * max(1.0, abs(alone[key])) for key in alone)
    assert float(names["loss"]) > 0


def test_the_resume_recipe_trains_on_every_row_once_over_two_ranks_and_a_restart(tmp_path):
    """The page's resume recipe, as written, in processes of its own: two ranks of two StatefulDataLoader
    workers each, each rank stopped mid-epoch and run again in a new process: every row of the plan trained
    on exactly once (issue 83, item 2)."""
    import json
    import os
    import subprocess
    import sys
    from collections import Counter

    from objcli.reading import Rows

    folder = recipe_folder(tmp_path / "recipe")
    commands, script = recipe("resume")
    for args in commands:
        assert run_cli(*args, cwd=folder).returncode == 0
    (folder / "resume.py").write_text(script)
    for _ in range(2):  # the first run stops; the second, a new process, resumes
        for rank in range(2):
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": ""}
            done = subprocess.run([sys.executable, "resume.py"], cwd=folder, env=env, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
    assert all((folder / f"checkpoint-rank{rank}.pt").exists() for rank in range(2))
    seen = Counter()
    for rank in range(2):
        seen.update(tuple(json.loads(line)) for line in (folder / f"rows-rank{rank}.jsonl").read_text().splitlines())
    expected = Counter(tuple(row["input_ids"].tolist()) for row in Rows(folder / "plan"))
    assert seen == expected


@pytest.mark.heavy
def test_the_vision_recipe_trains_a_model_on_rows_whose_images_it_loads(tmp_path, monkeypatch):
    """Issue 85: the collator loads each packed row's images by reference and a tiny Qwen2-VL built from a
    config trains on the rows (its loss falls over three epochs)."""
    import numpy as np
    from vision_families import build_processor, conversations, make_images, write_jsonl

    folder = recipe_folder(tmp_path / "recipe")
    build_processor("qwen2_vl_256", folder / "qwen2-vl")
    images = make_images(folder / "images", np.random.default_rng(1), 8)
    write_jsonl(folder / "vqa.jsonl", conversations(images, np.random.default_rng(2), 16))
    names = run_recipe("vision", folder, monkeypatch)
    losses, rows = names["losses"], names["rows"]
    assert len(rows) > 2 and any(len(row["images"]) > 1 for row in rows)  # packed rows of several images
    steps = -(-len(rows) // 2)
    assert len(losses) == 3 * steps and np.mean(losses[-steps:]) < np.mean(losses[:steps])
