"""Chat data in the layouts people download: ShareGPT and Alpaca (JSON lines and JSON arrays) give
the ids and masks of the same conversations given as ``messages``; content as a list of text parts is
passed to the template as transformers passes it; an image part and a prompt-only record are counted
skips; ``--turns each`` writes one example per assistant turn; Llama 2's template, which strips a
message and writes the space back, is taken apart (``--assistant-span content``)."""

import json

import numpy as np
import pytest
from chat_data import build_tokenizer
from runs import SAMPLE, manifest_json, read_output, run_cli, run_transform

from objcli.kernels import IGNORE

pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return build_tokenizer("qwen2.5", tmp_path_factory.mktemp("qwen") / "tok")


CONVERSATIONS = [
    [
        ("system", "be brief"),
        ("user", "why rivers ?"),
        ("assistant", "the model answers"),
        ("user", "and ?"),
        ("assistant", " history "),
    ],
    [("user", "explain 42"), ("assistant", "")],
    [("user", "what about mountains"), ("assistant", "here is a list")],
]


def as_messages(conversation):
    return {"messages": [{"role": r, "content": c} for r, c in conversation]}


def as_sharegpt(conversation):
    speaker = {"system": "system", "user": "human", "assistant": "gpt"}
    return {"conversations": [{"from": speaker[r], "value": c} for r, c in conversation]}


def _run(tokenizer, path, out, **options):
    summary = run_transform([path], tokenizer, out, objective="chat", packing="none", seq_len=4096, **options)
    _, rows = read_output(out)
    return summary.manifest["totals"], rows["input_ids"], rows["labels"]


@pytest.mark.parametrize("array", [False, True], ids=["jsonl", "json-array"])
def test_sharegpt_gives_the_ids_and_masks_of_messages(qwen, tmp_path, array):
    def write(records, name):
        path = tmp_path / (name + (".json" if array else ".jsonl"))
        path.write_text(json.dumps(records) if array else "".join(json.dumps(r) + "\n" for r in records))
        return path

    reference = _run(qwen, write([as_messages(c) for c in CONVERSATIONS], "m"), tmp_path / "m")
    shared = _run(qwen, write([as_sharegpt(c) for c in CONVERSATIONS], "s"), tmp_path / "s")
    assert reference[1:] == shared[1:] and reference[0]["documents_written"] == len(CONVERSATIONS)


@pytest.mark.parametrize("array", [False, True], ids=["jsonl", "json-array"])
def test_alpaca_gives_the_ids_and_masks_of_messages(qwen, tmp_path, array):
    alpaca = [
        {"instruction": "Give three tips.", "input": "", "output": "Eat, sleep, walk."},
        {"instruction": "Translate.", "input": "bonjour", "output": "hello", "system": "be exact"},
    ]
    messages = [
        {
            "messages": [
                {"role": "user", "content": "Give three tips."},
                {"role": "assistant", "content": "Eat, sleep, walk."},
            ]
        },
        {
            "messages": [
                {"role": "system", "content": "be exact"},
                {"role": "user", "content": "Translate.\n\nbonjour"},
                {"role": "assistant", "content": "hello"},
            ]
        },
    ]
    (tmp_path / "a.json").write_text(json.dumps(alpaca) if array else "")
    path = tmp_path / "a.json" if array else tmp_path / "a.jsonl"
    if not array:
        path.write_text("".join(json.dumps(r) + "\n" for r in alpaca))
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in messages))
    assert _run(qwen, path, tmp_path / "a")[1:] == _run(qwen, tmp_path / "m.jsonl", tmp_path / "m")[1:]


PARTS = (
    "{% if tools %}<|im_start|>system\ntools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.content is string %}{{ m.content }}{% else %}"
    "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_content_parts_skips_and_the_template_arguments(qwen, tmp_path):
    hf = transformers.AutoTokenizer.from_pretrained(str(qwen.parent))
    (tmp_path / "parts.jinja").write_text(PARTS)
    tools = [{"type": "function", "function": {"name": "lookup", "description": "finds", "parameters": {}}}]
    parts = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "why rivers ?"}]},
            {"role": "assistant", "content": "the model"},
        ],
        "tools": tools,
    }
    records = [
        parts,
        {
            "messages": [
                {"role": "user", "content": [{"type": "image", "url": "x.png"}]},
                {"role": "assistant", "content": "a cat"},
            ]
        },
        {"prompt": [{"role": "user", "content": "only a prompt"}]},
        # TRL's preference layout: named as what it is (issue 65: it was diagnosed as prompt_only)
        {
            "prompt": [{"role": "user", "content": "which?"}],
            "chosen": [{"role": "assistant", "content": "this"}],
            "rejected": [{"role": "assistant", "content": "that"}],
        },
    ]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    totals, ids, labels = _run(qwen, tmp_path / "c.jsonl", tmp_path / "o", chat_template=str(tmp_path / "parts.jinja"))
    assert totals["skipped_by_reason"] == {"non_text_content": 1, "prompt_only": 1, "preference_pair": 1}
    assert totals["documents_read"] == 4 == totals["documents_written"] + totals["documents_skipped"]
    expected = hf.apply_chat_template(
        parts["messages"], tools=tools, tokenize=True, return_dict=True, chat_template=PARTS
    )["input_ids"]
    assert ids[0] == expected  # the tools were rendered, as apply_chat_template renders them
    taught = hf.decode([t for t, lab in zip(ids[0], labels[0]) if lab != IGNORE])
    assert taught == "the model<|im_end|>"


def test_one_example_per_assistant_turn(qwen, tmp_path):
    (tmp_path / "c.jsonl").write_text(json.dumps(as_messages(CONVERSATIONS[0])) + "\n")
    totals, ids, labels = _run(qwen, tmp_path / "c.jsonl", tmp_path / "o", turns="each")
    assert totals["documents_written"] == 1 and totals["documents_read"] == 1 and len(ids) == 2
    hf = transformers.AutoTokenizer.from_pretrained(str(qwen.parent))
    first = hf.apply_chat_template(as_messages(CONVERSATIONS[0][:3])["messages"], tokenize=True, return_dict=True)
    assert ids[0] == first["input_ids"]
    for row, label, answer in zip(ids, labels, ["the model answers", " history "]):  # as the template writes them
        assert hf.decode([t for t, lab in zip(row, label) if lab != IGNORE]) == answer + "<|im_end|>"
        assert np.sum(np.array(label) != IGNORE) > 0


LLAMA2 = (
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
    "message['content'].strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + message['content'].strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    return build_tokenizer("mistral", tmp_path_factory.mktemp("mistral") / "tok")


@pytest.mark.parametrize("span", ["turn", "content"])
def test_llama2_strip_and_a_trailing_space_are_taken_apart(span, mistral, tmp_path):
    (tmp_path / "llama2.jinja").write_text(LLAMA2)
    records = [
        {
            "messages": [
                {"role": "user", "content": "why rivers ? "},
                {"role": "assistant", "content": "x "},
                {"role": "user", "content": " and"},
                {"role": "assistant", "content": " history\n"},
            ]
        }
    ]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    totals, ids, labels = _run(
        mistral, tmp_path / "c.jsonl", tmp_path / "o", assistant_span=span, chat_template=str(tmp_path / "llama2.jinja")
    )
    assert totals["documents_written"] == 1, totals
    hf = transformers.AutoTokenizer.from_pretrained(str(mistral.parent))
    taught = hf.decode([t for t, lab in zip(ids[0], labels[0]) if lab != IGNORE])
    assert "x" in taught and "history" in taught and "rivers" not in taught and "and" not in taught


def test_every_skip_reason_names_where_its_first_record_is(tmp_path):
    """Issue 65: only bad_json said "first at convs.jsonl:61"; the reasons the chat objective finds
    (a record without messages, an unknown role, a preference pair, one too long to keep) now name
    their first record's file and line too, in the summary and in the manifest's partitions."""
    chatml = SAMPLE.parent / "tests" / "support" / "chat_templates" / "chatml-generation.jinja"
    long_answer = "word " * 400
    records = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
        {"other": 1},
        {"messages": [{"role": "alien", "content": "x"}, {"role": "assistant", "content": "y"}]},
        {"prompt": "which?", "chosen": "a", "rejected": "b"},
        {"messages": [{"role": "user", "content": "tell"}, {"role": "assistant", "content": long_answer}]},
    ]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    args = ("--objective", "chat", "--chat-template", chatml, "--overlong", "drop", "--seq-len", "64")
    run = run_cli("transform", tmp_path / "c.jsonl", "-t", SAMPLE / "llama-style", *args, "-o", tmp_path / "o")
    assert run.returncode == 0, run.stderr
    expected = {"no_messages": 2, "unknown_role": 3, "preference_pair": 4, "overlong": 5}
    for reason, line in expected.items():
        assert f"({reason}); first at {tmp_path / 'c.jsonl'}:{line}" in run.stderr, run.stderr
    (partition,) = manifest_json(tmp_path / "o")["partitions"]
    assert partition["first_skipped"] == {reason: f"{tmp_path / 'c.jsonl'}:{line}" for reason, line in expected.items()}
