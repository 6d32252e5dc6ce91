"""``objcli train-tokenizer … -o tokenizer.json``: a byte-level BPE as most current models use, trained
by the ``tokenizers`` library's own trainer (the ``hf`` extra), written as a ``tokenizer.json`` with a
``tokenizer_config.json`` beside it naming its special tokens, so that ``transformers`` loads the folder
(``AutoTokenizer.from_pretrained``) and every objcli command takes it.

The split is Llama 3's (and GPT-4's cl100k) pattern, then byte-level pieces (every byte a token, so no
text is unknown); merges follow the pattern's pieces, never across them. The special tokens are
``<|endoftext|>`` (the EOS, ids 0) and ``--special`` ones after it, in the order given: added tokens the
trainer never merges into, and that objcli keeps as plain text when a corpus spells them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ObjcliError
from ..tokenizers.bpe_spec import LLAMA3_PATTERN as SPLIT_PATTERN

EOS = "<|endoftext|>"


def check_bpe_request(request, given: set[str]) -> None:
    """What a byte-level BPE does not take: SentencePiece's own options (one line naming them)."""
    theirs = sorted(given & {"model_type", "preset", "character_coverage"})
    if theirs:
        flag = "--" + theirs[0].replace("_", "-")
        raise ObjcliError(
            f"{flag}: applies to a SentencePiece model (-o NAME.model); a byte-level BPE (-o {request.output}) keeps "
            "text exactly and covers every byte: drop it"
        )
    import importlib.util

    if importlib.util.find_spec("tokenizers") is None:  # said before any text is read
        raise ObjcliError("a byte-level BPE is trained by the tokenizers library: pip install 'objcli[hf]'")
    if Path(request.output).name == "tokenizer_config.json":
        raise ObjcliError(
            f"output {request.output}: is the name of the configuration written beside the tokenizer; "
            "name the tokenizer file tokenizer.json"
        )
    config = Path(request.output).with_name("tokenizer_config.json")
    if config.exists() and not config.is_file():
        raise ObjcliError(f"{config}: is not a file, and the configuration is written there; remove it, or choose -o")
    if EOS in request.special:
        raise ObjcliError(f"--special {EOS}: the byte-level BPE has it already, as its EOS; drop it")
    if request.vocab_size < 256 + 1 + len(request.special):
        least = 256 + 1 + len(request.special)
        raise ObjcliError(
            f"--vocab-size {request.vocab_size}: a byte-level BPE needs at least {least} (256 bytes, the specials)"
        )


def byte_level_trainer(vocab_size: int, special: tuple[str, ...] = (), progress: bool = False):
    """(an untrained tokenizer, its trainer): Llama 3's split, byte-level pieces, EOS and ``special``
    as added tokens (the benchmarks train their 32k file with it too)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, *special],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=progress,
    )
    return tokenizer, trainer


def write_byte_level_bpe(request, sentences, temp: Path, progress: bool) -> dict:
    """Train on the sentences, then write ``tokenizer.json`` (atomically, through ``temp``) and its
    ``tokenizer_config.json``; the vocabulary size the trainer reached (it stops early when the text
    has no more pairs to merge)."""
    os.environ["RAYON_NUM_THREADS"] = str(request.threads)  # the child's pool, sized before its first use
    try:
        tokenizer, trainer = byte_level_trainer(request.vocab_size, request.special, progress)
    except ImportError:
        raise ObjcliError("a byte-level BPE is trained by the tokenizers library: pip install 'objcli[hf]'") from None
    length = None
    if request.max_lines or request.sample_chars is not None:  # a sample is bounded: its total shown in progress
        sentences = list(sentences)
        length = len(sentences)
    tokenizer.train_from_iterator(sentences, trainer, length=length)
    size = tokenizer.get_vocab_size()
    temp.write_text(tokenizer.to_str(), encoding="utf-8")
    config = Path(request.output).with_name("tokenizer_config.json")
    written, note = _merged_config(config, _config(request), {EOS, *request.special})
    config_temp = config.with_name(config.name + ".tmp")
    config_temp.write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    os.replace(config_temp, config)
    os.replace(temp, request.output)
    return {
        "path": request.output,
        "vocab_size": size,
        "model_type": "byte-level BPE",
        "preset": "bytes",
        "config": str(config),
        "config_note": note,
    }


def _merged_config(path: Path, ours: dict, tokens: set[str]) -> tuple[dict, str]:
    """The configuration to write over one already beside the tokenizer: its own settings kept (a chat
    template, the special tokens it names where the new vocabulary has them), ours for the rest; and
    what was kept, for the summary."""
    if not path.exists():
        return ours, ""
    try:
        existing = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ours, "replaced: it was not readable JSON"
    if not isinstance(existing, dict):
        return ours, "replaced: it was not a JSON object"
    specials = ("eos_token", "bos_token", "pad_token", "unk_token")
    kept = [
        k
        for k in existing
        if existing[k] != ours.get(k, ...) and (k not in ours or (k in specials and existing[k] in tokens))
    ]
    merged = {**ours, **{k: existing[k] for k in kept}}
    return merged, f"kept its {', '.join(kept)}" if kept else "replaced"


def _config(request) -> dict:
    """What transformers reads beside a tokenizer.json: the class, the EOS and the other specials."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS,
        "bos_token": None,
        "pad_token": None,
        "unk_token": None,
        "additional_special_tokens": list(request.special),
        "model_max_length": 1_000_000_000_000_000_019_884_624_838_656,
        "clean_up_tokenization_spaces": False,
    }
