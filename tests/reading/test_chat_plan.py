"""A chat store's plan (``Chat.plans_lengths``): conversations and their labels as runs, packed by best-fit from
their lengths (``BestFitPlanner``), give through ``objcli.reading.Rows`` the rows the same command writes with
``--format arrow``, for every --loss-on and --overlong a chat store derives, split and shuffled too; a run
whose turns' parts carry loss apart (--assistant-parts) plans through the packer, and its rows are the same."""

import numpy as np
import pytest
from chat_data import build_tokenizer, conversations, write_jsonl
from runs import SAMPLE, run_tokenize, run_transform

from objcli.reading.reader import Rows
from objcli.recipe import config_from_values
from objcli.run.setup import set_up_objective

TEMPLATE = SAMPLE.parent / "tests" / "support" / "chat_templates" / "mistral.jinja"


@pytest.fixture(scope="module")
def chat_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("chat-plan")
    (root / "data").mkdir()
    write_jsonl(conversations(200, "mistral", seed=11), root / "data" / "a.jsonl")
    tokenizer = build_tokenizer("mistral", root / "tokenizer")
    options = {"objective": "chat", "chat_template": str(TEMPLATE), "partition_size": "24KiB", "batch_size": "6KiB"}
    run_tokenize([root / "data"], tokenizer, root / "store", "conversations", workers=2, **options)
    return tokenizer, root / "store"


def _plans_lengths(tokenizer, run, output) -> bool:
    config = config_from_values({"inputs": ["-"], "tokenizer": str(tokenizer), "output": str(output), **run})
    return set_up_objective(config)[2].plans_lengths


@pytest.mark.parametrize(
    "options",
    [
        {"loss_on": "last-assistant", "overlong": "drop", "split": "validation=20%", "shuffle_rows": True},
        pytest.param({"loss_on": "all", "seq_len": 48}, marks=pytest.mark.heavy),
        pytest.param({"loss_on": "assistant", "overlong": "truncate", "seq_len": 64}, marks=pytest.mark.heavy),
        pytest.param({"assistant_parts": "answer", "seq_len": 128}, marks=pytest.mark.heavy),
    ],
    ids=["last-assistant-drop-split-shuffled", "all", "assistant-truncate", "parts-through-the-packer"],
)
def test_a_chat_plan_is_the_written_rows(options, chat_store, tmp_path):
    tokenizer, store = chat_store
    run = {"objective": "chat", "chat_template": str(TEMPLATE), "seq_len": 96, "packing": "best-fit", **options}
    assert _plans_lengths(tokenizer, run, tmp_path / "setup") == ("assistant_parts" not in options)
    written = run_transform([store], tokenizer, tmp_path / "arrow", workers=2, **run)
    planned = run_transform([store], tokenizer, tmp_path / "plan", output_format="plan", workers=2, **run)
    a, b = Rows(tmp_path / "arrow"), Rows(tmp_path / "plan")
    assert len(a) == len(b) == written.manifest["totals"]["rows"] > 0 and a.columns == b.columns
    learned = 0
    for i in range(len(a)):
        x, y = a[i], b[i]
        for name in a.columns:
            assert x[name].dtype == y[name].dtype and np.array_equal(x[name], y[name]), (i, name)
        learned += int((x["labels"] != -100).sum())
    tokens = written.manifest["totals"]["tokens"]
    assert learned == tokens if run.get("loss_on") == "all" else 0 < learned < tokens  # labels cut in runs
    shards = {"shards"}  # a plan keeps a partition's rows in one file
    totals = [{k: v for k, v in run.manifest["totals"].items() if k not in shards} for run in (planned, written)]
    assert totals[0] == totals[1]
