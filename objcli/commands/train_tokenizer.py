"""``objcli train-tokenizer``: a SentencePiece model (``-o tok.model``) or a byte-level BPE
``tokenizer.json`` (``-o tokenizer.json``, ``train_bpe.py``) trained with deterministic settings.

The trainer runs in a child process (``stoppable.py``): its C++ and Rust loops never return control to
Python, so Ctrl-C and SIGTERM stop the child at once, one line, and no model is left. Without
``--max-lines`` it trains on a sample sized to the vocabulary (``SAMPLE_CHARS_PER_PIECE`` characters a
piece: the summary says how many lines), which keeps a run to minutes; ``--max-lines 0`` reads it all.

Documents come through the same inputs stage as ``transform``. Prose is fed to the trainer line by
line; code (``--preset code``) in chunks of whole lines that keep their ``\\n``, so newlines and
the indentation after them can become pieces instead of costing a byte token each. The ids of
the standard pieces are fixed: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, ``<pad>`` 3, then the reserved
special pieces in the order given. Reserved pieces are *control* symbols: SentencePiece never
produces them from text, so a corpus that spells ``[MASK]`` keeps it as plain text.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import ObjcliError
from .training_log import sentencepiece_progress
from .training_sample import MAX_SENTENCE_BYTES, sample_sentences

PRESETS = {
    # SentencePiece's defaults for prose: NFKC normalization, whitespace collapsed.
    "text": {"normalization_rule_name": "nmt_nfkc", "remove_extra_whitespaces": True, "add_dummy_prefix": True},
    # Keeps text exactly as it is (indentation, runs of spaces, newlines): what code and FIM need.
    "code": {
        "normalization_rule_name": "identity",
        "remove_extra_whitespaces": False,
        "add_dummy_prefix": False,
        "allow_whitespace_only_pieces": True,
    },
}
# The default sample: characters of text per piece of the vocabulary (docs/commands.md's table of
# training time against corpus and vocabulary size, measured, says why this many).
SAMPLE_CHARS_PER_PIECE = 400


@dataclass(frozen=True)
class TrainingRequest:
    inputs: list[str]
    output: str
    vocab_size: int
    model_type: str = "unigram"
    preset: str = "text"
    special: tuple[str, ...] = ()
    text_key: str = "text"
    text_unit: str = "line"
    character_coverage: float = 0.9995
    max_lines: int | None = None  # None: the default sample for the vocabulary; 0: every line
    threads: int = 1

    @property
    def byte_level_bpe(self) -> bool:
        """``-o …json``: a byte-level BPE tokenizer.json, not a SentencePiece .model."""
        return self.output.endswith(".json")

    @property
    def sample_chars(self) -> int | None:
        """The characters of text the default sample stops at (None: ``--max-lines`` decides)."""
        return SAMPLE_CHARS_PER_PIECE * self.vocab_size if self.max_lines is None else None


def _check_request(request: TrainingRequest) -> None:
    if request.vocab_size < 8 + len(request.special):
        raise ObjcliError(f"--vocab-size {request.vocab_size}: too small; use at least {8 + len(request.special)}")
    bad = next((t for i, t in enumerate(request.special) if not t.strip() or t in request.special[:i]), None)
    if bad is not None:
        raise ObjcliError(f"--special {bad!r}: {'empty' if not bad.strip() else 'given twice'}; give each special once")
    if request.preset not in PRESETS:
        raise ObjcliError(f"--preset {request.preset}: choose one of {', '.join(PRESETS)}")
    if not 1 <= request.threads <= 1024:
        raise ObjcliError(f"--threads {request.threads}: must be between 1 and 1024")
    if request.max_lines is not None and request.max_lines < 0:
        raise ObjcliError(f"--max-lines {request.max_lines}: must be 0 (all) or more")
    if Path(request.output).is_dir():
        raise ObjcliError(
            f"output {request.output}: is a folder; name the file to write, e.g. "
            f"{Path(request.output) / 'tokenizer.model'} (SentencePiece) or {Path(request.output) / 'tokenizer.json'}"
        )


def _open_temp(output: str) -> Path:
    """Create the temp file next to the output before training, so a path that cannot be written
    fails now, not after minutes of training."""
    path = Path(output)
    temp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_bytes(b"")
    except OSError as error:
        raise ObjcliError(
            f"output {output}: cannot be written ({error.strerror}); choose another path with -o"
        ) from None
    return temp


SENTENCEPIECE_ERRORS = [
    (
        re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)"),
        "--vocab-size {0}: too large for this corpus, which makes at most {1} pieces; pass --vocab-size {1} or "
        "less, or train on more text",
    ),
    (
        re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)"),
        "--vocab-size {0}: too small for the {1} characters this corpus needs (with --character-coverage); pass "
        "a larger --vocab-size or a lower --character-coverage",
    ),
]


class _KeptError:
    """The sentences, with the one-line error of the reading kept: SentencePiece's trainer turns an
    exception raised in its iterator into a RuntimeError of its own, with Python's frames in its text."""

    def __init__(self, sentences):
        self.sentences, self.error = iter(sentences), None

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self.sentences)
        except ObjcliError as error:
            self.error = error
            raise


def _training_error(error: RuntimeError) -> ObjcliError:
    message = str(error).strip()
    for pattern, text in SENTENCEPIECE_ERRORS:
        match = pattern.search(message)
        if match:
            return ObjcliError(text.format(*match.groups()))
    # "INTERNAL: src/trainer_interface.cc(467) [check] What went wrong." -> "What went wrong."
    reason = re.sub(r"^\w+: \S+\(\d+\) \[.*?\]\s*", "", message) or message
    return ObjcliError(f"SentencePiece training failed: {reason}; check the inputs and options")


def _trained(request: TrainingRequest, sentences, progress: bool) -> io.BytesIO:
    """SentencePiece trained on the sentences: objcli's fixed ids (unk 0, bos 1, eos 2, pad 3), byte
    fallback, digits split, the request's specials as control symbols, the preset's settings."""
    import sentencepiece as spm

    model = io.BytesIO()
    with sentencepiece_progress(progress, request.vocab_size) as log_level:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences,
            model_writer=model,
            vocab_size=request.vocab_size,
            model_type=request.model_type,
            character_coverage=request.character_coverage,
            byte_fallback=True,
            split_digits=True,
            unk_id=0,
            bos_id=1,
            eos_id=2,
            pad_id=3,
            control_symbols=list(request.special),
            max_sentence_length=MAX_SENTENCE_BYTES,
            input_sentence_size=0,
            shuffle_input_sentence=False,
            num_threads=request.threads,
            minloglevel=log_level,
            **PRESETS[request.preset],
        )
    return model


def train_tokenizer(request: TrainingRequest, progress: bool = False) -> dict:
    """Train, then write the model atomically; with ``progress``, say how far it is on standard error.
    The training runs in a child process that a signal stops at once (no model is left then)."""
    from .stoppable import run_stoppable

    _check_request(request)
    temp = _open_temp(request.output)
    try:
        return run_stoppable(_train_and_write, request, progress, temp)
    finally:
        temp.unlink(missing_ok=True)


def _train_and_write(request: TrainingRequest, progress: bool, temp: Path) -> dict:
    """In the child: read the sample, train, write the temp file and rename it into place."""
    counts = {"sentences": 0, "documents": 0, "chars": 0, "sampled": False, "cut": 0}
    sentences = sample_sentences(request, counts, progress)
    first = next(sentences, None)
    if first is None:
        skipped = counts["log"].skipped if "log" in counts else {}
        why = "".join(f", {n:,} skipped ({reason})" for reason, n in skipped.items() if n)
        raise ObjcliError(
            f"inputs: no text to train on ({counts['documents']:,} documents with text{why}); "
            "check the inputs and --text-key"
        )
    if request.byte_level_bpe:
        from .train_bpe import write_byte_level_bpe

        result = write_byte_level_bpe(request, _prepend(first, sentences), temp, progress)
    else:
        result = _write_sentencepiece(request, _prepend(first, sentences), temp, progress)
    skipped = dict(counts["log"].skipped) if "log" in counts else {}
    return {
        **result,
        **{k: counts[k] for k in ("sentences", "sampled", "chars", "cut", "inputs")},
        "skipped": {k: v for k, v in skipped.items() if v},
    }


def _write_sentencepiece(request: TrainingRequest, sentences, temp: Path, progress: bool) -> dict:
    import sentencepiece as spm

    kept = _KeptError(sentences)
    try:
        model = _trained(request, kept, progress)
    except RuntimeError as error:
        if kept.error is not None:  # our own one line, raised while SentencePiece read the text
            raise kept.error from None
        raise _training_error(error) from None
    temp.write_bytes(model.getvalue())
    os.replace(temp, request.output)
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    return {
        "path": request.output,
        "vocab_size": processor.get_piece_size(),
        "model_type": request.model_type,
        "preset": request.preset,
    }


def _prepend(first: str, rest: Iterator[str]) -> Iterator[str]:
    yield first
    yield from rest


def training_line(request, result: dict) -> str:
    """``train-tokenizer``'s summary: what was written and what it was trained on."""
    sample = (
        f" (the default sample for {request.vocab_size:,} pieces, {result['chars'] / 1e6:.1f} M characters; "
        "--max-lines N to choose, 0 for all)"
        if result["sampled"] and request.max_lines is None
        else ""
    )
    inputs = result.get("inputs", {})
    if len(inputs) > 1:  # what each input gave the sample (in proportion to its size)
        shown = ", ".join(f"{Path(path).name} {chars:,}" for path, chars in list(inputs.items())[:4])
        sample += f"; characters from {len(inputs)} inputs: {shown}{', …' if len(inputs) > 4 else ''}"
    notes = [f"{n:,} records skipped ({reason})" for reason, n in result.get("skipped", {}).items()]
    if result.get("cut"):
        notes.append(f"{result['cut']:,} lines over SentencePiece's 16,384 bytes cut at whitespace to fit")
    config = ""
    if result.get("config"):
        config = f" and {result['config']}" + (f" ({result['config_note']})" if result.get("config_note") else "")
    return (
        f"objcli: wrote {result['path']}{config} ({result['model_type']}, "
        f"{result['vocab_size']:,} pieces, preset {result['preset']}, trained on {result['sentences']:,} "
        f"sentences{sample})" + "".join(f"; {note}" for note in notes)
    )
