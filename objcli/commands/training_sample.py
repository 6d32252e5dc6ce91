"""What ``train-tokenizer`` trains on: its inputs read as ``transform`` reads them, fed line by line
(prose) or in chunks of whole lines (``--preset code``), lines SentencePiece would drop cut to fit, token
files refused, and a sample (the default one, or ``--max-lines``) drawn from every input in proportion
to its size. ``counts`` says what was read, cut, skipped and sampled, for the summary."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

from ..errors import ObjcliError
from ..inputs import ReadOptions, RecordLog, cut_partitions, group_members, read_documents, text_files

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


def _text_inputs(inputs: list[str], text_key: str, text_unit: str) -> list:
    """The inputs' text files, found and recognised once by the door; token ids another tool wrote are no
    text to train on, however they are named (a glob, a folder)."""
    from ..inputs.pieces import InputKind

    members = group_members(inputs, "auto", "input_ids" if text_key == "text" else text_key, text_unit)
    for member in members:
        if member.kind is not InputKind.TEXT:
            found = member.detected
            what = f"holds {found.format} token ids" if found.kind is InputKind.TOKENS else "is a token store"
            raise ObjcliError(
                f"input {member.path}: {what}, not text; train the tokenizer on the text they were made from"
            )
    return text_files(members)


def sample_sentences(request, counts: dict, show: bool) -> Iterator[str]:
    """The sentences to train on. A sample (the default one, or ``--max-lines``) is drawn from every
    input in proportion to its size, never the first input's lines alone, and spread over each input
    (``_spread``), never its first lines alone; ``counts["inputs"]`` says what each gave."""
    options = ReadOptions(text_key=request.text_key, text_unit=request.text_unit)
    counts["log"], counts["inputs"] = RecordLog(), {}
    files = _text_inputs(request.inputs, request.text_key, request.text_unit)
    sizes = [f.size or 0 for f in files]
    sampled = request.max_lines or request.sample_chars is not None
    proportional = sampled and all(sizes)  # a stream's size is unknown: the sample is then read in order
    shares = [size / sum(sizes) for size in sizes] if proportional else [1.0] * len(files)
    for file, share in zip(files, shares):
        start = dict(counts)
        if proportional:
            sentences = _spread(file, request, options, counts, show, share)
        else:
            sentences = _documents_sentences(_read(file, options, counts, show), request, counts)
        for sentence in sentences:
            yield sentence
            if _sample_full(request, counts, start if proportional else {"sentences": 0, "chars": 0}, share):
                counts["sampled"] = True
                sentences.close()
        counts["inputs"][file.path] = counts["chars"] - start["chars"]
        if counts["sampled"] and not proportional:
            return


WINDOWS = 64  # byte ranges a large input's sample is drawn from, spread over it
MIN_WINDOW_BYTES = 1 << 20


def _spread(file, request, options, counts: dict, show: bool, share: float) -> Iterator[str]:
    """An input's share of the sample, spread over it: a file read in byte ranges (plain text, JSON
    lines) gives the first part of each of up to 64 ranges spread evenly over it; one read whole
    (compressed, Parquet, a JSON array) gives the documents with the lowest uniforms keyed to their
    text, up to its share, in their order."""
    windows = cut_partitions([file], max(-(-(file.size or 0) // WINDOWS), MIN_WINDOW_BYTES), options.text_unit)
    if len(windows) > 1:
        for window in windows:
            before = dict(counts)
            sentences = _documents_sentences(_read_partition(window, options, counts, show), request, counts)
            for sentence in sentences:
                yield sentence
                if _sample_full(request, counts, before, share / len(windows)):
                    sentences.close()
        return
    budget = request.max_lines * share if request.max_lines else request.sample_chars * share
    kept, dropped = _lowest_keyed(_read(file, options, counts, show), budget, lines=bool(request.max_lines))
    counts["sampled"] = counts.get("sampled", False) or dropped
    yield from _documents_sentences(iter([kept]), request, counts)


def _lowest_keyed(batches, budget: float, lines: bool) -> tuple[list[str], bool]:
    """The documents with the lowest keyed uniforms (``order.splits.uniforms``, seed 0) whose lines or
    characters fit ``budget``, in reading order (a bottom-k sample, a sample's size in memory), and
    whether any was left out."""
    import heapq

    from ..order.splits import uniforms

    heap: list[tuple[float, int, str]] = []  # (-uniform, position, text): the largest uniform on top
    size, position, dropped_any = 0.0, 0, False
    for texts in batches:
        for u, text in zip(uniforms(list(texts), 0).tolist(), texts):
            heapq.heappush(heap, (-u, position, text))
            size += text.count("\n") + 1 if lines else len(text)
            position += 1
            while heap and size > budget:
                _, _, dropped = heapq.heappop(heap)
                size -= dropped.count("\n") + 1 if lines else len(dropped)
                dropped_any = True
    return [text for _, _, text in sorted(heap, key=lambda kept: kept[1])], dropped_any


def _read(file, options, counts: dict, show: bool) -> Iterator[list[str]]:
    for partition in cut_partitions([file], 1 << 62, options.text_unit):
        yield from _read_partition(partition, options, counts, show)


def _read_partition(partition, options, counts: dict, show: bool) -> Iterator[list[str]]:
    log, shown = counts["log"], time.monotonic()
    for texts in read_documents(partition, options, log):
        counts["documents"] = log.documents
        if show and time.monotonic() - shown > PROGRESS_SECONDS:
            shown = time.monotonic()
            print(
                f"objcli: reading: {counts['sentences']:,} sentences from {log.documents:,} documents",
                file=sys.stderr,
                flush=True,
            )
        yield texts


def _documents_sentences(batches, request, counts: dict) -> Iterator[str]:
    for texts in batches:
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
