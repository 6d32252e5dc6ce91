"""RL prompts in verl's layout (issue 64, item 4): Parquet and ``datasets`` rows with ``data_source``,
``prompt`` messages, ``ability``, ``reward_model`` and ``extra_info``, read back by ``datasets`` as verl
reads them; a prompt's tokens are verl's own measure (``apply_chat_template(prompt,
add_generation_prompt=True, tools=…)``, tokenized), and prompts over ``--max-prompt-length`` are the ones
its ``filter_overlong_prompts`` drops, counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runs import run_cli, run_transform
from trl_families import conversations, family_folder, train_tokenizer

from objcli.commands.verify import verify_output

transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

LIMIT = 90


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train_tokenizer(tmp_path_factory.mktemp("trl-tokenizer"))


def _records(family: str) -> list[dict]:
    """Prompts from generated conversations (the turns before the last answer, user and system only),
    answers and sources as datasets give them; every fifth a bare string prompt."""
    records = []
    for k, record in enumerate(conversations(family, 60, seed=11)):
        messages = [m for m in record["messages"] if m["role"] in ("system", "user")][: 1 + k % 3]
        if k % 7 == 0:  # some over the limit
            messages[-1] = {**messages[-1], "content": messages[-1]["content"] * 12}
        prompt = messages if k % 5 else messages[-1]["content"]
        item = {"prompt": prompt, "answer": k * 7, **({"data_source": "gsm8k"} if k % 2 else {})}
        if "tools" in record:
            item["tools"] = record["tools"]
        records.append(item)
    return records


@pytest.mark.parametrize("family", ["qwen2_5", "llama3", "phi3_5"])
@pytest.mark.parametrize("fmt", ["parquet", "hf"])
def test_prompts_are_verls_rows_with_its_length_filter(family, fmt, trained, tmp_path):
    folder = family_folder(trained, family, family, tmp_path / "tokenizer")
    records = _records(family)
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    options = {"data_source": "mine", "answer_key": "answer", "max_prompt_length": LIMIT}
    summary = run_transform([data], folder, tmp_path / "out", objective="prompts", output_format=fmt, **options)
    out = tmp_path / "out"
    rows = (
        datasets.load_from_disk(str(out))
        if fmt == "hf"
        else datasets.load_dataset("parquet", data_files=sorted(map(str, out.glob("*.parquet"))), split="train")
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    expected = []
    for index, record in enumerate(records):
        messages = (
            record["prompt"] if isinstance(record["prompt"], list) else [{"role": "user", "content": record["prompt"]}]
        )
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tools=record.get("tools"))
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        if len(ids) <= LIMIT:  # verl's filter_overlong_prompts keeps these
            expected.append(
                {
                    "data_source": record.get("data_source", "mine"),
                    "prompt": messages,
                    "ability": "",
                    "reward_model": {"ground_truth": record["answer"], "style": "rule"},  # its own type
                    "extra_info": {"index": index, "prompt_tokens": len(ids)},
                }
            )
    assert rows.to_list() == expected
    totals = summary.manifest["totals"]
    assert 0 < totals["skipped_by_reason"]["prompt_too_long"] == len(records) - len(expected) < len(records)
    assert totals["documents_read"] == totals["documents_written"] + totals["documents_skipped"]


def test_records_that_are_no_prompt_are_counted_skips(trained, tmp_path):
    folder = family_folder(trained, "qwen2_5", "qwen2_5", tmp_path / "tokenizer")
    records = [
        {"prompt": "ok", "data_source": "s"},
        {"chosen": "x", "rejected": "y"},  # no prompt
        {"prompt": "no source"},  # no data_source, and no --data-source
        {"prompt": [{"role": "user", "content": "x", "tool_calls": []}], "data_source": "s"},  # not role+content
        {"prompt": [{"role": "user", "content": [{"type": "image"}]}], "data_source": "s"},
        [1, 2],
    ]
    data = tmp_path / "bad.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = run_transform([data], folder, tmp_path / "out", objective="prompts", output_format="parquet")
    totals = summary.manifest["totals"]
    assert totals["documents_written"] == 1
    assert totals["skipped_by_reason"] == {
        "no_prompt": 1,
        "no_data_source": 1,
        "bad_message": 1,
        "non_text_content": 1,
        "not_an_object": 1,
    }


def test_value_columns_go_through_every_command_and_the_hubs_loader(trained, tmp_path):
    """Rows of values (strings, records) resharded, merged, shuffled across shards and split keep every
    row as written; ``load_dataset`` reads the folder by its card's declared features."""
    folder = family_folder(trained, "qwen2_5", "qwen2_5", tmp_path / "tokenizer")
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"question {k}", "ground_truth": str(k)}) + "\n" for k in range(60)))
    common = {"objective": "prompts", "data_source": "s", "output_format": "parquet", "shard_size": "13"}
    run_transform([data], folder, tmp_path / "a", **common)
    run_transform([data], folder, tmp_path / "shuffled", shuffle_rows=True, **common)
    run_transform([data], folder, tmp_path / "split", split="validation=25%", **common)

    def rows(name: str, **kw) -> list[dict]:
        loaded = datasets.load_dataset(str(tmp_path / name), **kw)
        return [row for split in sorted(loaded) for row in loaded[split]]

    original = rows("a")
    assert [r["reward_model"]["ground_truth"] for r in original] == [str(k) for k in range(60)]
    assert run_cli("reshard", tmp_path / "a", "--shard-size", "25").returncode == 0
    assert rows("a") == original
    assert run_cli("merge", tmp_path / "a", tmp_path / "split", "-o", tmp_path / "merged").returncode == 0
    key = lambda r: r["extra_info"]["index"]  # noqa: E731
    assert sorted(rows("shuffled"), key=key) == original != rows("shuffled")
    assert sorted(rows("split"), key=key) == original
    for name in ("a", "shuffled", "split", "merged"):
        assert verify_output(tmp_path / name).ok, name
