"""Small tokenizers trained here for each chat format in ``tests/support/chat_templates``, and generated
conversations that try the edges: multi-turn, system prompts, empty messages, Unicode, padding
whitespace that templates trim, and text that spells the special tokens."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from paths import CHAT_TEMPLATES

TEMPLATES = CHAT_TEMPLATES

# family -> (template, byte-level?, special tokens, bos, eos)
FAMILIES = {
    "llama3": (
        "llama3.jinja",
        True,
        ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        "<|begin_of_text|>",
        "<|eot_id|>",
    ),
    "qwen2.5": ("qwen2.5.jinja", True, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, "<|im_end|>"),
    "mistral": ("mistral.jinja", False, ["<unk>", "<s>", "</s>"], "<s>", "</s>"),
    "gemma": (
        "gemma.jinja",
        False,
        ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"],
        "<bos>",
        "<eos>",
    ),
    "chatml-generation": (
        "chatml-generation.jinja",
        True,
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        None,
        "<|im_end|>",
    ),
}

# What ends an assistant turn in each format (the token the model learns to stop with).
TURN_END = {
    "llama3": "<|eot_id|>",
    "qwen2.5": "<|im_end|>",
    "mistral": "</s>",
    "gemma": "<end_of_turn>",
    "chatml-generation": "<|im_end|>",
}

WORDS = (
    "the model answers what the user asks about rivers , mountains and the history of printing ; "
    "please explain why 42 is an answer ? Sure : here is a list of three things . def f ( x ) : return x * 2 "
    "café naïve 東京 大学 Привет мир 🙂 🚀 مرحبا"
).split()


def training_texts() -> list[str]:
    """Sentences of the words, and the templates' own text, so every character is in the alphabet
    (a Metaspace BPE drops characters it has never seen)."""
    rng = np.random.default_rng(7)
    templates = [path.read_text() for path in sorted(TEMPLATES.glob("*.jinja"))]
    return [" ".join(rng.choice(WORDS, size=rng.integers(5, 40))) for _ in range(3000)] + templates * 5


def build_tokenizer(family: str, folder: Path) -> Path:
    """A trained tokenizer.json and a tokenizer_config.json holding the family's template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    template_file, byte_level, specials, bos, eos = FAMILIES[family]
    folder.mkdir(parents=True, exist_ok=True)
    if byte_level:
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tokenizer = Tokenizer(models.BPE(byte_fallback=True, unk_token=None))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
        tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
        alphabet = []
    trainer = trainers.BpeTrainer(
        vocab_size=1200, special_tokens=specials, initial_alphabet=alphabet, show_progress=False
    )
    tokenizer.train_from_iterator(training_texts(), trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": (TEMPLATES / template_file).read_text(),
        "eos_token": eos,
        "model_max_length": 1 << 20,
    }
    if bos:
        config["bos_token"] = bos
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return folder / "tokenizer.json"


def _content(rng: np.random.Generator, specials: list[str]) -> str:
    kind = rng.integers(0, 10)
    if kind == 0:
        return ""
    words = list(rng.choice(WORDS, size=rng.integers(1, 25)))
    if kind == 1:  # text that spells a special token
        words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(specials)))
    text = " ".join(words)
    if kind == 2:  # whitespace that trimming templates drop
        text = f"  {text}\n"
    if kind == 3:
        text = text.replace(" ", "\n", 2)
    return text


def conversations(count: int, family: str, seed: int = 0) -> list[dict]:
    """Records with ``messages``: system prompts sometimes, alternating turns, sometimes a tool turn."""
    rng = np.random.default_rng(seed)
    specials = FAMILIES[family][2]
    records = []
    for _ in range(count):
        messages = []
        if rng.random() < 0.3:
            messages.append({"role": "system", "content": _content(rng, specials)})
        for _ in range(int(rng.integers(1, 5))):
            messages.append({"role": "user", "content": _content(rng, specials)})
            messages.append({"role": "assistant", "content": _content(rng, specials)})
            if rng.random() < 0.05:
                messages.append({"role": "tool", "content": _content(rng, specials)})
        records.append({"messages": messages})
    return records


def write_jsonl(records: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def preference_pairs(count: int, family: str, seed: int = 0) -> list[dict]:
    """Preference records from ``conversations``: the last question is the prompt, its answer chosen,
    another one rejected (TRL's explicit layout)."""
    rng = np.random.default_rng(seed + 1)
    pairs = []
    for record in conversations(count, family, seed):
        messages = record["messages"]
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        rejected = {"role": "assistant", "content": _content(rng, FAMILIES[family][2]) + " (rejected)"}
        pairs.append({"prompt": messages[last - 1 : last], "chosen": [messages[last]], "rejected": [rejected]})
    return pairs


def record_folders(root: Path, family: str = "mistral") -> dict:
    """Folders of records, by what an objective that reads whole records reads (``Objective.reads``)."""
    from objcli.objectives.supply import Provides

    (root / "chat").mkdir(parents=True, exist_ok=True)
    (root / "pairs").mkdir(exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    write_jsonl(conversations(60, family), root / "chat" / "chat.jsonl")
    pairs = preference_pairs(60, family)
    write_jsonl(pairs, root / "pairs" / "pairs.jsonl")
    prompts = [{"prompt": p["prompt"], "data_source": "test", "ground_truth": str(k)} for k, p in enumerate(pairs)]
    write_jsonl(prompts, root / "prompts" / "prompts.jsonl")
    return {Provides.CONVERSATIONS: root / "chat", Provides.PAIRS: root / "pairs", Provides.PROMPTS: root / "prompts"}
