"""Chat against the templates people train with: TRL's ``chat_templates/`` (Apache-2.0, copied in
``tests/support/chat_templates/trl/`` from huggingface/trl), each model family's original template and its
``*_training.jinja`` with ``{% generation %}`` markers, on generated conversations with system
prompts, several turns, empty and whitespace-padded answers, reasoning (``reasoning_content`` and
``<think>`` in the content), tool lists, tool calls and tool results.

- Training templates: ``input_ids`` equal ``apply_chat_template(messages, tools=…)`` and the labels'
  mask equals ``return_assistant_tokens_mask`` on every row.
- Original templates (no markers): ``input_ids`` equal; every assistant answer, the reasoning the
  template keeps and every tool call carries loss, ending on a special token (the end of turn); no
  system, user or tool text does. A record the template refuses (Gemma's system turn) is a counted
  ``template_error``, and no record stops the run."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from runs import read_output, run_transform
from trl_families import FAMILIES, SPECIALS, TRL, conversations, family_folder, train_tokenizer

from objcli.kernels import IGNORE

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train_tokenizer(tmp_path_factory.mktemp("trl-tokenizer"))


def expected(folder: Path, records: list[dict], with_mask: bool) -> list:
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    outputs = []
    for record in records:
        try:
            outputs.append(
                tokenizer.apply_chat_template(
                    record["messages"],
                    tools=record.get("tools"),
                    tokenize=True,
                    return_dict=True,
                    return_assistant_tokens_mask=with_mask,
                )
            )
        except Exception as error:  # noqa: BLE001 - what a template raises (Gemma's system turn)
            assert "not supported" in str(error) or "alternate" in str(error), error
            outputs.append(None)
    return tokenizer, outputs


def _run(folder: Path, records: list[dict], out: Path):
    data = out.with_suffix(".jsonl")
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    summary = run_transform([data], folder, out, objective="chat", packing="none", seq_len=1 << 16)
    _, rows = read_output(out)
    return summary.manifest["totals"], [np.array(r) for r in rows["input_ids"]], [np.array(r) for r in rows["labels"]]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_training_templates_give_transformers_assistant_masks(family, trained, tmp_path):
    folder = family_folder(trained, family, f"{family}_training", tmp_path)
    records = conversations(family, 120, seed=1)
    _, outputs = expected(folder, records, with_mask=True)
    totals, ids, labels = _run(folder, records, tmp_path / "out")
    kept = [o for o in outputs if o is not None and any(o["assistant_masks"])]
    assert totals["skipped_by_reason"].get("template_error", 0) == sum(o is None for o in outputs)
    assert len(ids) == len(kept) == totals["documents_written"]
    for row, label, out in zip(ids, labels, kept):
        assert row.tolist() == out["input_ids"]
        assert (label != IGNORE).astype(int).tolist() == out["assistant_masks"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_original_templates_supervise_every_assistant_turn_and_nothing_else(family, trained, tmp_path):
    folder = family_folder(trained, family, family, tmp_path)
    records = conversations(family, 120, seed=2)
    hf, outputs = expected(folder, records, with_mask=False)
    totals, ids, labels = _run(folder, records, tmp_path / "out")
    assert totals["documents_read"] == totals["documents_written"] + totals["documents_skipped"] == len(records)
    skipped = totals["skipped_by_reason"]
    assert set(skipped) <= {"template_error", "history_rewritten", "content_not_found"}, skipped
    assert skipped.get("template_error", 0) == sum(o is None for o in outputs)
    # DeepSeek-V3's template drops an answer's text after its first tool-calling turn: such a record is
    # skipped (its loss would be on what the template wrote instead), and only such a record.
    dropped = [
        o is not None
        and any(
            not _holds(hf.decode(o["input_ids"]), tag)
            for m in r["messages"]
            if m["role"] == "assistant"
            for tag in _tags(m)
            if tag.startswith("ANS")
        )
        for r, o in zip(records, outputs)
    ]
    assert skipped.get("content_not_found", 0) <= sum(dropped)
    written = {tuple(row.tolist()) for row in ids}
    assert not any(d and tuple(o["input_ids"]) in written for d, o in zip(dropped, outputs))
    assert totals["documents_written"] >= 0.8 * sum(o is not None for o in outputs), totals
    special_ids = {hf.convert_tokens_to_ids(s) for s in SPECIALS}
    by_ids = {tuple(o["input_ids"]): r for r, o in zip(records, outputs) if o is not None}
    for row, label in zip(ids, labels):
        record = by_ids[tuple(row.tolist())]  # input_ids equal transformers' for a record
        supervised = label != IGNORE
        edges = np.flatnonzero(np.diff(np.concatenate([[0], supervised.astype(np.int8), [0]])))
        runs = [(a, b) for a, b in zip(edges[::2], edges[1::2])]
        taught = "".join(hf.decode(row[a:b].tolist()) for a, b in runs)
        whole = hf.decode(row.tolist())
        assert all(row[b - 1] in special_ids for a, b in runs), taught  # every turn ends on its end of turn
        assert not any(tag in taught for tag in ("USR", "SYS", "TOOL")), taught
        for message in record["messages"]:
            if message["role"] != "assistant":
                continue
            for tag in _tags(message):
                assert not _holds(whole, tag) or _holds(taught, tag), (tag, taught)  # what it keeps is taught
        answers = sum(m["role"] == "assistant" for m in record["messages"])
        assert len(runs) <= answers


def _holds(text: str, tag: str) -> bool:
    """``ANS62`` in the text as a word of its own (not the start of ``ANS62b``)."""
    return re.search(re.escape(tag) + "(?![0-9a-z])", text) is not None


def _tags(message: dict) -> list[str]:
    text = message.get("content", "") + " " + message.get("reasoning_content", "")
    names = [c["function"]["name"] for c in message.get("tool_calls", [])]
    return [w for w in text.split() if w.startswith(("ANS", "RSN"))] + names


TOOL = {"type": "function", "function": {"name": "lookup", "description": "finds", "parameters": {"type": "object"}}}


def test_tools_stored_as_a_json_string_render_as_the_list_and_other_shapes_are_counted_skips(trained, tmp_path):
    """Many Hub datasets store ``tools`` as a JSON string: parsed into the list it holds (the ids
    transformers gives for the list); an object or a list of strings, which transformers refuses and
    a template would iterate a character or a key at a time, is a counted ``bad_tools`` skip."""
    folder = family_folder(trained, "qwen2_5", "qwen2_5_training", tmp_path)
    messages = [{"role": "user", "content": "find it"}, {"role": "assistant", "content": "ANS found"}]
    as_list = {"messages": messages, "tools": [TOOL]}
    _, outputs = expected(folder, [as_list], with_mask=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    for shape in ({"lookup": TOOL}, ["lookup"]):
        with pytest.raises(Exception):  # noqa: B017, PT011 - transformers' own refusal, whatever its class
            tokenizer.apply_chat_template(messages, tools=shape, tokenize=False)
    records = [
        {"messages": messages, "tools": json.dumps([TOOL])},
        {"messages": messages, "tools": {"lookup": TOOL}},
        {"messages": messages, "tools": ["lookup"]},
        {"messages": messages, "tools": "[not json"},
        {"messages": messages, "tools": ""},
    ]
    totals, ids, _ = _run(folder, records, tmp_path / "out")
    assert totals["skipped_by_reason"] == {"bad_tools": 3}
    assert ids[0].tolist() == outputs[0]["input_ids"]  # the string parsed: the list's rendering
    assert ids[1].tolist() == expected(folder, [{"messages": messages}], with_mask=True)[1][0]["input_ids"]


def test_chat_template_jinja_is_taken_over_the_configs_as_transformers_takes_it(trained, tmp_path):
    folder = family_folder(trained, "qwen2_5", "qwen2_5_training", tmp_path)
    records = [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "ANS a"}]}]
    _, from_config = expected(folder, records, with_mask=True)
    (folder / "chat_template.jinja").write_text((TRL / "qwen3_training.jinja").read_text())  # another template
    _, outputs = expected(folder, records, with_mask=True)
    assert outputs[0]["input_ids"] != from_config[0]["input_ids"]  # transformers took the file
    _, ids, labels = _run(folder, records, tmp_path / "out")
    assert ids[0].tolist() == outputs[0]["input_ids"]
    assert (labels[0] != IGNORE).astype(int).tolist() == outputs[0]["assistant_masks"]
