"""The trainers people run keep packed rows' boundaries: a tiny, randomly initialised Llama-style
model fed objcli's rows through ``transformers``' ``Trainer`` (its own data path, default
arguments: ``remove_unused_columns``, its collator, ``use_cache=False``) gives, for each packed row,
the sum of the losses of its documents computed one by one. The same for ``chat`` rows through TRL's
``SFTTrainer`` against TRL's own tokenization of the same conversations, and for span-corruption rows
through a T5 model. The recipes are the ones ``objcli/docs/formats.md`` shows, run from the page.

Slow (PyTorch on the CPU; ``make test-all``), in the ``train`` extra of its own."""

import json
import re

import numpy as np
import pytest
from chat_data import build_tokenizer, conversations, write_jsonl
from conftest import ROOT, SAMPLE, run_transform

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")


def recipe(name: str, **names) -> dict:
    """Run the page's recipe block named ``name`` with ``names`` (SHARDS, OUTPUT, model, …) defined."""
    page = (ROOT / "objcli" / "docs" / "formats.md").read_text()
    code = re.search(rf"<!-- recipe: {name} -->\n```python\n(.*?)```", page, re.S).group(1)
    namespace = {"transformers": transformers, **names}
    exec(compile(code, f"formats.md recipe {name}", "exec"), namespace)  # noqa: S102 - the documented recipe
    return namespace


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


@pytest.mark.parametrize("packing", ["concat", "best-fit"])
def test_trainer_keeps_document_boundaries_in_packed_clm_rows(packing, tmp_path):
    out = tmp_path / "clm"
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)[:60]
    (tmp_path / "p.jsonl").write_text("".join(lines))
    run_transform(
        [tmp_path / "p.jsonl"], SAMPLE / "tokenizer.model", out, seq_len=256, packing=packing, output_format="hf"
    )
    model = tiny_llama(8000)
    names = recipe("clm", SHARDS=str(out), OUTPUT=str(tmp_path / "run"), model=model)
    trainer, train = names["trainer"], names["train"]
    assert not model.config.use_cache  # Trainer's default, which the packed-sequence detection needs
    raw = datasets.load_from_disk(str(out))
    batches = eval_batches(trainer, train)
    assert set(batches[0]) == {"input_ids", "position_ids", "labels"}  # segment_ids dropped, as Trainer does
    packed = [i for i, r in enumerate(raw) if max(r["segment_ids"]) > 1][:12]  # rows of several documents
    assert len(packed) >= 4

    def documents_loss(row):
        segments = np.asarray(row["segment_ids"])
        return sum(
            per_document_loss(model, np.asarray(row["input_ids"])[segments == k]) for k in range(1, segments.max() + 1)
        )

    for i in packed:
        assert summed_loss(model, batches[i]) == pytest.approx(documents_loss(raw[i]), rel=1e-4, abs=1e-3)

    # The check can fail: under the old column name Trainer drops the positions, and attention and
    # positions run across documents.
    old = eval_batches(trainer, train.rename_column("position_ids", "positions"))
    assert set(old[0]) == {"input_ids", "labels"}
    assert max(abs(summed_loss(model, old[i]) - documents_loss(raw[i])) for i in packed) > 1e-2


def test_sft_trainer_on_packed_chat_rows_equals_trl_on_the_conversations(tmp_path, monkeypatch):
    import functools

    trl = pytest.importorskip("trl")
    # TRL's config asks for bf16 by default, which a CPU refuses: the recipe runs as written, on the CPU.
    monkeypatch.setattr(trl, "SFTConfig", functools.partial(trl.SFTConfig, bf16=False, use_cpu=True, report_to="none"))
    folder = build_tokenizer("chatml-generation", tmp_path / "tok")
    records = [{"messages": r["messages"]} for r in conversations(40, "chatml-generation", seed=4)]
    data = write_jsonl(records, tmp_path / "chat.jsonl")
    run_transform(
        [data], folder, tmp_path / "sft", objective="chat", seq_len=512, output_format="hf", pad_token="<|endoftext|>"
    )  # one of its own: the model has no row for a <pad> added past it
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder.parent))
    model = tiny_llama(len(tokenizer))
    names = recipe("chat", SHARDS=str(tmp_path / "sft"), OUTPUT=str(tmp_path / "run"), model=model, tokenizer=tokenizer)
    ours = sum(summed_loss(model, b) for b in eval_batches(names["trainer"], names["train"]))

    # TRL's own tokenization of the same conversations, assistant tokens only, one at a time.
    config = trl.SFTConfig(str(tmp_path / "trl"), assistant_only_loss=True)
    theirs_trainer = trl.SFTTrainer(
        model=model, args=config, processing_class=tokenizer, train_dataset=datasets.Dataset.from_list(records)
    )
    theirs = 0.0
    for example in theirs_trainer.train_dataset:
        # TRL folds its assistant mask into labels (-100 off the assistant's tokens).
        batch = {"input_ids": torch.tensor(example["input_ids"])[None], "labels": torch.tensor(example["labels"])[None]}
        theirs += summed_loss(model, batch)
    assert ours == pytest.approx(theirs, rel=1e-4)


def test_a_seq2seq_model_reads_span_corruption_rows_as_they_are(tmp_path):
    out = tmp_path / "t5"
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)[:30]
    (tmp_path / "p.jsonl").write_text("".join(lines))
    run_transform(
        [tmp_path / "p.jsonl"],
        SAMPLE / "tokenizer.model",
        out,
        objective="span-corruption",
        seq_len=128,
        output_format="hf",
    )
    manifest = json.loads((out / "manifest.json").read_text())
    torch.manual_seed(0)
    config = transformers.T5Config(
        vocab_size=manifest["tokenizer"]["total_vocab_size"],
        d_model=32,
        d_ff=64,
        num_layers=2,
        num_heads=2,
        d_kv=16,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    model = transformers.T5ForConditionalGeneration(config)
    train = datasets.load_from_disk(str(out))
    trainer = transformers.Trainer(
        model=model, args=transformers.TrainingArguments(str(tmp_path / "run")), train_dataset=train
    )
    for batch, row in zip(eval_batches(trainer, train)[:8], train):
        targets = [t for t in row["labels"] if t != -100]
        direct = torch.tensor(row["input_ids"])[None], torch.tensor(targets)[None]
        with torch.no_grad():
            expected = float(model(input_ids=direct[0], labels=direct[1]).loss) * len(targets)
            got = float(model(**batch).loss) * int((batch["labels"] != -100).sum())
        assert set(batch) == {"input_ids", "labels"} and got == pytest.approx(expected, rel=1e-4)
