"""TRL's chat templates (``chat_templates/trl/``, Apache-2.0, from huggingface/trl) with one small byte-level
BPE holding every family's special tokens, and generated conversations with system prompts, several
turns, empty and whitespace-padded answers, reasoning, tool lists and tool calls where each family's
template renders them: what the chat and preference tests compare with TRL and transformers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from paths import CHAT_TEMPLATES

TRL = CHAT_TEMPLATES / "trl"
# family -> (bos, eos, what its template renders: tools list, tool calls, reasoning, system turns)
FAMILIES = {
    "llama3": ("<|begin_of_text|>", "<|eot_id|>", set()),
    "qwen2_5": (None, "<|im_end|>", {"tools", "tool_calls"}),
    "qwen3": (None, "<|im_end|>", {"tools", "tool_calls", "reasoning"}),
    "gemma": ("<bos>", "<eos>", set()),
    "gemma3": ("<bos>", "<eos>", set()),
    "phi3": ("<s>", "<|endoftext|>", set()),
    "phi3_5": ("<s>", "<|endoftext|>", set()),
    "deepseekv3": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", {"tool_calls", "reasoning"}),
}
SPECIALS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<bos>",
    "<eos>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<s>",
    "<|assistant|>",
    "<|end|>",
    "<|system|>",
    "<|user|>",
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁outputs▁begin｜>",
    "<｜tool▁outputs▁end｜>",
    "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>",
]
WORDS = "the river runs to the sea ; why is the sky blue ? because light scatters , said the model".split()


def train_tokenizer(folder: Path) -> Path:
    """One byte-level BPE holding every family's special tokens, trained on words and the templates."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS, 12)) for _ in range(500)] + [p.read_text() for p in TRL.glob("*.jinja")]
    tokenizer.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=1500,
            special_tokens=SPECIALS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def family_folder(trained: Path, family: str, template: str, root: Path) -> Path:
    bos, eos, _ = FAMILIES[family]
    folder = root / template
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_bytes(trained.read_bytes())
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": eos,
        "model_max_length": 1 << 20,
        "chat_template": (TRL / f"{template}.jinja").read_text(),
        **({"bos_token": bos} if bos else {}),
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def _answer(rng, k: int, features: set) -> dict:
    """An assistant message: words around a unique tag, sometimes empty or padded with whitespace,
    with reasoning or tool calls where the family's template renders them."""
    text = rng.choice(["", f"ANS{k} " + " ".join(rng.choice(WORDS, 4)), f"  ANS{k} padded \n", f"\nANS{k}"])
    message = {"role": "assistant", "content": text}
    if "reasoning" in features and rng.random() < 0.5:
        if rng.random() < 0.5:
            message["reasoning_content"] = f"RSN{k} thinking"
        else:
            message["content"] = f"<think>\nRSN{k} thinking\n</think>\n\n" + (text or f"ANS{k}")
    if "tool_calls" in features and rng.random() < 0.3:
        message["tool_calls"] = [{"type": "function", "function": {"name": f"fn{k}", "arguments": '{"x": 1}'}}]
    return message


def conversations(family: str, count: int, seed: int) -> list[dict]:
    features = FAMILIES[family][2]
    rng = np.random.default_rng(seed)
    records = []
    for c in range(count):
        messages = [{"role": "system", "content": f"SYS{c} be brief"}] if rng.random() < 0.3 else []
        for t in range(int(rng.integers(1, 4))):
            k = c * 10 + t
            messages.append({"role": "user", "content": f"USR{k} " + " ".join(rng.choice(WORDS, 5))})
            messages.append(_answer(rng, k, features))
            if messages[-1].get("tool_calls"):
                messages.append({"role": "tool", "content": f"TOOL{k} 42"})
                messages.append({"role": "assistant", "content": f"ANS{k}b done"})
        record = {"messages": messages}
        if "tools" in features and rng.random() < 0.3:
            record["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": "lookup",
                        "description": "TOOLDESC finds",
                        "parameters": {"type": "object", "properties": {}},
                    },
                }
            ]
        records.append(record)
    return records


def preference_records(family: str, count: int, seed: int) -> list[dict]:
    """Pairs from generated conversations: the messages before the last assistant turn are the prompt,
    that turn is chosen and another answer rejected; a third of the records give the prompt explicitly,
    a third only the two whole conversations (TRL extracts the prompt), a third as plain strings."""
    rng = np.random.default_rng(seed)
    records = []
    for k, record in enumerate(conversations(family, count, seed)):
        messages = record["messages"]
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        prompt, chosen = messages[:last], [messages[last]]
        rejected = [{"role": "assistant", "content": f"REJ{k} " + " ".join(rng.choice(WORDS, 3))}]
        layout = k % 3
        if layout == 0:
            pair = {"prompt": prompt, "chosen": chosen, "rejected": rejected}
        elif layout == 1:
            pair = {"chosen": prompt + chosen, "rejected": prompt + rejected}
        else:
            pair = {"prompt": f"PRM{k} " + " ".join(rng.choice(WORDS, 6)), "chosen": f" ANS{k} yes", "rejected": " no"}
        if layout < 2 and "tools" in record:
            pair["tools"] = record["tools"]
        records.append(pair)
    return records
