"""``--assistant-parts`` (issue 84, item 1): which parts of an assistant turn carry loss, each part found by
rendering. On real templates that write reasoning and tool calls (TRL's Qwen3, Qwen2.5 and DeepSeek-V3; vLLM's
Llama 3.1 JSON, DeepSeek-R1 and Hermes tool-call templates), for every choice of parts: the ids equal
``apply_chat_template``'s, and the tokens that lose their loss are exactly those of the parts switched off, as
transformers renders the conversation with and without each part (its offsets mapping them to tokens); a
turn none of whose written parts is learned keeps no loss, its end of turn included."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from paths import CHAT_TEMPLATES
from runs import SAMPLE, read_output, run_cli, run_transform, shard_files
from trl_families import FAMILIES, conversations, family_folder, train_tokenizer

from objcli.commands.verify import verify_output
from objcli.errors import ObjcliError
from objcli.kernels import IGNORE
from objcli.objectives.chat_parts import PARTS

transformers = pytest.importorskip("transformers")
TOOLS = CHAT_TEMPLATES / "tools"
STORES = Path(__file__).parents[1] / "data" / "stores"
# template -> (bos, eos, features of the generated conversations)
VENDORED = {
    "llama3.1_json": ("<|begin_of_text|>", "<|eot_id|>", {"tools", "tool_calls", "reasoning"}),
    "deepseek_r1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", {"tool_calls", "reasoning"}),
    "hermes": ("<s>", "<|im_end|>", {"tool_calls", "reasoning"}),
}
# Two in the default run (reasoning and tool calls; a call that is the whole turn), the rest with the heavy tests.
TEMPLATES = [
    "qwen3",
    "llama3.1_json",
    *(pytest.param(t, marks=pytest.mark.heavy) for t in ("qwen2_5", "deepseekv3", "deepseek_r1", "hermes")),
]
CHOICES = ["reasoning,tool-calls", "reasoning,answer", "tool-calls,answer", "answer", "reasoning", "tool-calls"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train_tokenizer(tmp_path_factory.mktemp("parts-tokenizer"))


def _folder(trained: Path, template: str, root: Path) -> Path:
    if template in FAMILIES:
        return family_folder(trained, template, template, root)
    bos, eos, _ = VENDORED[template]
    folder = root / template
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_bytes(trained.read_bytes())
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "bos_token": bos,
              "chat_template": (TOOLS / f"{template}.jinja").read_text()}  # fmt: skip
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def _records(template: str) -> list[dict]:
    """Generated conversations with reasoning and tool calls, one call a turn, with the ids and names the
    stricter templates ask of tool results."""
    family = template if template in FAMILIES else "qwen3"
    records = conversations(family, 60, seed=17)
    for record in records:
        for k, message in enumerate(record["messages"]):
            for call in message.get("tool_calls", ()):
                call["id"] = f"call{k:09d}"
            if message["role"] == "tool":
                message.update(name="fn", tool_call_id=f"call{k - 1:09d}")
        if template == "deepseek_r1":
            record.pop("tools", None)
    return records


def _render(tokenizer, record: dict, messages: list[dict], **options):
    """transformers' rendering, on the date objcli's --template-date gives templates that ask for today's."""
    options = {"tokenize": False, **options}
    return tokenizer.apply_chat_template(messages, tools=record.get("tools"), date_string="26 Jul 2024", **options)


def _without(message: dict, part: str) -> dict:
    changed = copy.deepcopy(message)
    if part == "tool-calls":
        changed.pop("tool_calls", None)
    else:
        changed.pop("reasoning_content", None)
        if "</think>" in changed.get("content", ""):
            changed["content"] = changed["content"].rpartition("</think>")[2].lstrip("\n")
    return changed


def _diff(text: str, other: str) -> tuple[int, int]:
    prefix = next((i for i, (a, b) in enumerate(zip(text, other)) if a != b), min(len(text), len(other)))
    suffix = 0
    while suffix < min(len(text), len(other)) - prefix and text[-1 - suffix] == other[-1 - suffix]:
        suffix += 1
    return prefix, len(text) - suffix


def _expected(tokenizer, record: dict, base_labels: np.ndarray, learned: set) -> np.ndarray:
    """The labels with ``learned`` parts, from the labels with every part: each assistant turn (a run of
    supervised tokens, in order) loses the tokens that overlap a part switched off, as transformers renders
    the conversation with and without it (the answer: every token before the end of turn), except those a
    learned part also holds; a turn with none of its written parts learned loses every token."""
    render = lambda messages: _render(tokenizer, record, messages)  # noqa: E731
    messages = record["messages"]
    text = render(messages)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = np.array(encoded["offset_mapping"])
    supervised = np.flatnonzero(base_labels != IGNORE)
    runs = np.split(supervised, np.flatnonzero(np.diff(supervised) > 1) + 1)
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    assert len(runs) == len(assistants)
    labels = base_labels.copy()
    for index, run in zip(assistants, runs):
        start, end = offsets[run[0]][0], offsets[run[-1]][1]
        parts = {}
        for part in ("reasoning", "tool-calls"):
            changed = _without(messages[index], part)
            if changed != messages[index]:
                a, b = _diff(text, render([*messages[:index], changed, *messages[index + 1 :]]))
                if a < b and not (start <= a and b <= end):  # later turns change too: the conversation up to it
                    upto = render(messages[: index + 1])
                    if upto[start:end] == text[start:end]:
                        a, b = _diff(upto, render([*messages[:index], changed]))
                if a < b:
                    parts[part] = (a, b)
        eot = offsets[run[-1]][0]  # the turn's end of turn: its last token, a special one
        inside = offsets[run]
        in_part = {p: (inside[:, 0] < b) & (inside[:, 1] > a) for p, (a, b) in parts.items()}
        rest = np.ones(len(run), bool)
        for mask in in_part.values():
            rest &= ~mask
        rest &= inside[:, 0] < eot
        answer_chars = "".join(text[x:y] for (x, y), r in zip(inside, rest) if r)
        written = set(parts) | ({"answer"} if answer_chars.strip() else set())
        if not written & learned:
            labels[run] = IGNORE
            continue
        off = np.zeros(len(run), bool)
        kept = np.zeros(len(run), bool)  # a token a learned part holds keeps its loss
        for part, mask in in_part.items():
            off |= mask if part not in learned else False
            kept |= mask if part in learned else False
        if "answer" not in learned:
            off |= inside[:, 0] < eot
        labels[run[off & ~kept]] = IGNORE
        assert start < end
    return labels


def _run(folder: Path, data: Path, out: Path, parts: str):
    summary = run_transform([data], folder, out, objective="chat", packing="none", seq_len=1 << 16,
                            assistant_parts=parts)  # fmt: skip
    if not summary.manifest["totals"]["rows"]:  # no turn learns a part these conversations have
        return [], []
    _, rows = read_output(out)
    return [np.array(r) for r in rows["input_ids"]], [np.array(r) for r in rows["labels"]]


@pytest.mark.parametrize("template", TEMPLATES)
def test_each_part_switched_off_loses_exactly_its_tokens(template, trained, tmp_path):
    folder = _folder(trained, template, tmp_path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    records = _records(template)
    data = tmp_path / "c.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    ids, base = _run(folder, data, tmp_path / "all", ",".join(PARTS))
    kept = list(zip(_written(tokenizer, records, ids), ids, base))  # ids equal apply_chat_template's, row by row
    assert len(kept) >= 20
    seen = set()
    for choice in CHOICES:
        learned = set(choice.split(","))
        expected = [(i, _expected(tokenizer, r, b, learned)) for r, i, b in kept]
        expected = [(i, lab) for i, lab in expected if (lab != IGNORE).any()]
        got_ids, got = _run(folder, data, tmp_path / choice.replace(",", "_"), choice)
        assert [i.tolist() for i in got_ids] == [i.tolist() for i, _ in expected]
        assert [lab.tolist() for lab in got] == [lab.tolist() for _, lab in expected], choice
        lost = sum(int((b != IGNORE).sum()) for _, _, b in kept) - sum(int((lab != IGNORE).sum()) for lab in got)
        seen |= {choice} if lost > 0 else set()
    assert "reasoning,tool-calls" in seen and len(seen) >= 3  # the answer always, and others where written


def _written(tokenizer, records: list[dict], rows: list[np.ndarray]) -> list[dict]:
    """The record of each row, in order: rows are the records objcli writes (it skips those whose turns the
    template writes otherwise once later turns follow, or without their content), each row's ids equal to
    transformers' rendering of its record."""
    found, position = [], 0
    for row in rows:
        while True:
            record = records[position]
            position += 1
            rendered = _render(tokenizer, record, record["messages"], return_dict=True, tokenize=True)
            if list(rendered["input_ids"]) == row.tolist():
                found.append(record)
                break
    return found


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"assistant_parts": "answer,thoughts"}, "parts are reasoning, tool-calls, answer"),
        ({"assistant_parts": "answer", "loss_on": "all"}, "--loss-on all learns every token"),
        ({"assistant_parts": "answer", "assistant_span": "content"}, "--assistant-span content"),
    ],
)
def test_parts_where_they_mean_nothing_are_refused(trained, tmp_path, options, said):
    folder = _folder(trained, "qwen3", tmp_path)
    data = tmp_path / "c.jsonl"
    data.write_text(json.dumps(_records("qwen3")[0]) + "\n")
    with pytest.raises(ObjcliError, match=said):
        run_transform([data], folder, tmp_path / "o", objective="chat", **options)


@pytest.mark.parametrize("template", ["qwen3", pytest.param("deepseekv3", marks=pytest.mark.heavy)])
def test_a_chat_store_keeps_the_parts_and_its_derived_runs_choose_them(template, trained, tmp_path):
    """A chat store keeps each turn's parts: every choice derived from it equals the text run's rows."""
    folder = _folder(trained, template, tmp_path)
    data = tmp_path / "c.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _records(template)))
    made = run_cli("tokenize", data, "-t", folder, "--chat", "-o", tmp_path / "store")
    assert made.returncode == 0, made.stderr
    for choice in (",".join(PARTS), *CHOICES):
        text = _run(folder, data, tmp_path / f"text-{choice}", choice)
        derived = _run(folder, tmp_path / "store", tmp_path / f"store-{choice}", choice)
        assert [[r.tolist() for r in column] for column in derived] == [[r.tolist() for r in c] for c in text], choice
    assert verify_output(tmp_path / "store").ok


def test_a_chat_store_made_before_derives_every_part_and_refuses_a_choice(tmp_path, monkeypatch):
    """A chat store of the layout before parts were kept (written by the objcli of stop 87) is read as it
    is; choosing parts from it is refused in one line, before any folder is made."""
    folder = shutil.copytree(STORES, tmp_path / "stores")
    shutil.copy(CHAT_TEMPLATES / "qwen2.5.jinja", folder)
    monkeypatch.chdir(folder)  # the store names its input and template as they were given, relatively
    tokenizer = SAMPLE / "llama-style" / "tokenizer.json"
    common = {"objective": "chat", "seq_len": 512, "chat_template": "qwen2.5.jinja"}
    run_transform(["chat-before-parts"], tokenizer, tmp_path / "derived", **common)
    run_transform(["chats-12.jsonl"], tokenizer, tmp_path / "text", **common)
    assert shard_files(tmp_path / "derived") == shard_files(tmp_path / "text")
    with pytest.raises(ObjcliError, match="tokenized before stores kept each turn's parts"):
        run_transform(["chat-before-parts"], tokenizer, tmp_path / "chosen", assistant_parts="answer", **common)
    assert not (tmp_path / "chosen").exists()
