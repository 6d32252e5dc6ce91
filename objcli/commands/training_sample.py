"""What ``train-tokenizer`` trains on: its inputs read as ``transform`` reads them, fed line by line
(prose) or in chunks of whole lines (``--preset code``), lines SentencePiece would drop cut to fit, token
files refused, and a sample (the default one, or ``--max-lines``) drawn from every input in proportion
to its size. ``counts`` says what was read, cut, skipped and sampled, for the summary."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

from ..errors import ObjcliError
from ..readers import ReadOptions, RecordLog, plan_partitions, read_documents, resolve_inputs

PROGRESS_SECONDS = 5.0
MAX_SENTENCE_BYTES = 16384  # SentencePiece skips longer "sentences"
CODE_CHUNK_CHARS = MAX_SENTENCE_BYTES // 4  # whole lines, at most 4 UTF-8 bytes a character


def _code_chunks(text: str) -> Iterator[str]:
    """Runs of whole lines, ``\\n`` kept, each short enough for the trainer to keep."""
    chunk: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        if chunk and size + len(line) > CODE_CHUNK_CHARS:
            yield "".join(chunk)
            chunk, size = [], 0
        chunk.append(line)
        size += len(line)
    if chunk and "".join(chunk).strip():
        yield "".join(chunk)


def _fitting(sentence: str, counts: dict) -> Iterator[str]:
    """A sentence as SentencePiece keeps it: one over its byte limit (which it would drop without a
    word) cut into pieces under it, at the last whitespace of each where there is one; counted."""
    if len(sentence) <= MAX_SENTENCE_BYTES // 4 or len(sentence.encode("utf-8")) <= MAX_SENTENCE_BYTES:
        yield sentence
        return
    counts["cut"] += 1
    while sentence:
        piece = sentence[:CODE_CHUNK_CHARS]
        space = max(piece.rfind(" "), piece.rfind("\t"), piece.rfind("\n"))
        end = space + 1 if len(sentence) > CODE_CHUNK_CHARS and space >= CODE_CHUNK_CHARS // 2 else len(piece)
        yield sentence[:end]
        sentence = sentence[end:]


def _refuse_token_inputs(inputs: list[str], text_key: str) -> None:
    """Token ids another tool wrote are no text to train on, however they are named (a glob, a folder)."""
    from ..readers.input_kinds import detect
    from ..readers.inputs import InputKind
    from ..run.token_inputs import token_members

    key = "input_ids" if text_key == "text" else text_key
    for spec in inputs:
        for path in token_members(spec, "auto", key):
            found = detect(path, "auto", key)
            if found.kind is not InputKind.TEXT:
                what = f"holds {found.format} token ids" if found.kind is InputKind.TOKENS else "is a token store"
                raise ObjcliError(
                    f"input {path}: {what}, not text; train the tokenizer on the text they were made from"
                )


def sample_sentences(request, counts: dict, show: bool) -> Iterator[str]:
    """The sentences to train on. A sample (the default one, or ``--max-lines``) is drawn from every
    input in proportion to its size, never the first input's lines alone; ``counts["inputs"]`` says what
    each gave."""
    options = ReadOptions(text_key=request.text_key, text_unit=request.text_unit)
    counts["log"], counts["inputs"] = RecordLog(), {}
    _refuse_token_inputs(request.inputs, request.text_key)
    files = resolve_inputs(request.inputs)
    sizes = [f.size or 0 for f in files]
    sampled = request.max_lines or request.sample_chars is not None
    proportional = sampled and all(sizes)  # a stream's size is unknown: the sample is then read in order
    shares = [size / sum(sizes) for size in sizes] if proportional else [1.0] * len(files)
    for file, share in zip(files, shares):
        start = dict(counts)
        sentences = _file_sentences(file, request, options, counts, show)
        for sentence in sentences:
            yield sentence
            if _sample_full(request, counts, start if proportional else {"sentences": 0, "chars": 0}, share):
                counts["sampled"] = True
                sentences.close()
        counts["inputs"][file.path] = counts["chars"] - start["chars"]
        if counts["sampled"] and not proportional:
            return


def _file_sentences(file, request, options, counts: dict, show: bool) -> Iterator[str]:
    log, shown = counts["log"], time.monotonic()
    for partition in plan_partitions([file], 1 << 62, options.text_unit):
        for texts in read_documents(partition, options, log):
            counts["documents"] = log.documents
            if show and time.monotonic() - shown > PROGRESS_SECONDS:
                shown = time.monotonic()
                print(
                    f"objcli: reading: {counts['sentences']:,} sentences from {log.documents:,} documents",
                    file=sys.stderr,
                    flush=True,
                )
            for text in texts:
                for line in _code_chunks(text) if request.preset == "code" else text.split("\n"):
                    if not line.strip():
                        continue
                    for sentence in _fitting(line, counts) if not request.byte_level_bpe else (line,):
                        counts["sentences"] += 1
                        counts["chars"] += len(sentence)
                        yield sentence


def _sample_full(request, counts: dict, before: dict, share: float) -> bool:
    """Whether an input has given its share of the sample (lines with --max-lines, else characters)."""
    if request.max_lines:
        return counts["sentences"] - before["sentences"] >= request.max_lines * share
    return request.sample_chars is not None and counts["chars"] - before["chars"] >= request.sample_chars * share
