"""``objcli train-tokenizer``: a SentencePiece model trained with deterministic settings.

Documents come through the same readers as ``transform`` and are fed to the trainer line by
line (SentencePiece skips "sentences" longer than ``max_sentence_length``). The ids of the
standard pieces are fixed: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, ``<pad>`` 3, then the reserved
special pieces in the order given. Reserved pieces are *control* symbols: SentencePiece never
produces them from text, so a corpus that spells ``[MASK]`` keeps it as plain text.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

from .errors import ObjcliError
from .readers import ReadOptions, RecordLog, plan_partitions, read_documents, resolve_inputs

PRESETS = {
    # SentencePiece's defaults for prose: NFKC normalization, whitespace collapsed.
    "text": {"normalization_rule_name": "nmt_nfkc", "remove_extra_whitespaces": True, "add_dummy_prefix": True},
    # Keeps text exactly as it is (indentation, runs of spaces): what code and FIM need.
    "code": {
        "normalization_rule_name": "identity",
        "remove_extra_whitespaces": False,
        "add_dummy_prefix": False,
        "allow_whitespace_only_pieces": True,
    },
}


def _lines(inputs: list[str], options: ReadOptions, max_lines: int) -> Iterator[str]:
    files = resolve_inputs(inputs)
    count = 0
    for partition in plan_partitions(files, 1 << 62, options.text_unit):
        for texts in read_documents(partition, options, RecordLog(strict=options.strict)):
            for text in texts:
                for line in text.split("\n"):
                    if line.strip():
                        yield line
                        count += 1
                        if max_lines and count >= max_lines:
                            return


def train_tokenizer(
    inputs: list[str],
    output: str,
    vocab_size: int,
    model_type: str = "unigram",
    preset: str = "text",
    special: tuple[str, ...] = (),
    text_key: str = "text",
    text_unit: str = "line",
    character_coverage: float = 0.9995,
    max_lines: int = 0,
    threads: int = 1,
) -> dict:
    import sentencepiece as spm

    if vocab_size < 8 + len(special):
        raise ObjcliError(f"--vocab-size {vocab_size}: too small; use at least {8 + len(special)}")
    if preset not in PRESETS:
        raise ObjcliError(f"--preset {preset}: choose one of {', '.join(PRESETS)}")
    options = ReadOptions(text_key=text_key, text_unit=text_unit)
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=_lines(inputs, options, max_lines),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            byte_fallback=True,
            split_digits=True,
            unk_id=0,
            bos_id=1,
            eos_id=2,
            pad_id=3,
            control_symbols=list(special),
            max_sentence_length=16384,
            input_sentence_size=0,
            shuffle_input_sentence=False,
            num_threads=threads,
            minloglevel=2,
            **PRESETS[preset],
        )
    except RuntimeError as error:
        raise ObjcliError(f"SentencePiece training failed: {str(error).strip()}") from None
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    temp.write_bytes(model.getvalue())
    os.replace(temp, path)
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    return {"path": str(path), "vocab_size": processor.get_piece_size(), "model_type": model_type, "preset": preset}
