"""Builds sample_data/llama-style/: a Llama-3-style byte-level BPE ``tokenizer.json`` (Llama 3's split
pattern, ByteLevel bytes, ``<|begin_of_text|>`` added by the post-processor as Llama 3's template does)
with 8,192 ids, trained by the stable ``tokenizers`` library on this folder's corpus, and its
``tokenizer_config.json``. Like many base models' files it names no pad token.

    python sample_data/build_tokenizer_json.py     (needs: pip install 'objcli[hf]')
"""

import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = Path(__file__).resolve().parent
# Llama 3's pre-tokenizer split (its tokenizer.json, and objcli.tokenizers.tiktoken_bpe.LLAMA3_PATTERN).
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                  r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>"]


def main() -> None:
    tokenizer = Tokenizer(models.BPE(ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_PATTERN), "isolated"),
                                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=8192, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    texts = [json.loads(line)["text"] for name in ("prose.jsonl", "code.jsonl") for line in (HERE / name).open()]
    tokenizer.train_from_iterator(texts, trainer)
    bos = tokenizer.token_to_id(SPECIALS[0])
    tokenizer.post_processor = processors.TemplateProcessing(single=f"{SPECIALS[0]} $A", pair=f"{SPECIALS[0]} $A $B",
                                                             special_tokens=[(SPECIALS[0], bos)])
    out = HERE / "llama-style"
    out.mkdir(exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    config = {"bos_token": SPECIALS[0], "eos_token": SPECIALS[1], "model_max_length": 8192,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


if __name__ == "__main__":
    main()
